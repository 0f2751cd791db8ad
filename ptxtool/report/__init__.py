"""Turning results into output: rich console text for people, JSON for machines."""

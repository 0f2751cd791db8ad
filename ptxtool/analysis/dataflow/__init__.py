"""Data-flow analyses over a CFG: liveness and def-use chains."""

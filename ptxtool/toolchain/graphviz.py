"""Graphviz's `dot`, the one external tool `cfg` uses to turn its dot text into SVG."""

from __future__ import annotations

import shutil
import subprocess

from ptxtool.errors import EnvironmentProblem


def dot_to_svg(text: str) -> str:
    """SVG from dot text; EnvironmentProblem when graphviz is missing or fails."""
    dot = shutil.which("dot")
    if dot is None:
        raise EnvironmentProblem("graphviz `dot` is not installed: install graphviz, or write dot text (-o x.dot)")
    done = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True)
    if done.returncode:
        raise EnvironmentProblem(f"graphviz `dot` failed: {done.stderr.strip()}")
    return done.stdout

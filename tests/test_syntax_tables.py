"""The parse tables' cache: compiled by Lark once, then loaded as plain data; a run that finds them never imports
Lark, and a missing or damaged cache file is rebuilt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ptxtool.syntax import tables

PROBE = (
    "import sys; from ptxtool.syntax import parse, format_module; "
    "m = parse('.version 9.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k() { ret; }\\n'); "
    "format_module(m); print('lark' in sys.modules)"
)


def run_probe(cache: Path) -> str:
    env = {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache)}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True).stdout


def test_tables_are_cached_and_a_warm_run_does_not_import_lark(tmp_path: Path) -> None:
    assert run_probe(tmp_path).strip() == "True"  # the first run compiles the tables with Lark
    (cached,) = (tmp_path / "ptxtool").glob("tables-*.marshal")
    assert run_probe(tmp_path).strip() == "False"
    cached.write_bytes(b"not marshal data")
    assert run_probe(tmp_path).strip() == "True"  # damaged: rebuilt, and written again
    assert run_probe(tmp_path).strip() == "False"


def test_the_cached_tables_are_the_compiled_ones(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tables.load.cache_clear()
    try:
        first = tables.load()
        tables.load.cache_clear()
        second = tables.load()
    finally:
        tables.load.cache_clear()
    assert first is not second and first == second  # compiled, then read back from the file

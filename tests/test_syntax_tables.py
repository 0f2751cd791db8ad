"""The parse tables' cache: compiled by Lark once, then loaded as plain data; a run that finds them never imports
Lark, and a missing or damaged cache file is rebuilt."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path

from ptxtool.syntax import format_module, parse, tables

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


def test_a_warm_run_names_its_cache_file_without_zlib(tmp_path: Path) -> None:
    """zlib is an extension module (a fraction of a millisecond to load) that nothing else in a fmt run needs."""
    probe = PROBE.replace("'lark' in sys.modules", "'lark' in sys.modules, 'zlib' in sys.modules")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)]
    runs.append(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True))
    assert runs[0].stdout.startswith("True")  # Lark built the tables (and may have loaded zlib itself)
    assert runs[1].stdout.strip() == "False False"


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


def test_a_cache_file_of_another_shape_is_rebuilt(tmp_path: Path) -> None:
    """Valid marshal data under the right name but in an older layout (without the statement starts) is not
    trusted."""
    run_probe(tmp_path)
    (cached,) = (tmp_path / "ptxtool").glob("tables-*.marshal")
    key, data = marshal.loads(cached.read_bytes())
    cached.write_bytes(marshal.dumps((key, data[:6])))
    assert run_probe(tmp_path).strip() == "True"
    assert run_probe(tmp_path).strip() == "False"


def test_without_a_home_or_with_a_read_only_one_the_tables_still_load(tmp_path: Path) -> None:
    """No cache directory: compiled each run; one that cannot be written (a read-only home): compiled, not cached."""
    probe = PROBE.replace("print('lark' in sys.modules)", "print(format_module(m), end='')")
    expected = format_module(parse(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n"))
    base = {"PATH": "/usr/bin:/bin"}
    for env in ({**base, "HOME": str(tmp_path / "missing")}, {**base, "PTXTOOL_CACHE_DIR": "off"}):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
        assert done.stdout == expected and not done.stderr
    blocked = tmp_path / "a-file"  # a cache directory under a file: no write succeeds there, even as root
    blocked.write_text("")
    env = {**base, "PTXTOOL_CACHE_DIR": str(blocked / "ptxtool")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert done.stdout == expected and not done.stderr


def test_stored_statement_starts_and_rules_are_those_of_the_rows() -> None:
    """What the cache stores beside the rows (the driver's error recovery and node builders read them) agrees with
    the rows it was computed from."""
    grammar = tables.load()
    starts = {s for s, row in grammar.states.items() if "statement" in row or "module_item" in row}
    assert starts == grammar.statement_starts and starts
    for row in grammar.states.values():
        for action in row.values():
            if action.__class__ is int:
                assert action in grammar.states
            else:
                size, index, goto = action  # a reduction: children popped, the rule, the goto (a rule's name)
                assert grammar.rule(index).size == size and not goto.isupper()

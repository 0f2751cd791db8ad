"""The lexer's and the parser's regular expressions are kept compiled between runs (syntax/patterns.py): a run that
finds them compiles none of them, what it loads behaves as `re.compile` makes it, and a damaged or missing cache
file only means compiling again."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ptxtool.syntax import patterns
from ptxtool.syntax.parser import _parser

# a fresh process: parse and print a file that takes every kept pattern, then say which patterns `re` compiled and
# what came out (a digest of the text)
PROBE = """
import hashlib, re, sys
from re import _compiler
made = []
original = _compiler.compile
def spy(p, flags=0):
    made.append(p if isinstance(p, str) else "?")
    return original(p, flags)
_compiler.compile = spy
from ptxtool.syntax import format_module, parse
from ptxtool.syntax.parser import _parser
_, lexer, _, _ = _parser()
ours = {lexer.master.pattern, lexer.instruction_line, lexer.declaration_line, lexer.loc_line}
text = open(sys.argv[1], encoding="utf-8").read()
out = format_module(parse(text))
print(sum(p in ours for p in made), hashlib.sha1(out.encode()).hexdigest())
"""


def _kernel(path: Path) -> Path:
    """A file with enough plain statements for the whole-line patterns, a debug section and a long table."""
    body = "".join(f"\t.reg .b32 %r{k};\n\t.loc 1 {k} 2\n\tadd.s32 %r{k}, %r{k}, {k};\n$L{k}:\n" for k in range(100))
    table = ", ".join(str(k % 256) for k in range(100))
    path.write_text(
        ".version 9.0\n.target sm_80\n.address_size 64\n"
        f".global .align 1 .b8 t[100] = {{{table}}};\n"
        f".visible .entry k()\n{{\n{body}\tret;\n}}\n"
        ".section .debug_str\n{\n$L__str:\n.b8 1,2,3\n.b8 4\n}\n",
        encoding="utf-8",
    )
    return path


def _probe(cache: Path, source: Path) -> tuple[int, str]:
    env = {"XDG_CACHE_HOME": str(cache), "HOME": str(cache), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(source)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    compiled, digest = done.stdout.split()
    return int(compiled), digest


def test_a_warm_run_compiles_none_of_the_kept_patterns(tmp_path: Path) -> None:
    source = _kernel(tmp_path / "k.ptx")
    first = _probe(tmp_path / "cache", source)
    assert first[0] == 4  # the premise: a cold run compiles all four
    (kept,) = (tmp_path / "cache" / "ptxtool").glob("patterns-*.marshal")
    assert _probe(tmp_path / "cache", source) == (0, first[1])
    kept.write_bytes(b"not marshal data")  # damaged: compiled again, the same text, and written again
    assert _probe(tmp_path / "cache", source) == first
    assert _probe(tmp_path / "cache", source) == (0, first[1])


def test_a_kept_pattern_is_the_one_re_compiles(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(patterns, "_known", {})
    monkeypatch.setattr(patterns, "_kept", None)
    _, lexer, _, _ = _parser()
    samples = ["\tmov.u32 %r1, %r2; // c\n", "@!%p1 bra $L1;", ".reg .b32 %r<4>, %q[2];", ".loc 1 2 3\n\tret;", "x:"]
    for pattern, flags in [(lexer.master.pattern, re.S), (lexer.instruction_line, 0), (lexer.declaration_line, 0)]:
        made = patterns.compiled(pattern, flags)  # compiled, and kept in the file
        monkeypatch.setattr(patterns, "_known", {})
        monkeypatch.setattr(patterns, "_kept", None)
        loaded = patterns.compiled(pattern, flags)  # read back from the file
        reference = re.compile(pattern, flags)
        assert loaded is not made and (pattern, flags) in patterns._kept and loaded.pattern == reference.pattern
        assert (loaded.flags, loaded.groups) == (reference.flags, reference.groups)
        assert loaded.groupindex == reference.groupindex
        for text in samples:
            assert [m.span(0) for m in loaded.finditer(text)] == [m.span(0) for m in reference.finditer(text)]
            assert [m.groups() for m in loaded.finditer(text)] == [m.groups() for m in reference.finditer(text)]

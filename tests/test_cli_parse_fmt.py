"""`ptxtool parse` and `ptxtool fmt` as a user meets them: outputs, exit codes, write modes, and clear errors
(never a traceback) for bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.syntax import ast, format_module, parse

RARE = SAMPLES / "rare_syntax.ptx"
LARK_NAMES = re.compile(
    r"\b(?:SEMICOLON|COMMA|LBRACE|RBRACE|LPAR|RPAR|LSQB|RSQB|DOTWORD|WORD|INT|FLOAT|STRING|\$END|__ANON)"
)
BROKEN = (
    ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry k()\n{\n\t.reg .b32 %r<4>;\n"
    "\tmov.u32 %r1 1;\n"  # line 8: missing comma
    "\tadd.s32 %r2, %r1, ;\n"  # line 9: missing operand
    "\tmov.u32 %r3, [%r1;\n"  # line 10: unclosed bracket
    "\tret;\n}\n"
)


def run(*args: str, input: bytes | str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def ptxtool(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """The real command in a subprocess, as a shell runs it."""
    return subprocess.run([sys.executable, "-m", "ptxtool.cli", *args], capture_output=True, text=True, **kwargs)


@pytest.fixture
def unformatted(tmp_path: Path) -> Path:
    path = tmp_path / "rare.ptx"
    path.write_text(RARE.read_text().replace("\t", "    ").replace(", ", ","))
    return path


@pytest.fixture
def formatted(tmp_path: Path) -> Path:
    path = tmp_path / "formatted.ptx"
    path.write_text(format_module(parse(RARE.read_text())))
    return path


# ---------------------------------------------------------------- parse


def test_parse_prints_a_summary() -> None:
    result = run("parse", str(RARE))
    module = parse(RARE.read_text())
    count = sum(1 for f in module.functions if f.body for _ in ast.instructions(f.body))
    assert result.exit_code == 0
    assert result.stdout == f"{RARE}: ok — PTX 8.0, sm_90; 4 kernels, 3 functions, {count} instructions\n"
    assert count == 70  # grep -cP of instruction lines in the sample, labels and directives left out


def test_parse_several_files_reports_each_and_fails_on_the_bad_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text(BROKEN)
    result = run("parse", str(RARE), str(bad), str(SAMPLES / "constructs.ptx"))
    assert result.exit_code == 2
    assert result.stdout.count(": ok — ") == 2
    assert f"{bad}:8:" in result.stderr


def test_parse_stdin() -> None:
    result = run("parse", "-", input=RARE.read_bytes())
    assert result.exit_code == 0 and result.stdout.startswith("<stdin>: ok — PTX 8.0, sm_90; 4 kernels")


def test_unclosed_block_is_reported_at_the_end_of_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "open.ptx"
    bad.write_text(".version 9.0\n.target sm_90\n.visible .entry k()\n{\n\tret;\n")
    result = run("fmt", str(bad))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{bad}:5:") and "end of file" in result.stderr
    assert not LARK_NAMES.search(result.stderr)


def test_parse_json(tmp_path: Path) -> None:
    result = run("parse", "--json", str(RARE))
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["schema"].startswith("ptxtool.ast/")
    (entry,) = document["files"]
    assert entry["path"] == str(RARE) and entry["module"]["node"] == "Module"
    kernels = [i["name"] for i in entry["module"]["items"] if i["node"] == "Function" and i["kind"] == ".entry"]
    assert kernels == ["switcher", "indirect", "clustered", "capped"]


def test_parse_json_of_a_bad_file_keeps_stdout_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text(BROKEN)
    result = run("parse", "--json", str(RARE), str(bad))
    assert result.exit_code == 2
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == [str(RARE)]


# ---------------------------------------------------------------- fmt: outputs and write modes


def test_fmt_to_stdout(unformatted: Path) -> None:
    result = run("fmt", str(unformatted))
    assert result.exit_code == 0
    assert result.stdout == format_module(parse(RARE.read_text()))
    assert unformatted.read_text() != result.stdout  # the input is left alone


def test_fmt_output_file(unformatted: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.ptx"
    result = run("fmt", str(unformatted), "-o", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text() == format_module(parse(RARE.read_text()))


def test_fmt_stdin() -> None:
    result = run("fmt", "-", input=RARE.read_bytes())
    assert result.exit_code == 0
    assert result.stdout == format_module(parse(RARE.read_text()))


def test_fmt_in_place_rewrites_atomically_and_keeps_the_mode(unformatted: Path) -> None:
    os.chmod(unformatted, 0o640)
    inode = unformatted.stat().st_ino
    result = run("fmt", "--in-place", str(unformatted))
    assert result.exit_code == 0
    assert unformatted.read_text() == format_module(parse(RARE.read_text()))
    assert unformatted.stat().st_ino != inode, "written in place instead of replaced by a renamed temporary"
    assert unformatted.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in unformatted.parent.iterdir()) == ["rare.ptx"], "a temporary file was left behind"


def test_fmt_in_place_leaves_a_formatted_file_untouched(formatted: Path) -> None:
    before = formatted.stat()
    time.sleep(0.01)
    result = run("fmt", "--in-place", str(formatted))
    assert result.exit_code == 0
    after = formatted.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_fmt_in_place_through_a_symbolic_link(unformatted: Path) -> None:
    link = unformatted.parent / "link.ptx"
    link.symlink_to(unformatted.name)
    assert run("fmt", "--in-place", str(link)).exit_code == 0
    assert link.is_symlink() and unformatted.read_text() == format_module(parse(RARE.read_text()))


def test_fmt_check(unformatted: Path, formatted: Path) -> None:
    text = unformatted.read_text()
    changed = run("fmt", "--check", str(unformatted))
    assert changed.exit_code == 1 and changed.stdout == ""
    assert "would reformat" in changed.stderr and str(unformatted) in changed.stderr
    assert unformatted.read_text() == text
    clean = run("fmt", "--check", str(formatted))
    assert clean.exit_code == 0
    both = run("fmt", "--check", str(formatted), str(unformatted))
    assert both.exit_code == 1


def test_fmt_diff(unformatted: Path, formatted: Path) -> None:
    result = run("fmt", "--diff", "--no-color", str(unformatted))
    assert result.exit_code == 0
    assert result.stdout.startswith(f"--- {unformatted}\n+++ {unformatted}\n@@ ")  # absolute: no a/, b/
    assert "\n-    ld.param.b32 %r1,[x];\n" in result.stdout and "\n+\tld.param.b32 %r1, [x];\n" in result.stdout
    assert "\x1b[" not in result.stdout
    coloured = run("fmt", "--diff", "--color", str(unformatted))
    assert "\x1b[31m-" in coloured.stdout and "\x1b[32m+" in coloured.stdout
    assert run("fmt", "--diff", str(formatted)).stdout == ""
    assert run("fmt", "--check", "--diff", "--no-color", str(unformatted)).exit_code == 1


def test_each_broken_line_gets_exactly_its_own_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text(BROKEN)
    err = run("parse", str(bad)).stderr
    located = re.findall(rf"^{re.escape(str(bad))}:(\d+):(\d+): error:", err, re.M)
    assert [(int(line), int(col)) for line, col in located] == [(8, 14), (9, 20), (10, 19)], err


@pytest.mark.parametrize(
    "args",
    [
        ("fmt", "{a}", "{b}"),
        ("fmt", "{a}", "{b}", "-o", "{out}"),
        ("fmt", "--in-place", "-"),
        ("fmt",),
        ("parse",),
        ("fmt", "--no-such-option", "{a}"),
        ("fmt", "--check", "--in-place", "{a}"),  # --check writes nothing: not silently one or the other
        ("fmt", "--check", "-o", "{out}", "{a}"),
        ("fmt", "--check", "-", "-"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], unformatted: Path, formatted: Path, tmp_path: Path) -> None:
    names = {"a": unformatted, "b": formatted, "out": tmp_path / "out.ptx"}
    result = CliRunner().invoke(main, [a.format(**names) for a in args])
    assert result.exit_code == 2
    assert "Usage:" in result.stderr or "usage" in result.stderr.lower()
    assert unformatted.read_text() != formatted.read_text() and not (tmp_path / "out.ptx").exists()


# ---------------------------------------------------------------- errors


def test_syntax_errors_are_all_reported_with_line_caret_and_ptx_words(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text(BROKEN)
    result = run("fmt", str(bad))
    assert result.exit_code == 2 and result.stdout == ""
    err = result.stderr
    located = re.findall(rf"^{re.escape(str(bad))}:(\d+):(\d+): error: (.+)$", err, re.M)
    assert [(int(line), int(col)) for line, col, _ in located][:2] == [(8, 14), (9, 20)], err
    assert any(int(line) == 10 for line, _, _ in located), err
    assert "\tmov.u32 %r1 1;".replace("\t", " ") in err.replace("\t", " ")
    lines = err.splitlines()
    source_at = next(i for i, s in enumerate(lines) if s.strip() == "mov.u32 %r1 1;")
    caret = lines[source_at + 1]
    assert caret.strip() == "^" and lines[source_at][caret.index("^")] == "1", "the caret is under the bad token"
    assert not LARK_NAMES.search(err), f"Lark terminal names in the message: {err}"
    assert "expected" in located[0][2]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: d / "missing.ptx", "no such file"),
        (lambda d: d, "directory"),
        (lambda d: _write(d / "empty.ptx", b""), "empty"),
        (lambda d: _write(d / "blank.ptx", b"\n  \n\t\n"), "empty"),
        (lambda d: _write(d / "k.cubin", b"\x7fELF\x02\x01\x01\x00" + bytes(200)), "binary"),
        (lambda d: _write(d / "latin1.ptx", b".version 9.0\n.target caf\xe9\n"), "0xE9 is not ASCII"),
    ],
    ids=["missing", "directory", "empty", "blank", "binary", "non-ascii-code"],
)
@pytest.mark.parametrize("command", ["parse", "fmt"])
def test_bad_inputs_get_a_clear_message(make, words: str, command: str, tmp_path: Path) -> None:
    path = make(tmp_path)
    result = run(command, str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{path}:") and "error:" in result.stderr and words in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_non_utf8_error_points_at_the_byte(tmp_path: Path) -> None:
    path = _write(tmp_path / "latin1.ptx", b".version 9.0\n.target s\xe9\n")
    assert f"{path}:2:10: error:" in run("parse", str(path)).stderr


def test_real_command_never_prints_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text(BROKEN)
    binary = _write(tmp_path / "k.cubin", b"\x7fELF" + bytes(100))
    for args in (("parse", str(bad)), ("fmt", str(binary)), ("fmt", str(tmp_path / "nope.ptx")), ("fmt", "-")):
        result = ptxtool(*args, input="not ptx at all {{{")
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and "error:" in result.stderr


def test_a_100_mb_line_of_garbage_is_refused_fast_and_clearly(tmp_path: Path) -> None:
    path = tmp_path / "garbage.ptx"
    path.write_text(".version 9.0\n.target sm_90\n.address_size 64\n" + "x" * (100 * 1024 * 1024) + "\n")
    start = time.perf_counter()
    result = ptxtool("fmt", str(path), timeout=60)
    assert time.perf_counter() - start < 20
    assert result.returncode == 2 and result.stderr.startswith(f"{path}:4:1: error:")
    assert "Traceback" not in result.stderr and len(result.stderr) < 2000, "the offending line must be cut"


def test_a_100_mb_line_is_refused_fast_and_clearly(tmp_path: Path) -> None:
    path = tmp_path / "huge.ptx"
    with path.open("w") as f:
        f.write(".version 9.0\n.target sm_90\n.address_size 64\n.global .u32 x = ")
        f.write("1+" * (50 * 1024 * 1024) + "1;\n")
    start = time.perf_counter()
    result = ptxtool("fmt", str(path), timeout=60)
    assert time.perf_counter() - start < 20
    assert result.returncode == 2, result.stderr[-500:]
    assert "Traceback" not in result.stderr and result.stderr.startswith(f"{path}:4")
    assert len(result.stderr) < 2000, "the offending line must be cut, not printed whole"

"""The program's short path for fmt (ptxtool/program.py) does what the click command does: the same exit code, stdout,
stderr and files for every command line, plain or not, and it reads only spellings that click's fmt declares."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptxtool import program

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n\n"
CANONICAL = HEAD + ".visible .entry k()\n{\n\tret;\n}\n"
MESSY = HEAD + ".visible .entry k( )\n{\n   ret ;\n}\n"
BAD = HEAD + ".visible .entry k()\n{\n\tret\n}\n"

# (arguments, standard input): each run in a fresh folder holding the files below
LINES = [
    (["fmt", "messy.ptx", "-o", "out.ptx"], ""),
    (["fmt", "-o", "out.ptx", "messy.ptx"], ""),
    (["fmt", "messy.ptx"], ""),
    (["fmt", "messy.ptx", "-o", "-"], ""),
    (["fmt", "--output", "out.ptx", "canonical.ptx"], ""),
    (["fmt", "--check", "canonical.ptx", "messy.ptx"], ""),
    (["fmt", "--check", "canonical.ptx"], ""),
    (["fmt", "-i", "messy.ptx", "canonical.ptx"], ""),
    (["fmt", "--in-place", "--in-place", "messy.ptx"], ""),
    (["fmt", "bad.ptx", "-o", "out.ptx"], ""),
    (["fmt", "--check", "bad.ptx", "messy.ptx"], ""),
    (["fmt", "missing.ptx"], ""),
    (["fmt", "-"], MESSY),
    (["fmt", "-", "-o", "out.ptx"], BAD),
    (["fmt", "-i", "-"], MESSY),  # usage: click says it
    (["fmt", "messy.ptx", "canonical.ptx"], ""),  # usage
    (["fmt", "--check", "-o", "out.ptx", "messy.ptx"], ""),  # usage
    (["fmt", "messy.ptx", "-o", "folder"], ""),  # a directory: click's Path refuses it
    (["fmt", "messy.ptx", "-o"], ""),
    (["fmt", "-o", "a.ptx", "-o", "b.ptx", "messy.ptx"], ""),
    (["fmt", "--", "messy.ptx"], ""),
    (["fmt", "--diff", "messy.ptx"], ""),
    (["fmt"], ""),
    (["fmt", "--help"], ""),
    (["fmt", "--bogus", "messy.ptx"], ""),
    (["--debug", "fmt", "messy.ptx"], ""),
]


def _folder(root: Path) -> Path:
    root.mkdir()
    for name, text in (("canonical.ptx", CANONICAL), ("messy.ptx", MESSY), ("bad.ptx", BAD)):
        (root / name).write_text(text, encoding="utf-8")
    (root / "folder").mkdir()
    return root


def _run(entry: str, args: list[str], stdin: str, cwd: Path) -> tuple:
    """`entry()` (`module.function`) as the program `ptxtool` (the name click's messages show)."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    module, function = entry.rsplit(".", 1)
    code = f"import sys\nsys.argv[0] = 'ptxtool'\nfrom {module} import {function}\n{function}()\n"
    done = subprocess.run(
        [sys.executable, "-c", code, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env
    )
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted(cwd.iterdir()) if p.is_file()}
    return done.returncode, done.stdout, done.stderr, files


@pytest.mark.parametrize(("args", "stdin"), LINES, ids=[" ".join(a) or "none" for a, _ in LINES])
def test_the_short_path_ends_as_click_does(args: list[str], stdin: str, tmp_path: Path) -> None:
    short = _run("ptxtool.program.run", args, stdin, _folder(tmp_path / "program"))  # what the script runs
    clicked = _run("ptxtool.cli.main", args, stdin, _folder(tmp_path / "click"))
    assert short == clicked


@pytest.mark.parametrize(
    ("args", "plain"),
    [
        (["fmt", "a.ptx", "-o", "b.ptx"], (["a.ptx"], {"output": "b.ptx"})),
        (["fmt", "-", "-o", "-"], (["-"], {"output": None})),
        (["fmt", "--check", "a.ptx", "b.ptx"], (["a.ptx", "b.ptx"], {"check": True})),
        (["fmt", "-i", "--check", "a.ptx"], (["a.ptx"], {"in_place": True, "check": True})),
        (["fmt", "a.ptx", "-oout.ptx"], None),
        (["fmt", "a.ptx", "--output=out.ptx"], None),
        (["fmt", "a.ptx", "-o", "-x"], None),
        (["fmt", "-i", "-i", "a.ptx"], None),
        (["fmt", "--color", "a.ptx"], None),
        (["parse", "a.ptx"], None),
        ([], None),
    ],
)
def test_what_the_short_path_reads(args: list[str], plain: tuple | None) -> None:
    assert program.plain_fmt(args) == plain


def test_the_short_path_reads_only_what_click_s_fmt_declares() -> None:
    from ptxtool.cli import main

    params = {opt: p for p in main.commands["fmt"].params for opt in p.opts}
    for spelling, name in program.FLAGS.items():
        assert params[spelling].is_flag and params[spelling].name == name
    for spelling in program.OUTPUT:
        assert not params[spelling].is_flag and params[spelling].name == "output"


def test_a_plain_fmt_line_never_imports_click(tmp_path: Path) -> None:
    source = _folder(tmp_path / "f") / "messy.ptx"
    code = (
        "import sys\nfrom ptxtool.program import main\nsys.argv[1:] = ['fmt', sys.argv[1], '-o', sys.argv[2]]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print('click' in sys.modules)\n"
    )
    out = tmp_path / "out.ptx"
    done = subprocess.run([sys.executable, "-c", code, str(source), str(out)], capture_output=True, text=True)
    assert done.stdout.split() == ["False"], done.stderr
    assert out.read_text(encoding="utf-8") == CANONICAL


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a shell")
def test_the_installed_script_is_the_program() -> None:
    """`ptxtool` (the console script pip writes) enters through program.run, so the short path is what users get."""
    script = Path(sys.executable).with_name("ptxtool")
    if not script.exists():
        pytest.skip("ptxtool is not installed next to this Python")
    assert "from ptxtool.program import run" in script.read_text(encoding="utf-8")

"""fmt's start-up (issue 12: on the `-G` file its imports count against a ptxas run of a tenth of a second): what it
reads, parses, prints, writes and reports with imports none of the modules below. Each is only on a branch a default
`fmt FILE -o OUT` does not take (dataclasses' functions, a frozen record's error, --diff, progress bars) or only in
annotations, which `TYPE_CHECKING = False` blocks keep from running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# the modules fmt's path imports, as `python -X importtime -c LINE` measures them (benchmarks/parse_throughput.py)
LINE = (
    "from ptxtool.sources import read_inputs; from ptxtool.services import fmt; "
    "from ptxtool.report import emit_and_exit; from ptxtool.syntax import format_module, parse"
)
NEVER = (
    "dataclasses",  # records make dataclasses without it (ptxtool/records.py)
    "inspect",  # dataclass's docstrings and signatures
    "ast",  # inspect's
    "tokenize",
    "typing",
    "click",
    "contextlib",
    "copy",
    "threading",
    "difflib",  # --diff's
    "bisect",  # an extension module to load (comments.py halves a block's statements itself)
    "zlib",  # the cache files are named by cache.checksum
)
# what a `fmt FILE -o OUT` that succeeds prints nothing with, and so never loads (report.SILENT)
QUIET = ("ptxtool.report.text", "ptxtool.report.console")
KERNEL = ".version 8.0\n.target sm_80\n.address_size 64\n\n// k\n.visible .entry k()\n{\n\tret;\n}\n"


def _loaded(code: str, *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_fmt_imports_load_none_of_the_costly_modules() -> None:
    loaded = _loaded(f"{LINE}\nimport sys\nprint(' '.join(sorted(sys.modules)))")
    assert {"ptxtool.syntax.parser", "ptxtool.syntax.printer", "ptxtool.errors", "re"} <= loaded  # the premise
    assert sorted(m for m in NEVER if m in loaded) == []


def test_a_fmt_run_loads_none_of_them_either(tmp_path: Path) -> None:
    """The program's fmt, end to end: parse (comments attached), print, write, report."""
    source, out = tmp_path / "k.ptx", tmp_path / "out.ptx"
    source.write_text(KERNEL.replace("\tret;", "  ret ;"), encoding="utf-8")
    code = (
        "import sys\nfrom ptxtool.program import main\nsys.argv[1:] = ['fmt', sys.argv[1], '-o', sys.argv[2]]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "finally:\n    print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = _loaded(code, str(source), str(out))
    assert {"ptxtool.syntax.comments", "ptxtool.report", "ptxtool.guard"} <= loaded  # the premise
    assert out.read_text(encoding="utf-8") == KERNEL
    assert sorted(m for m in NEVER + QUIET if m in loaded) == []


def _garbage(tmp_path: Path, *args: str) -> int:
    """What the collector, off during the fmt run (program.py), would find at its end."""
    code = (
        "import gc, sys\nfrom ptxtool.program import main\nsys.argv[1:] = ['fmt', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "finally:\n    enabled = gc.isenabled()\n    gc.unfreeze()\n    print(enabled, gc.collect())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path)
    enabled, garbage = done.stdout.split()
    assert enabled == "False", done.stderr
    return int(garbage)


def test_a_fmt_run_goes_without_the_cycle_collector_and_leaves_it_nothing_that_grows_with_the_input(
    tmp_path: Path,
) -> None:
    """program.py turns the collector off for fmt (start-up makes thousands of objects it would walk in vain): sound
    only while formatting makes no cyclic garbage per statement or per file, good or bad, which 3,000 statements and
    40 files would show."""
    body = "".join(f"\tadd.s32 %r{i % 7}, %r{i % 5}, {i}; // c{i}\n" for i in range(3000))
    (tmp_path / "big.ptx").write_text(
        KERNEL.replace("\tret;\n", ".reg .s32 %r<8>;\n" + body + "\tret;\n"), encoding="utf-8"
    )
    assert _garbage(tmp_path, "big.ptx", "-o", "out.ptx") < 1000
    assert (tmp_path / "out.ptx").read_text(encoding="utf-8").count("add.s32") == 3000
    for n in range(20):
        (tmp_path / f"good{n}.ptx").write_text(KERNEL.replace("\tret;", "  ret ;"), encoding="utf-8")
        (tmp_path / f"bad{n}.ptx").write_text(KERNEL.replace("k()", "k("), encoding="utf-8")
    few = _garbage(tmp_path, "--check", "good0.ptx", "bad0.ptx")
    assert (
        few < 1000
        and _garbage(tmp_path, "--check", *(f"{k}{n}.ptx" for k in ("good", "bad") for n in range(20))) < few + 100
    )


_EXIT_STATE = (
    "import atexit, sys\nbefore = atexit._ncallbacks()\nfrom ptxtool.program import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "finally:\n    threads = sys.modules.get('threading')\n"
    "    print(atexit._ncallbacks() - before, threads.active_count() if threads else 1, file=sys.__stderr__)\n"
)


@pytest.mark.parametrize(
    "args",
    [["k.ptx", "-o", "out.ptx"], ["k.ptx"], ["--check", "k.ptx", "messy.ptx"], ["-i", "messy.ptx"], ["bad.ptx"]],
    ids=["output", "stdout", "check", "in-place", "bad"],
)
def test_a_short_fmt_run_leaves_nothing_for_the_exit_it_skips(tmp_path: Path, args: list[str]) -> None:
    """program.run ends a short fmt run with os._exit (no teardown): sound only while nothing it loads registers an
    exit handler or starts a thread, whatever the run prints (errors load the console and rich)."""
    (tmp_path / "k.ptx").write_text(KERNEL, encoding="utf-8")
    (tmp_path / "messy.ptx").write_text(KERNEL.replace("\tret;", "  ret ;"), encoding="utf-8")
    (tmp_path / "bad.ptx").write_text(KERNEL.replace("ret;", "ret"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_STATE, "fmt", *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.stderr.split()[-2:] == ["0", "1"], done.stderr

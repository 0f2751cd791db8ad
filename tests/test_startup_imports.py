"""Start-up: each command imports what it uses when it runs (benchmarks/startup.py times it). `--help` needs neither
the parser nor rich; `fmt` and `parse` of a valid file print nothing on stderr, so they never load rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

KERNEL = ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry k()\n{\n\tret;\n}\n"


def imported(*args: str) -> set[str]:
    """The modules a `ptxtool` command imports, from `python -X importtime`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ptxtool.cli", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


# What importing the CLI must not load: each is imported inside the command (or the branch) that uses it. An eager
# `import` of any of these in cli.py, guard.py, help.py or report/__init__.py puts it back into every run.
LAZY = (
    "ptxtool.errors",  # its dataclasses: guard imports it when a command runs
    "ptxtool.sources",
    "ptxtool.report.console",
    "ptxtool.report.text",
    "ptxtool.isa.targets",  # --block-size's limit, read when the option is used or shown
    "ptxtool.syntax.names",
    "ptxtool.syntax.parser",
    "ptxtool.services",
    "dataclasses",
    "json",
    "tempfile",
    "pathlib",
    "difflib",
    "subprocess",
    "tomllib",
    "importlib.metadata",
    "rich",
)


def test_importing_the_cli_leaves_the_lazy_modules_out() -> None:
    code = "import sys, ptxtool.cli; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "click" in loaded and "ptxtool.cli" in loaded  # the premise: the list is real
    assert sorted(m for m in LAZY if m in loaded) == []


def test_block_size_reads_its_limit_from_the_isa_table() -> None:
    """The lazy range is the table's: shown in --help, enforced on a value."""
    from click.testing import CliRunner

    from ptxtool.cli import main
    from ptxtool.isa.targets import MAX_BLOCK_THREADS

    runner = CliRunner()
    for command in ("inspect", "report"):
        done = runner.invoke(main, [command, "--block-size", str(MAX_BLOCK_THREADS + 1), "k.ptx"])
        assert done.exit_code == 2 and f"is not in the range 1<=x<={MAX_BLOCK_THREADS}" in done.output, done.output


def test_help_imports_neither_the_parser_nor_rich() -> None:
    modules = imported("--help")
    assert "click" in modules  # the premise: the list is real
    assert "ptxtool.syntax.parser" not in modules and "rich" not in modules


@pytest.mark.parametrize("command", [("fmt",), ("parse",), ("parse", "--check")])
def test_fmt_and_parse_of_a_valid_file_never_load_rich(command: tuple[str, ...], tmp_path: Path) -> None:
    source = tmp_path / "k.ptx"
    source.write_text(KERNEL, encoding="utf-8")
    modules = imported(*command, str(source), *(("-o", str(tmp_path / "out.ptx")) if command == ("fmt",) else ()))
    assert "ptxtool.syntax.parser" in modules
    assert "rich" not in modules


# What `fmt FILE -o OUT` must not load (issue 12: on a data-heavy file its start-up counts against a ptxas run of a
# tenth of a second): the file reader and the parser's caches use os.path, report.text imports json and difflib where
# it uses them (click itself imports difflib for `-o`, trying it as a long option first), and nothing above syntax/.
FMT_NEVER = (
    "pathlib",
    "urllib.parse",
    "ipaddress",
    "json",
    "tempfile",
    "rich",
    "lark",
    "ptxtool.isa",
    "ptxtool.analysis",
    "ptxtool.syntax.names",
    "ptxtool.toolchain",
    "subprocess",
    "tomllib",
    "importlib.metadata",
    "hashlib",
    "pickle",
    "shutil",
)


def test_fmt_loads_only_what_formatting_needs(tmp_path: Path) -> None:
    source = tmp_path / "k.ptx"
    source.write_text(KERNEL, encoding="utf-8")
    code = (
        "import sys\nfrom ptxtool.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    command = [sys.executable, "-c", code, "fmt", str(source), "-o", str(tmp_path / "out.ptx")]
    modules = set(subprocess.run(command, capture_output=True, text=True, check=True).stdout.split())
    assert {"ptxtool.syntax.parser", "ptxtool.services.fmt", "ptxtool.sources"} <= modules  # the premise
    assert sorted(m for m in FMT_NEVER if m in modules) == []
    assert (tmp_path / "out.ptx").read_text(encoding="utf-8") == KERNEL  # and it wrote the file (already canonical)


def test_an_error_still_prints_through_rich(tmp_path: Path) -> None:
    """The lazy console is the same console: a bad file's diagnostic comes out with its position."""
    source = tmp_path / "bad.ptx"
    source.write_text(KERNEL.replace("ret;", "ret"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "ptxtool.cli", "parse", str(source)], capture_output=True, text=True)
    assert done.returncode == 2 and f"{source}:7:5: error: missing ';'" in done.stderr, done.stderr


def test_a_command_builds_only_its_own_click_objects(tmp_path: Path) -> None:
    """Importing the CLI builds no command; running `fmt` builds `fmt` alone; --help builds them all."""
    source = tmp_path / "k.ptx"
    source.write_text(KERNEL, encoding="utf-8")
    code = (
        "import sys, ptxtool.cli as cli\n"
        "known = cli.main.commands.known\n"
        "def built(): return sorted(n for n, c in known.items() if getattr(c, 'built', c) is not None)\n"
        "print(built())\n"
        "cli.main(sys.argv[1:], standalone_mode=False)\n"
        "print(built())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "fmt", str(source), "-o", str(tmp_path / "out.ptx")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["[]", "['fmt']"]
    assert (tmp_path / "out.ptx").read_text(encoding="utf-8").startswith(".version 8.0")
    from click.testing import CliRunner

    from ptxtool.cli import main

    listed = CliRunner().invoke(main, ["--help"]).output.split("Commands:")[1].split()
    assert [name for name in sorted(main.commands) if name in listed] == sorted(main.commands)


def test_the_program_freezes_the_collector_at_exit_and_an_in_process_call_does_not(tmp_path: Path) -> None:
    """Run as the program, exit's collections have nothing left to walk (gc.freeze); called with a list of arguments
    (a test, CliRunner) the command leaves the caller's collector alone."""
    source = tmp_path / "k.ptx"
    source.write_text(KERNEL, encoding="utf-8")
    code = (
        "import atexit, gc, sys\nfrom ptxtool.cli import main\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        "if sys.argv[1] == 'list':\n"
        "    try:\n        main(sys.argv[2:])\n    except SystemExit:\n        pass\n"
        "else:\n    sys.argv[1:2] = []\n    main()\n"
    )
    for how, frozen in (("program", True), ("list", False)):
        command = [sys.executable, "-c", code, how, "fmt", str(source), "-o", str(tmp_path / f"{how}.ptx")]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        assert done.stdout.split() == ["frozen", str(frozen)], done.stdout
        assert (tmp_path / f"{how}.ptx").read_text(encoding="utf-8") == KERNEL

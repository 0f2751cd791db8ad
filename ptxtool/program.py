"""The `ptxtool` program. fmt's plain command lines run without importing click, whose import is a quarter of a short
`fmt` run (a pre-commit hook formats on every commit, benchmarks/parse_throughput.py); every other command line goes
to the click CLI (cli.py), which also reports every usage error, --help and anything the short path does not read."""

from __future__ import annotations

import gc
import os
import stat
import sys

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

# the fmt options the short path reads, as cli.py's fmt declares them (tests/test_program.py checks that they agree)
FLAGS = {"--check": "check", "-i": "in_place", "--in-place": "in_place"}
OUTPUT = ("-o", "--output")


def plain_fmt(args: list[str]) -> tuple[list[str], dict[str, object]] | None:
    """fmt's files and options when `args` is `fmt` followed by files and the options above, each once, as separate
    words; None for any other command line (click reads it)."""
    if not args or args[0] != "fmt":
        return None
    files: list[str] = []
    options: dict[str, object] = {}
    words = iter(args[1:])
    for word in words:
        if word in FLAGS and FLAGS[word] not in options:
            options[FLAGS[word]] = True
        elif word in OUTPUT and "output" not in options:
            value = next(words, None)
            if value is None or value.startswith("-") and value != "-" or not _plain_output(value):
                return None
            options["output"] = None if value == "-" else value
        elif word == "-" or not word.startswith("-"):
            files.append(word)
        else:
            return None
    return (files, options) if files else None


def _plain_output(path: str) -> bool:
    """Whether click's `Path(dir_okay=False)` takes `path` without a check that can fail: a path that does not exist
    yet, or a readable regular file (a directory, a device or an unreadable file go to click)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    return stat.S_ISREG(st.st_mode) and os.access(path, os.R_OK)


def run() -> None:
    """The `ptxtool` console script and `python -m ptxtool`: `main`, where a fmt run on the short path ends without
    the interpreter's teardown (`leave_now`)."""
    main(leave=leave_now)


def leave_now(code: int) -> NoReturn:
    """Exit at once, the streams flushed. Tearing the interpreter down frees one by one every object start-up made,
    a fortieth of a short fmt run, and the short path leaves nothing else to do at exit: its files are closed, and
    nothing it loads starts a thread or registers an exit handler (tests/test_fmt_imports.py)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # left to the ordinary exit, which reports it as it always has
        sys.exit(code)
    os._exit(code)


def main(leave: Callable[[int], NoReturn] = sys.exit) -> None:
    """Run the command line: fmt's plain lines here (ending with `leave`), the rest through click."""
    plain = plain_fmt(sys.argv[1:])
    if plain is None:
        from ptxtool.cli import main as cli

        cli()
        return
    files, options = plain
    # No cycle collection in a fmt run: imports make tens of thousands of long-lived objects (classes, functions,
    # tables) among which the collector finds nothing, at 2 to 4 ms a run, and the tree is acyclic (parser.parse
    # runs without it too); what little an error leaves is freed with the process.
    gc.disable()
    from ptxtool.errors import UsageError
    from ptxtool.services import fmt

    try:
        checked = fmt.Options(**options).checked(files)
    except UsageError:  # click says it, with the usage line
        gc.enable()
        from ptxtool.cli import main as cli

        cli()
        return

    def body() -> None:
        from ptxtool.report import emit_and_exit
        from ptxtool.sources import read_inputs

        emit_and_exit(fmt.execute(checked, read_inputs(files)))

    from ptxtool.guard import guard

    try:
        code = guard(body, debug=False)
    finally:
        gc.freeze()  # as cli.Group.main: exit's collections have nothing left to walk
    leave(code)

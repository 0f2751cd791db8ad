"""How a command ends: a user's error prints cleanly with its exit code, a bug prints one line (the traceback with
--debug), Ctrl-C and a closed pipe end quietly with the shell's codes. Free of click: the click commands (cli.py)
and fmt's short path (program.py) both end through `guard`."""

from __future__ import annotations

import errno
import io
import os
import stat
import sys

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

EXIT_INTERRUPTED = 128 + 2  # Ctrl-C: the shell's code for SIGINT, never 1 ("found something")
EXIT_BROKEN_PIPE = 128 + 13  # stdout's reader closed the pipe: the status of a tool SIGPIPE ends (git, cat, grep)
# Walks over the tree recurse a few frames per nested `{ }` scope, and the parser admits as many scopes as ptxas does
# (about 1,660; syntax.lalr.MAX_DEPTH): Python's default limit of 1,000 frames must not be what rejects valid PTX.
# Since Python 3.11 a Python-to-Python call takes no C stack, so a higher limit costs nothing until it is used.
RECURSION_LIMIT = 50_000


def guard(body: Callable[[], None], *, debug: bool, passthrough: tuple[type[BaseException], ...] = ()) -> int:
    """Run a command's body: the exit code its failure ends with, or 0. SystemExit, ptxtool's UsageError (the
    caller says how usage is reported) and `passthrough` are raised as they come; with `debug`, so is a bug."""
    # here, not at import: `ptxtool --help` loads neither the errors' dataclasses nor report/ (the console only when
    # there is an error to print: a `fmt FILE -o OUT` that succeeds never loads it)
    from ptxtool.errors import EXIT_ENVIRONMENT, EXIT_INTERNAL, PtxtoolError, UsageError

    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    try:
        try:
            body()
        finally:
            sys.stdout.flush()  # a full disk or a closed pipe shows here, inside the guard, not at exit
            _raise_if_reader_gone()
    except (UsageError, *passthrough):
        raise
    except PtxtoolError as error:
        from ptxtool.report.console import print_error

        print_error(_stderr(), error)
        return error.exit_code
    except BrokenPipeError:  # the reader went away (`ptxtool lint | head -1`): stop quietly, as git and cat do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _stderr().print("interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        _stderr().print(f"error: cannot write: {error.strerror}", markup=False, highlight=False)
        return EXIT_ENVIRONMENT
    except Exception as error:  # noqa: BLE001 - the one place that turns a bug into exit code 4
        if debug:
            raise
        from rich.markup import escape

        _stderr().print(
            f"[bold red]internal error:[/bold red] {type(error).__name__}: {escape(str(error))} "
            "(a bug in ptxtool; run again with --debug for the traceback)",
            markup=True,
        )
        return EXIT_INTERNAL
    return 0


def _stderr() -> Console:
    """The stderr console, loaded only when there is something to say."""
    from ptxtool.report.console import stderr_console

    return stderr_console()


def _raise_if_reader_gone() -> None:
    """BrokenPipeError when stdout is a pipe nobody reads any more: CPython can drop the rest of a large write to a
    pipe that closes during it without an error, which would end the command 0 where a smaller output ends it 141."""
    try:
        if not stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode):
            return
    except (OSError, ValueError, io.UnsupportedOperation):  # no real stdout (a test runner's buffer)
        return
    import select  # only here: a run that writes to a file or a terminal never needs it (an extension to load)

    poll = select.poll()
    poll.register(sys.stdout.fileno(), select.POLLOUT)
    if any(events & select.POLLERR for _, events in poll.poll(0)):
        raise BrokenPipeError(errno.EPIPE, "the reader of stdout closed the pipe")

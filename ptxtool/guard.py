"""How a command ends: a user's error prints cleanly with its exit code, a bug prints one line (the traceback with
--debug), Ctrl-C and a closed pipe end quietly with the shell's codes. Used by cli.py around every command."""

from __future__ import annotations

import errno
import gc
import io
import os
import stat
import sys
from collections.abc import Callable
from functools import wraps

import click

EXIT_INTERRUPTED = 128 + 2  # Ctrl-C: the shell's code for SIGINT, never 1 ("found something")
EXIT_BROKEN_PIPE = 128 + 13  # stdout's reader closed the pipe: the status of a tool SIGPIPE ends (git, cat, grep)
# Walks over the tree recurse a few frames per nested `{ }` scope, and the parser admits as many scopes as ptxas does
# (about 1,660; syntax.lalr.MAX_DEPTH): Python's default limit of 1,000 frames must not be what rejects valid PTX.
# Since Python 3.11 a Python-to-Python call takes no C stack, so a higher limit costs nothing until it is used.
RECURSION_LIMIT = 50_000


_READS_STDIN = ("parse", "fmt", "inspect", "sass", "cfg", "optimize")  # FILE may be `-` (lint says so itself)


class Group(click.Group):
    """The command group; a FILE argument left out says how to read standard input (`cat k.ptx | ptxtool parse -`)."""

    def main(self, args=None, **extra):
        """As the program (arguments from the command line, not a test's list), the process ends with the command:
        the collector's passes at exit would walk every object (click's, the tree's) only to free what the OS frees
        anyway, a tenth of a short `fmt` run. Frozen, they are skipped; objects are still freed by their counts."""
        if args is not None:
            return super().main(args, **extra)
        try:
            return super().main(**extra)
        finally:
            gc.freeze()

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.MissingParameter as error:
            if isinstance(error.param, click.Argument) and ctx.invoked_subcommand in _READS_STDIN:
                error.message = f"Give - to read standard input: `cat k.ptx | ptxtool {ctx.invoked_subcommand} -`"
            raise


def guarded(command: Callable) -> Callable:
    """Run a command body so that user errors print cleanly and bugs print one line (a traceback with --debug)."""

    @wraps(command)
    def run(*args, **kwargs):
        # here, not at import: `ptxtool --help` loads neither the errors' dataclasses nor report/
        from ptxtool.errors import EXIT_ENVIRONMENT, EXIT_INTERNAL, PtxtoolError, UsageError
        from ptxtool.report.console import print_error, stderr_console

        ctx = click.get_current_context()
        sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
        try:
            try:
                return command(*args, **kwargs)
            finally:
                sys.stdout.flush()  # a full disk or a closed pipe shows here, inside the guard, not at exit
                _raise_if_reader_gone()
        except UsageError as error:  # a service found options that do not go together
            raise click.UsageError(str(error)) from None
        except PtxtoolError as error:
            print_error(stderr_console(), error)
            ctx.exit(error.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`ptxtool lint | head -1`): stop quietly, as git and cat do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
            ctx.exit(EXIT_BROKEN_PIPE)
        except KeyboardInterrupt:
            stderr_console().print("interrupted", markup=False, highlight=False)
            ctx.exit(EXIT_INTERRUPTED)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            stderr_console().print(f"error: cannot write: {error.strerror}", markup=False, highlight=False)
            ctx.exit(EXIT_ENVIRONMENT)
        except Exception as error:  # noqa: BLE001 - the one place that turns a bug into exit code 4
            if ctx.find_root().params.get("debug"):
                raise
            from rich.markup import escape

            stderr_console().print(
                f"[bold red]internal error:[/bold red] {type(error).__name__}: {escape(str(error))} "
                "(a bug in ptxtool; run again with --debug for the traceback)",
                markup=True,
            )
            ctx.exit(EXIT_INTERNAL)

    return run


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

"""The click side of the command line: the group (stdin hints, the collector frozen at exit) and `guarded`, which
runs each command body through guard.guard and ends the click context with its exit code."""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import wraps

import click

from ptxtool.guard import guard

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
    """A command body run by `guard.guard`: its failures end the click context with their exit codes."""

    @wraps(command)
    def run(*args, **kwargs):
        from ptxtool.errors import UsageError

        ctx = click.get_current_context()
        try:
            code = guard(
                lambda: command(*args, **kwargs),
                debug=bool(ctx.find_root().params.get("debug")),
                passthrough=(click.exceptions.Exit, click.ClickException, click.Abort),
            )
        except UsageError as error:  # a service found options that do not go together
            raise click.UsageError(str(error)) from None
        if code:
            ctx.exit(code)

    return run

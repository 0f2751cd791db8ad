"""The `ptxtool` command: click commands that read options, call the library, and hand results to report/.

Exit codes (every command): 0 success, 1 the command found something (a file would change, findings),
2 bad input or usage, 3 a required tool or driver missing, 4 an internal error (a bug).
"""

from __future__ import annotations

import difflib
import errno
import io
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from functools import wraps

import click
from rich.markup import escape

from ptxtool import __version__
from ptxtool.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FOUND,
    EXIT_INPUT,
    EXIT_INTERNAL,
    InputError,
    PtxtoolError,
)
from ptxtool.report.console import print_diagnostic, stderr_console
from ptxtool.sources import STDIN, parse_source, read_source, write_atomic

EXIT_INTERRUPTED = 128 + 2  # Ctrl-C: the shell's code for SIGINT, never 1 ("found something")
EXIT_BROKEN_PIPE = 128 + 13  # stdout's reader closed the pipe: the status of a tool SIGPIPE ends (git, cat, grep)


_READS_STDIN = ("parse", "fmt", "inspect", "sass", "cfg", "optimize")  # FILE may be `-` (lint says so itself)


class _Group(click.Group):
    """The command group; a FILE argument left out says how to read standard input (`cat k.ptx | ptxtool parse -`)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.MissingParameter as error:
            if isinstance(error.param, click.Argument) and ctx.invoked_subcommand in _READS_STDIN:
                error.message = f"Give - to read standard input: `cat k.ptx | ptxtool {ctx.invoked_subcommand} -`"
            raise


def _guarded(command: Callable) -> Callable:
    """Run a command body so that user errors print cleanly and bugs print one line (a traceback with --debug)."""

    @wraps(command)
    def run(*args, **kwargs):
        ctx = click.get_current_context()
        try:
            try:
                return command(*args, **kwargs)
            finally:
                sys.stdout.flush()  # a full disk or a closed pipe shows here, inside the guard, not at exit
                _raise_if_reader_gone()
        except PtxtoolError as error:
            _report(error)
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
    poll = select.poll()
    poll.register(sys.stdout.fileno(), select.POLLOUT)
    if any(events & select.POLLERR for _, events in poll.poll(0)):
        raise BrokenPipeError(errno.EPIPE, "the reader of stdout closed the pipe")


def _report(error: PtxtoolError) -> None:
    console = stderr_console()
    if isinstance(error, InputError):
        for d in error.diagnostics:
            print_diagnostic(console, d)
    else:
        console.print(f"[bold red]error:[/bold red] {escape(str(error))}", markup=True)


def _dash_is_stdout(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`-o -` means stdout, as everywhere else on the command line (not a file named `-`)."""
    return None if value == STDIN else value


def _gpu_target(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--arch checked before any work: a typo is a usage error, not an nvcc failure (or 'nvcc missing') later."""
    if value is not None and not re.fullmatch(r"sm_\d+[af]?", value):
        raise click.BadParameter(f"{value!r} is not a GPU target: expected sm_XY, sm_XYa or sm_XYf (e.g. sm_90a)")
    return value


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="ptxtool")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for internal errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """A PTX toolchain: parse, format, inspect and optimize NVIDIA PTX, checked with ptxas and the SASS.

    \b
    Examples:
      ptxtool parse --check kernel.ptx       parses? legal for its .target/.version?
      ptxtool fmt --check *.ptx              exit 1 if a file is not in canonical layout
      ptxtool inspect k.ptx                  registers, spills, occupancy, SASS per kernel
      ptxtool sass k.ptx -k my_kernel        the SASS under each PTX line it came from
      ptxtool cfg k.ptx -k my_kernel -o g.svg   control-flow graph, loops marked
      ptxtool inspect --budget b.toml *.ptx  CI: exit 1 on budget violations (--sarif)
      ptxtool lint *.ptx                     rules with ids; `ptxtool lint --explain ID`
      ptxtool optimize k.ptx -o opt.ptx      cache-operator rewriting, verified in SASS
      ptxtool run a.ptx b.ptx --spec s.toml  GPU: same inputs, outputs compared bit for bit
      ptxtool bench a.ptx b.ptx --spec s.toml   GPU: median times and the ratio B/A
      ptxtool doctor                         which ptxas/nvdisasm/driver ptxtool uses

    Each command has --help with more; docs/ in the repository has the details.

    Exit codes: 0 ok, 1 found something (e.g. a file would change), 2 bad input or usage,
    3 a required tool (ptxas, GPU driver) missing, 4 internal error.
    """
    if ctx.invoked_subcommand in ("inspect", "sass", "lint", "optimize"):  # once, before any worker process starts
        from ptxtool.toolchain.compile import cache_dir

        cache_dir()


# ---------------------------------------------------------------- parse


@main.command("parse")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--json", "as_json", is_flag=True, help="Print the syntax tree of each file as JSON on stdout.")
@click.option("--check", is_flag=True, help="Also report what the file's .version/.target does not allow (exit 1).")
@_guarded
def parse_command(files: tuple[str, ...], as_json: bool, check: bool) -> None:
    """Check that PTX files parse; print a one-line summary per file.

    FILE may be `-` for stdin. Every syntax error in a file is reported as
    `file:line:col: error: ...` with the offending line; the exit code is then 2.
    With --json, stdout holds one JSON document: {"schema": ..., "files": [{"path", "module"}], "errors": [...]}.


    \b
    Examples:
      ptxtool parse kernel.ptx             one line each: PTX version, target, kernels, instructions
      ptxtool parse --check *.ptx          also exit 1 where a file uses what its .version/.target lacks
      ptxtool parse --json k.ptx | jq .    the syntax tree
    Exit 0 ok; 1 --check found something; 2 a file cannot be read or parsed.
    """
    from ptxtool.syntax import ast
    from ptxtool.syntax.serialize import SCHEMA, to_data

    failures: list[InputError] = []
    documents = []
    illegal = 0
    for path in files:
        try:
            source = read_source(path)
            module = parse_source(source)
        except InputError as error:
            _report(error)
            failures.append(error)
            continue
        problems = []
        if check:
            from ptxtool.legality import check_source

            problems = check_source(source, module)
            for d in problems:
                print_diagnostic(stderr_console(), d)
            illegal += bool(problems)
        if as_json:
            documents.append({"path": source.display, "module": to_data(module)})
            continue
        kernels = len(module.kernels)
        functions = sum(1 for f in module.functions if not f.is_kernel and f.body is not None)
        count = sum(1 for f in module.functions if f.body for _ in ast.instructions(f.body))
        click.echo(
            f"{source.display}: {f'{len(problems)} legality problem(s)' if problems else 'ok'} — "
            f"PTX {module.version or '?'}, {', '.join(module.targets) or 'no target'}; "
            f"{kernels} kernel{'s' * (kernels != 1)}, {functions} function{'s' * (functions != 1)}, "
            f"{count} instruction{'s' * (count != 1)}"
        )
    if as_json:
        errors = [
            {"path": d.location.path, "line": d.location.line, "column": d.location.column, "message": d.message}
            for f in failures
            for d in f.diagnostics
        ]
        json.dump({"schema": SCHEMA, "files": documents, "errors": errors}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    if failures:
        sys.exit(EXIT_INPUT)
    if illegal:
        sys.exit(EXIT_FOUND)


# ---------------------------------------------------------------- fmt


@main.command("fmt")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    callback=_dash_is_stdout,
    help="Write the result here (- for stdout).",
)
@click.option("--in-place", "-i", is_flag=True, help="Rewrite each file in place (atomically).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--diff", is_flag=True, help="Print a unified diff of what would change (coloured on a terminal).")
@click.option("--color/--no-color", default=None, help="Colour the diff (default: when stdout is a terminal).")
@_guarded
def fmt_command(
    files: tuple[str, ...], output: str | None, in_place: bool, check: bool, diff: bool, color: bool | None
) -> None:
    """Print PTX in canonical layout: same tokens, same program, every comment kept.

    \b
    One file and no option: the result goes to stdout. `-` reads stdin.
    -o OUT writes one file; --in-place rewrites files atomically;
    --check exits 1 when a file would change (pre-commit); --diff shows the change.
    The layout depends only on the program and its comments, never on the input's
    whitespace, and formatting twice changes nothing.


    \b
    Examples:
      ptxtool fmt k.ptx > tidy.ptx         the formatted text on stdout
      ptxtool fmt -i *.ptx                 rewrite the files that change
      ptxtool fmt --check --diff *.ptx     CI: show what would change, exit 1 if anything would
    Exit 0 ok; 1 --check found a file that would change; 2 bad input or usage.
    """
    from ptxtool.syntax import format_module

    if output and (in_place or len(files) != 1):
        raise click.UsageError("-o/--output takes exactly one input file and no --in-place")
    if in_place and STDIN in files:
        raise click.UsageError("--in-place cannot rewrite stdin")
    if check and (in_place or output):
        raise click.UsageError("--check writes nothing: drop --in-place/-o, or --check to write")
    if files.count(STDIN) > 1:
        raise click.UsageError("stdin (-) can be read only once")
    if len(files) > 1 and not (in_place or check or diff):
        raise click.UsageError("several files: say where results go with --in-place, or use --check or --diff")
    colour = sys.stdout.isatty() if color is None else color
    console = stderr_console()
    changed = failed = 0
    for path in files:
        try:
            source = read_source(path)
            formatted = format_module(parse_source(source))
        except InputError as error:
            _report(error)
            failed += 1
            continue
        differs = formatted != source.text
        changed += differs
        if diff and differs:
            _print_diff(source.display, source.text, formatted, colour)
        if check:
            if differs and not diff:
                console.print(f"would reformat {source.display}")
        elif in_place:
            if differs:
                write_atomic(path, formatted)
        elif output:
            write_atomic(output, formatted)
        elif not diff:
            sys.stdout.write(formatted)
    if check or in_place or len(files) > 1:
        verb = "would reformat" if check else "reformatted"
        console.print(
            f"{verb} {changed} of {len(files) - failed} file{'s' * (len(files) - failed != 1)}"
            + (f"; {failed} could not be read or parsed" if failed else "")
        )
    if failed:
        sys.exit(EXIT_INPUT)
    if check and changed:
        sys.exit(EXIT_FOUND)


def _print_diff(name: str, before: str, after: str, colour: bool) -> None:
    old, new = (name, name) if name.startswith(("/", "<")) else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), old, new)
    for line in lines:
        if not line.endswith("\n"):  # the marker `patch` and `git apply` need, on a line of its own
            line += "\n\\ No newline at end of file\n"
        if colour:
            code = {"+": "32", "-": "31", "@": "36"}.get(line[:1])
            if line.startswith(("+++", "---")):
                code = "1"
            if code:
                line = f"\x1b[{code}m{line[:-1]}\x1b[0m\n"
        sys.stdout.write(line)


# ---------------------------------------------------------------- doctor


@main.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
@_guarded
def doctor_command(as_json: bool) -> None:
    """Say which NVIDIA tools ptxtool found, where, their versions, what ptxas supports, and whether a GPU driver
    answers.

    Exit code 3 when a required tool (ptxas, nvdisasm) is missing or broken; nvcc and cuobjdump are optional.


    \b
    Examples:
      ptxtool doctor                       one line per tool, then the GPU driver
      PTXTOOL_PTXAS=/opt/ptxas ptxtool doctor   check an override (PTXTOOL_NVDISASM, _NVCC, _CUOBJDUMP too)
      ptxtool doctor --json                the same as JSON (schema ptxtool.doctor/1)
    """
    from ptxtool.errors import EXIT_ENVIRONMENT
    from ptxtool.toolchain.discover import environment

    found = environment()
    if as_json:
        json.dump({"schema": "ptxtool.doctor/1", **found}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for name, tool in found["tools"].items():
            if not tool["ok"]:
                state = "broken" if tool.get("path") else "missing"  # found but does not run, or not found
                label = f"{state} (required)" if tool["required"] else f"{state} (optional)"
                click.echo(f"{name:10} {label}: {tool['problem']}")
                continue
            click.echo(f"{name:10} {tool['version']:10} {tool['path']}  (found by {tool['found_by']})")
            if name == "ptxas":
                targets = tool["targets"]
                click.echo(f"{'':10} PTX ISA up to {tool['max_ptx_isa'] or '?'}; targets {', '.join(targets)}")
        driver = found["gpu_driver"]
        click.echo(f"{'GPU':10} {'present' if driver['present'] else 'absent':10} {driver['detail']}")
    if any(t["required"] and not t["ok"] for t in found["tools"].values()):
        sys.exit(EXIT_ENVIRONMENT)


# ---------------------------------------------------------------- run, bench (GPU)


def _gpu_inputs(files: tuple[str, ...], spec_path: str):
    from ptxtool.launch import load_spec

    if len(files) > 2:
        raise click.UsageError("give one file to run, or two (A B) to compare")
    return load_spec(spec_path)


def _emit(report, as_json: bool) -> None:
    if as_json:
        json.dump(report.to_data(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    console = stderr_console()
    for line in report.lines():
        console.print(line, markup=False)


@main.command("run")
@click.argument("files", nargs=-1, required=True, metavar="A.ptx [B.ptx]")
@click.option("--spec", "-s", "spec_path", required=True, help="Launch spec (TOML): grid, block, parameters.")
@click.option("--kernel", "-k", help="Kernel name (default: the spec's `kernel`, or the file's only kernel).")
@click.option("--trials", "-n", type=click.IntRange(min=1), help="Trials, fresh random inputs each (default: spec).")
@click.option("--seed", type=int, help="Seed of the random inputs (default: the spec's `seed`).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds per launch.")
@click.option("--ptxas", is_flag=True, help="Assemble with ptxas for this GPU instead of the driver's JIT.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@_guarded
def run_command(
    files: tuple[str, ...],
    spec_path: str,
    kernel: str | None,
    trials: int | None,
    seed: int | None,
    timeout: float,
    ptxas: bool,
    as_json: bool,
) -> None:
    """Run a kernel on the GPU; with two files, run both on identical inputs and compare every buffer bit for bit.

    \b
    Each trial draws fresh random inputs; outputs are poisoned with the spec's byte (0x5A) before every launch,
    and a guard zone after each buffer catches writes past its end. A is run twice per trial first: if it
    differs from itself the kernel is nondeterministic, and the spec must give its outputs a tolerance.
    A .cubin file is loaded as it is (give the kernel's exact name).
    Exit 0: identical (or within tolerance); 1: outputs differ, a fault, or an overrun; 2: bad input or spec;
    3: no GPU driver.


    \b
    Examples:
      ptxtool run k.ptx --spec saxpy.toml               run; faults and overruns are exit 1
      ptxtool run k.ptx k.opt.ptx -s saxpy.toml -n 20   20 trials of A against B, bit for bit
    """
    from ptxtool.run import run

    spec = _gpu_inputs(files, spec_path)
    report = run(files, spec, kernel, trials=trials, seed=seed, timeout=timeout, ptxas=ptxas)
    _emit(report, as_json)
    sys.exit(report.exit_code)


@main.command("bench")
@click.argument("files", nargs=-1, required=True, metavar="A.ptx [B.ptx]")
@click.option("--spec", "-s", "spec_path", required=True, help="Launch spec (TOML): grid, block, parameters.")
@click.option("--kernel", "-k", help="Kernel name (default: the spec's `kernel`, or the file's only kernel).")
@click.option("--launches", type=click.IntRange(min=3), default=200, show_default=True, help="Timed launches each.")
@click.option("--warmup", type=click.IntRange(min=0), default=20, show_default=True, help="Untimed launches first.")
@click.option("--seed", type=int, help="Seed of the random inputs (default: the spec's `seed`).")
@click.option("--ptxas", is_flag=True, help="Assemble with ptxas for this GPU instead of the driver's JIT.")
@click.option("--json", "as_json", is_flag=True, help="Print the timings as JSON on stdout.")
@_guarded
def bench_command(
    files: tuple[str, ...],
    spec_path: str,
    kernel: str | None,
    launches: int,
    warmup: int,
    seed: int | None,
    ptxas: bool,
    as_json: bool,
) -> None:
    """Time a kernel with CUDA events: the median of many launches, and the ratio B/A measured in the same run.

    \b
    Launches of A and B alternate, each on the next of several copies of the inputs (together larger than
    the L2), so neither gets a warm cache the other did not. `noise` is A's odd launches against its even ones:
    a ratio closer to 1 than that is not a difference.


    \b
    Examples:
      ptxtool bench k.ptx k.opt.ptx --spec saxpy.toml   median of each and the ratio B/A
      ptxtool bench k.ptx -s saxpy.toml --json          timings as JSON (quantiles, noise)
    Exit 0 timed; 2 bad input or spec; 3 no GPU driver.
    """
    from ptxtool.run import bench

    spec = _gpu_inputs(files, spec_path)
    report = bench(files, spec, kernel, launches=launches, warmup=warmup, seed=seed, ptxas=ptxas)
    _emit(report, as_json)


# ---------------------------------------------------------------- inspect and sass


_INSPECT_CONFIG = {  # [tool.ptxtool.inspect] key: (is the value good?, what it must be)
    "arch": (lambda v: isinstance(v, str) and re.fullmatch(r"sm_\d+[af]?", v), 'a target such as "sm_90a"'),
    "block-size": (lambda v: type(v) is int and 1 <= v <= 1024, "an integer from 1 to 1024"),
    "backend": (lambda v: v in ("ptxas", "nvjitlink"), '"ptxas" or "nvjitlink"'),
    "budget": (lambda v: isinstance(v, str), "a path (string)"),
    "baseline": (lambda v: isinstance(v, str), "a path (string)"),
}


def _inspect_config() -> dict:
    """[tool.ptxtool.inspect] from the nearest pyproject.toml, every key known and of the right type."""
    from ptxtool.config import find_pyproject, tool_config

    config = tool_config("inspect")
    for key, value in config.items():
        good, wanted = _INSPECT_CONFIG.get(key, (None, None))
        if good is None or not good(value):
            problem = f"{key} must be {wanted}; got {value!r}" if good else f"unknown key {key!r}"
            raise InputError.at(
                str(find_pyproject()), f"[tool.ptxtool.inspect]: {problem} (keys: {', '.join(_INSPECT_CONFIG)})"
            )
    return config


def _inspect_settings(arch: str | None, block_size: int | None, backend: str | None):
    """Options from the flags, falling back on [tool.ptxtool.inspect] in the nearest pyproject.toml."""
    from ptxtool.inspect import Options

    config = _inspect_config()
    return Options(
        arch=arch or config.get("arch"),
        block_size=block_size or config.get("block-size"),
        backend=backend or config.get("backend", "ptxas"),
    )


@main.command("inspect")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--arch", callback=_gpu_target, help="Compile for this target (e.g. sm_90a) instead of the module's .target."
)
@click.option(
    "--block-size",
    type=click.IntRange(1, 1024),
    help="Threads per block for occupancy (default: .reqntid/.maxntid, else 256).",
)
@click.option(
    "--backend",
    type=click.Choice(["ptxas", "nvjitlink"]),
    help="ptxas (default) or nvJitLink in-process (relocatable-mode numbers).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema ptxtool.inspect/1).")
@click.option("--sarif", is_flag=True, help="Print SARIF 2.1.0 (violations and ptxas warnings at PTX lines).")
@click.option("--budget", type=click.Path(dir_okay=False), help="TOML limits per kernel name or glob.")
@click.option("--baseline", type=click.Path(dir_okay=False), help="JSON snapshot to compare with: fail on regressions.")
@click.option("--update-baseline", is_flag=True, help="Write the --baseline file from this run instead of comparing.")
@click.option("-j", "--jobs", type=click.IntRange(1), help="Parallel processes (default: one per core).")
@click.option("--pressure", is_flag=True, help="Draw each kernel's register pressure beside ptxas's live registers.")
@click.option("--kernel", "-k", "pressure_kernel", help="With --pressure: only this kernel.")
@click.option("--svg", type=click.Path(dir_okay=False), help="With --pressure: write the picture of one kernel here.")
@_guarded
def inspect_command(
    files: tuple[str, ...],
    arch: str | None,
    block_size: int | None,
    backend: str | None,
    as_json: bool,
    sarif: bool,
    budget: str | None,
    baseline: str | None,
    update_baseline: bool,
    jobs: int | None,
    pressure: bool,
    pressure_kernel: str | None,
    svg: str | None,
) -> None:
    """Per kernel: ptxas resources, occupancy, SASS statistics and PTX facts; budgets and baselines for CI.

    \b
    FILE is PTX, or CUDA C++ (.cu) compiled to PTX with nvcc when nvcc is available.
    Exit 1 when a kernel breaks a --budget limit or regresses against --baseline (one message each);
    2 when an input cannot be read, parsed or assembled; 3 when ptxas or nvdisasm is missing.
    Defaults come from [tool.ptxtool.inspect] in the nearest pyproject.toml (arch, block-size, backend,
    budget, baseline).
    --pressure draws the estimated register-pressure curve per PTX line beside the registers
    the SASS really keeps live there (nvdisasm), and names the registers live at the peak.


    \b
    Examples:
      ptxtool inspect k.ptx                             the table: registers, spills, occupancy, SASS
      ptxtool inspect --json *.ptx > report.json        schema ptxtool.inspect/1
      ptxtool inspect --budget budget.toml --sarif *.ptx   CI: violations as code-scanning alerts
      ptxtool inspect --pressure -k my_kernel k.ptx     where the registers go
    """
    from dataclasses import replace

    from ptxtool import budget as checks
    from ptxtool.config import config_path
    from ptxtool.inspect import Failure, inspect_files

    if as_json and sarif:
        raise click.UsageError("--json and --sarif are two formats of one report: choose one")
    config = _inspect_config()
    budget = budget or config_path(config.get("budget"))
    baseline = baseline or config_path(config.get("baseline"))
    if update_baseline and not baseline:
        raise click.UsageError("--update-baseline needs --baseline FILE (where to write it)")
    if (pressure_kernel or svg) and not pressure:
        raise click.UsageError("--kernel and --svg go with --pressure")
    if svg and len(files) > 1:
        raise click.UsageError("--svg draws one kernel of one file: give one FILE (and --kernel when it has several)")
    options = replace(_inspect_settings(arch, block_size, backend), pressure=pressure, pressure_kernel=pressure_kernel)
    limits = checks.load_budget(budget) if budget else None
    before = checks.load_baseline(baseline) if baseline and not update_baseline else None
    console = stderr_console()
    results = _inspect_with_progress(list(files), options, jobs, console, inspect_files)
    reports = [r for r in results if not isinstance(r, Failure)]
    failures = [r for r in results if isinstance(r, Failure)]
    for failure in failures:
        _report(InputError(list(failure.diagnostics)))
    drawn = [(r, k) for r in reports for k in r.kernels if k.pressure] if pressure else []
    if pressure_kernel and reports and not drawn:
        there = ", ".join(k.name for r in reports for k in r.kernels)
        raise InputError.at(reports[0].path, f"no kernel named {pressure_kernel!r}; there are: {there}")
    if svg and len(drawn) > 1:
        names = ", ".join(k.name for _, k in drawn)
        raise click.UsageError(f"--svg draws one kernel: choose it with --kernel ({names})")
    for warning in checks.unmatched(limits, reports) if limits and reports and not failures else ():
        console.print(f"warning: {warning}", markup=False, highlight=False)
    violations = (checks.check_budget(limits, reports) if limits else []) + (
        checks.check_baseline(before, baseline, reports) if before else []
    )
    if update_baseline and failures:  # a baseline without the failed files' kernels would stop guarding them
        console.print(f"baseline {baseline} not written: {len(failures)} input(s) failed", markup=False)
    elif update_baseline:
        checks.write_baseline(baseline, reports)
        console.print(f"wrote baseline {baseline} ({sum(len(r.kernels) for r in reports)} kernels)")
    if as_json or sarif:
        from ptxtool.report.json_report import inspect_document
        from ptxtool.report.sarif import sarif_document
        from ptxtool.toolchain.discover import find_tool

        tools = {"ptxtool": __version__, "ptxas": find_tool("ptxas").version}
        document = (
            inspect_document(reports, violations, tools, [d for f in failures for d in f.diagnostics])
            if as_json
            else sarif_document(reports, violations, __version__, [d for f in failures for d in f.diagnostics])
        )
        for document_file, report in zip(document["files"], reports, strict=True) if as_json else ():
            for data, kernel in zip(document_file["kernels"], report.kernels, strict=True):
                if kernel.pressure:
                    data["pressure"] = kernel.pressure.as_data()
        json.dump(document, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif reports:  # no table of nothing when every input failed
        from rich.console import Console

        from ptxtool.report.inspect_table import print_inspect_table

        table_console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200, highlight=False)
        print_inspect_table(table_console, reports)
        _print_pressure(drawn)
    if svg and drawn:
        from ptxtool.analysis.pictures import peak_text, pressure_svg

        report, kernel = drawn[0]
        caption = " ".join(peak_text(kernel.pressure.curve, kernel.pressure.peak_live).split())
        write_atomic(svg, pressure_svg(kernel.pressure.curve, kernel.pressure.real, f"{report.backend} live", caption))
        console.print(f"wrote {svg} ({kernel.name})")
    for v in violations:
        where = v.path + (f":{v.line}" if v.line else "")
        console.print(
            f"[bold]{escape(where)}:[/bold] [bold red]{v.origin}:[/bold red] {escape(v.message)}", markup=True
        )
    if len(reports) < len(results):
        sys.exit(EXIT_INPUT)
    if violations:
        sys.exit(EXIT_FOUND)


def _print_pressure(drawn: list) -> None:
    """The pressure pictures on stdout, under the table: the estimate beside the SASS's live registers."""
    from ptxtool.analysis.pictures import peak_text, pressure_text

    for report, kernel in drawn:
        p = kernel.pressure
        click.echo(f"\n{report.path}: {report.backend} allocated {p.registers} registers")
        click.echo(pressure_text(p.curve, 32, 40, p.real, f"{report.backend} live"), nl=False)
        click.echo(peak_text(p.curve, p.peak_live), nl=False)


def _inspect_with_progress(files, options, jobs, console, inspect_files):
    """inspect_files with a progress bar on stderr when it is a terminal and there are several files."""
    if len(files) < 2 or not console.is_terminal:
        return inspect_files(files, options, jobs)
    from rich.progress import Progress

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("inspecting", total=len(files))
        return inspect_files(files, options, jobs, lambda: progress.advance(task))


@main.command("sass")
@click.argument("file", metavar="FILE")
@click.option("--kernel", "-k", help="Only this kernel (or function).")
@click.option("--arch", callback=_gpu_target, help="Compile for this target instead of the module's .target.")
@click.option("--plain", is_flag=True, help="SASS only, without the PTX lines it came from.")
@_guarded
def sass_command(file: str, kernel: str | None, arch: str | None, plain: bool) -> None:
    """Print the SASS ptxas makes of FILE, each run of instructions under the PTX line it came from.

    The PTX is assembled with -lineinfo and disassembled with nvdisasm -gp; --plain leaves the PTX out.


    \b
    Examples:
      ptxtool sass k.ptx -k my_kernel      one kernel's SASS under its PTX lines
      ptxtool sass --arch sm_90 --plain k.ptx   SASS only, for another target
    Exit 0 ok; 2 FILE cannot be read, parsed or assembled, or no such kernel; 3 ptxas or nvdisasm missing.
    """
    from ptxtool.inspect import sass_listing

    source, functions = sass_listing(file, _inspect_settings(arch, None, None), kernel, not plain)
    if not functions:
        stderr_console().print(f"{source.display}: no SASS: ptxas keeps kernels (.entry) and the functions they call")
    ptx_lines = source.text.splitlines()
    out = []
    for name, entries in functions.items():
        out.append(f"// ---- {name}")
        shown = 0
        for entry in entries:
            if entry.ptx_line and entry.ptx_line != shown and entry.ptx_line <= len(ptx_lines):
                shown = entry.ptx_line
                out.append(f"        // {shown:>5}: {ptx_lines[shown - 1].strip()}")
            out.append(entry.text if entry.text.endswith(":") else f"    {entry.text};")
        out.append("")
    sys.stdout.write("\n".join(out))


# ---------------------------------------------------------------- cfg


@main.command("cfg")
@click.argument("file", metavar="FILE")
@click.option("--kernel", "-k", help="The kernel (or function) to draw; needed when FILE has several.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    callback=_dash_is_stdout,
    help="Write .dot text or .svg here (- for stdout).",
)
@_guarded
def cfg_command(file: str, kernel: str | None, output: str | None) -> None:
    """Draw a kernel's control-flow graph, loops marked, as graphviz dot text.

    \b
    No -o: dot text on stdout. -o cfg.dot (or .gv) writes the text; -o cfg.svg renders it
    with graphviz's `dot` (exit 3 when graphviz is not installed).
    Loops are nested boxes titled with their induction variables; back edges are dashed.


    \b
    Examples:
      ptxtool cfg k.ptx -k my_kernel | dot -Tpng > cfg.png
      ptxtool cfg k.ptx -k my_kernel -o cfg.svg
    Exit 0 ok; 2 FILE cannot be read or parsed, or no such kernel; 3 graphviz missing (for .svg).
    """
    import shutil
    import subprocess

    from ptxtool.analysis.cfg import build_cfg
    from ptxtool.analysis.loops import find_loops
    from ptxtool.analysis.pictures import cfg_dot
    from ptxtool.errors import EnvironmentProblem

    if output and not output.endswith((".dot", ".gv", ".svg")):
        raise click.UsageError(
            f"-o {output}: cfg writes .dot/.gv (dot text) or .svg; for other formats pipe the text to graphviz, "
            "e.g. `ptxtool cfg k.ptx | dot -Tpng > cfg.png`"
        )
    source = read_source(file)
    module = parse_source(source)
    bodies = [f for f in module.functions if f.body is not None]
    chosen = [f for f in bodies if f.name == kernel] if kernel else bodies
    if not chosen or (not kernel and len(chosen) > 1):
        names = ", ".join(f.name for f in bodies)
        what = f"no function named {kernel!r}" if kernel else "several functions: choose one with --kernel"
        what = f"{what} (functions with bodies: {names})" if bodies else "no kernel or function with a body to draw"
        raise click.UsageError(f"{source.display}: {what}")
    cfg = build_cfg(chosen[0])
    text = cfg_dot(cfg, find_loops(cfg))
    if output and output.endswith(".svg"):
        dot = shutil.which("dot")
        if dot is None:
            raise EnvironmentProblem("graphviz `dot` is not installed: install graphviz, or write dot text (-o x.dot)")
        run = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True)
        if run.returncode:
            raise EnvironmentProblem(f"graphviz `dot` failed: {run.stderr.strip()}")
        text = run.stdout
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)


# ---------------------------------------------------------------- lint


def _rule_list(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t.strip() for v in values for t in v.split(",") if t.strip())


@main.command("lint")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option("--select", multiple=True, help="Only these rules: ids, id prefixes or names, comma-separated.")
@click.option("--ignore", multiple=True, help="Leave out these rules (ids, prefixes or names, comma-separated).")
@click.option("--explain", metavar="ID", help="Print the documentation of one rule and exit.")
@click.option("--list-rules", is_flag=True, help="Print every rule: id, name, severity, summary.")
@click.option("--no-ptxas", is_flag=True, help="Skip the rules that run ptxas (PTX008).")
@click.option(
    "--arch",
    callback=_gpu_target,
    help="Target for .cu files (nvcc -arch) and for ptxas (default: the module's .target).",
)
@click.option("--require-nvcc", is_flag=True, default=None, help="A .cu/.cuh file without nvcc is an error (exit 3).")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON (schema ptxtool.lint/1) on stdout.")
@click.option("--sarif", is_flag=True, help="Print findings as SARIF 2.1.0 on stdout (for code scanning).")
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "note"]),
    help="The least severity that makes the exit code 1 (default: note, i.e. any finding).",
)
@click.option("-j", "--jobs", type=click.IntRange(1), help="Parallel processes (default: one per core).")
@_guarded
def lint_command(
    files: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    explain: str | None,
    list_rules: bool,
    no_ptxas: bool,
    arch: str | None,
    require_nvcc: bool | None,
    as_json: bool,
    sarif: bool,
    fail_on: str | None,
    jobs: int | None,
) -> None:
    """Find correctness and performance problems in PTX (and CUDA sources compiled to PTX with nvcc).

    \b
    Each finding is one line on stdout: `path:line:col: ID severity: message`; a summary goes to stderr.
    Silence a rule on one statement with `// ptxtool: ignore[ID]` on its line, in a whole file with
    `// ptxtool: ignore-file[ID]`. Defaults come from [tool.ptxtool.lint] in the nearest pyproject.toml
    (select, ignore, ptxas, require-nvcc, arch, and per-rule tables such as [tool.ptxtool.lint.PTX003]).
    `--explain ID` documents a rule. Exit 0 clean, 1 findings (at least --fail-on's severity), 2 bad input,
    3 a required tool missing.


    \b
    Examples:
      ptxtool lint *.ptx                   every rule; findings on stdout
      ptxtool lint --fail-on warning --sarif *.ptx > lint.sarif   CI: notes do not fail the build
      ptxtool lint --select PTX005,PTX006 k.cu   two rules, on PTX that nvcc makes of k.cu
      ptxtool lint --explain PTX005        what a rule finds and how to fix it
    """
    from ptxtool.config import find_pyproject, tool_config
    from ptxtool.lint import all_rules, lint_files, load_settings
    from ptxtool.lint.settings import fails

    rules = all_rules()
    if explain:
        chosen = rules.get(explain.upper()) or next((r for r in rules.values() if r.name == explain), None)
        if chosen is None:
            raise click.UsageError(f"no rule {explain!r}; `ptxtool lint --list-rules` lists them")
        click.echo(f"{chosen.id} {chosen.name} ({chosen.severity})\n\n{chosen.doc}")
        if chosen.options:
            click.echo("\nOptions: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in chosen.options.items()))
        return
    if list_rules:
        for r in rules.values():
            click.echo(f"{r.id}  {r.name:26} {r.severity:8} {r.summary}")
        return
    if not files:
        raise click.UsageError("give FILE... to lint, - to read standard input (or --explain ID, --list-rules)")
    if as_json and sarif:
        raise click.UsageError("--json and --sarif are two formats of one report: choose one")
    pyproject = find_pyproject()
    settings = load_settings(
        tool_config("lint"),
        str(pyproject or "pyproject.toml"),
        select=_rule_list(select),
        ignore=_rule_list(ignore),
        ptxas=False if no_ptxas else None,
        require_nvcc=require_nvcc,
        arch=arch,
        fail_on=fail_on,
    )
    results = lint_files(list(files), settings, jobs)
    findings = [f for r in results for f in r.findings]
    if as_json or sarif:
        from ptxtool.lint.documents import json_document, sarif_document

        document = json_document(results, __version__) if as_json else sarif_document(results, __version__)
        json.dump(document, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for f in findings:
            click.echo(f"{f.path}:{f.line}:{f.column}: {f.rule} {f.severity}: {f.message}")
    console = stderr_console()
    notices: dict[str, list[str]] = {}
    for r in results:
        for n in r.notices:
            notices.setdefault(n, []).append(r.path)
        for d in r.errors:
            print_diagnostic(console, d)
    for message, paths in notices.items():
        where = paths[0] if len(paths) == 1 else f"{len(paths)} files"
        console.print(f"{where}: notice: {message}", markup=False, highlight=False)
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "note")}
    detail = ", ".join(f"{n} {s}{'s' * (n != 1)}" for s, n in counts.items() if n)
    checked = sum(1 for r in results if r.checked and (r.findings or not r.errors))  # rules ran, ptxas may not
    unread = sum(1 for r in results if r.errors)
    skipped = sum(1 for r in results if not r.checked)
    console.print(
        f"{len(findings)} finding{'s' * (len(findings) != 1)}{f' ({detail})' if detail else ''} in {checked} "
        f"file{'s' * (checked != 1)}"
        + (f"; {skipped} not checked" if skipped else "")
        + (f"; {unread} could not be read, parsed or assembled" if unread else ""),
        markup=False,
        highlight=False,
    )
    if skipped:  # never 0 for a file nobody checked: the notice says what the environment lacks
        sys.exit(EXIT_ENVIRONMENT)
    if unread:
        sys.exit(EXIT_INPUT)
    if any(fails(settings, f.severity) for f in findings):
        sys.exit(EXIT_FOUND)


# ---------------------------------------------------------------- optimize


def _optimize_settings(options: dict):
    """Pipeline and cache-operator settings: `[tool.ptxtool.optimize]`, then the flags given."""
    from dataclasses import replace

    from ptxtool.config import find_pyproject, tool_config
    from ptxtool.passes.cache_operators import Policy
    from ptxtool.services.optimize import settings_from_config

    where = str(find_pyproject() or "pyproject.toml")
    passes, settings = settings_from_config(tool_config("optimize"), where)
    if options["passes"]:
        passes = tuple(p.strip() for p in options["passes"].split(",") if p.strip())
    flags = {name: options[name] for name in ("readonly", "streaming", "stores", "l2_evict_first")}
    flags["unsafe_volatile_nc"] = options["unsafe_volatile_nc"] or None
    for name, value in flags.items():
        policy = getattr(settings, name)
        include = tuple(options["include"]) or policy.include
        policy = Policy(policy.enabled if value is None else value, include, policy.exclude + tuple(options["exclude"]))
        settings = replace(settings, **{name: policy})
    settings = replace(settings, noalias=settings.noalias + tuple(options["noalias"]))
    if options["store_hint"]:
        settings = replace(settings, store_hint=options["store_hint"])
    return passes, settings


def _print_optimize(console, result, verbose: bool) -> None:
    """Each kept rewrite with its reasons, per-kernel SASS changes, what verification dropped and why, the skipped
    candidates (-v), and one line that says what was checked."""
    say = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731
    for r in result.reports:
        for rewrite in r.rewrites:
            say(f"{result.path}:{rewrite.line}: {rewrite.kernel}: {rewrite.before} -> {rewrite.after}")
            for reason in rewrite.reasons:
                say(f"    {reason}")
    for k in result.kernels:
        if k.before is None or k.after is None or k.memory_before == k.memory_after:
            continue
        spill = lambda r: r.spill_stores + r.spill_loads  # noqa: E731
        say(
            f"{k.name}: registers {k.before.registers} -> {k.after.registers}, spill bytes {spill(k.before)} -> "
            f"{spill(k.after)}"
        )
        for variant in sorted(set(k.memory_before) | set(k.memory_after)):
            a, b = k.memory_before.get(variant, 0), k.memory_after.get(variant, 0)
            if a != b:
                say(f"    {variant}: {a} -> {b}")
    for d in result.dropped:
        say(f"{result.path}:{d.rewrite.line}: {d.rewrite.kernel}: dropped {d.rewrite.before} -> {d.rewrite.after}")
        say(f"    {d.reason}")
    if verbose:
        for s in (s for r in result.reports for s in r.skipped):
            say(f"{result.path}:{s.line}: {s.kernel}: skipped {s.mnemonic}: {s.reason}")
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/bold yellow] {escape(warning)}", markup=True)
    hints = dict.fromkeys(s.kernel for r in result.reports for s in r.skipped if "--noalias" in s.reason)
    for kernel in hints:  # the one skip a user can act on: declare the pointers alias-free
        say(f"note: {kernel}: loads could be .nc if its pointers never alias (--noalias {kernel})")
    for problem in result.problems:
        console.print(f"[bold red]verification failed:[/bold red] {escape(problem)}", markup=True)
    say(_optimize_summary(result))


def _optimize_summary(result) -> str:
    """`FILE: 3 rewrites kept, 1 dropped · ptxas ok · 5/5 promised SASS modifiers present · no load crossed a
    barrier · other SASS unchanged · GPU: outputs identical, 3 trials` (or why nothing is written)."""
    kept = sum(len(r.rewrites) for r in result.reports)
    head = f"{result.path}: {kept} rewrite{'s' * (kept != 1)} kept"
    head += f", {len(result.dropped)} dropped" if result.dropped else ""
    if not result.verified:
        return f"{head} · NOT verified: nothing written"
    if not kept:
        return head + " · input unchanged"
    c = result.checks
    parts = [head, "ptxas ok", f"{c.present}/{c.promised} promised SASS modifiers present"]
    if c.removed:
        parts.append(f"{c.removed} rewritten access{'es' * (c.removed != 1)} removed by ptxas")
    parts += ["no access crossed a barrier, fence or atomic", "other SASS memory and control flow unchanged"]
    if c.gpu:
        parts.append(f"GPU: outputs {c.gpu}, {c.trials} trial{'s' * (c.trials != 1)}")
    return " · ".join(parts)


def _warn_unmatched(console, result, options: dict) -> None:
    """A --noalias/--include/--exclude that names no kernel of the file is most likely a typo: say so."""
    from ptxtool.passes.cache_operators import matches

    names = [k.name for k in result.kernels]
    for option in ("noalias", "include", "exclude"):
        for pattern in options[option] if names else ():
            if not any(matches(name, (pattern,)) for name in names):
                console.print(
                    f"warning: --{option} {pattern} matches no kernel of {result.path} (kernels: {', '.join(names)})",
                    markup=False,
                )


@main.command("optimize")
@click.argument("file", metavar="FILE")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), callback=_dash_is_stdout, help="Write the optimized PTX here."
)
@click.option("--in-place", "-i", is_flag=True, help="Rewrite FILE in place (only once verified).")
@click.option(
    "--diff", "show_diff", is_flag=True, help="Print the unified diff of the verified rewrites; write nothing."
)
@click.option("--strict", is_flag=True, help="All or nothing: any rewrite that fails verification fails the file.")
@click.option("-v", "--verbose", is_flag=True, help="Also list each candidate the passes skipped, and why.")
@click.option("--passes", help="Comma-separated passes to run (default: cache-operators).")
@click.option(
    "--arch", callback=_gpu_target, help="Verify for this target (e.g. sm_90) instead of the module's .target."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout (needs -o or --in-place).")
@click.option("--verify-gpu", "spec", help="Also run original and optimized on the GPU with this launch spec.")
@click.option("--readonly/--no-readonly", default=None, help="`.nc` on loads of memory the kernel never writes.")
@click.option("--streaming/--no-streaming", default=None, help="`.L1::no_allocate` (+ `.L2::256B`) on streams.")
@click.option("--stores/--no-stores", default=None, help="`.cs` (or --store-hint) on write-once stores.")
@click.option("--l2-evict-first/--no-l2-evict-first", default=None, help="createpolicy + .L2::cache_hint on streams.")
@click.option("--store-hint", type=click.Choice(["cs", "L1::no_allocate"]), help="Hint for write-once stores.")
@click.option(
    "--unsafe-volatile-nc",
    is_flag=True,
    help="DeepEP's trick: volatile loads of data other agents write become .nc (OUTSIDE the PTX memory model).",
)
@click.option("--noalias", multiple=True, metavar="KERNEL", help="The kernel's pointer parameters never alias.")
@click.option("--include", multiple=True, metavar="KERNEL", help="Optimize only these kernels (globs).")
@click.option("--exclude", multiple=True, metavar="KERNEL", help="Leave these kernels alone (globs).")
@_guarded
def optimize_command(
    file: str,
    output: str | None,
    in_place: bool,
    show_diff: bool,
    strict: bool,
    verbose: bool,
    as_json: bool,
    spec: str | None,
    **options,
) -> None:
    """Add cache operators where analysis proves them safe; keep each rewrite only once ptxas and the SASS bear it out.

    \b
    Policies: read-only loads get .nc (pointer parameters may alias: declare them alias-free with --noalias
    KERNEL, as __restrict__ does); streaming loads .L1::no_allocate (.L2::256B when wide and sequential);
    write-once stores .cs; --l2-evict-first adds an evict_first L2 policy. Settings: [tool.ptxtool.optimize].
    Verification, per rewrite: ptxas accepts the output, its SASS carries the promised modifiers, no access crossed
    a barrier, fence or atomic, nothing else changed; a rewrite that fails is dropped and said why (--strict: the
    file fails). The output is the input's text with the kept rewrites spliced in.
    Exit 0: verified and written (or printed); 1: verification failed (--strict, --verify-gpu), nothing written;
    2: bad input; 3: no ptxas.

    \b
    Examples:
      ptxtool optimize k.ptx -o k.opt.ptx              verified rewrites; the reasons on stderr
      ptxtool optimize k.ptx --diff                    what would change, as a unified diff
      ptxtool optimize --noalias my_kernel -i k.ptx    .nc too, for a kernel whose pointers never alias
      ptxtool optimize k.ptx -o k.opt.ptx --verify-gpu saxpy.toml   also compare outputs on the GPU
    """
    from ptxtool.services.optimize import Options, execute

    if output and in_place:
        raise click.UsageError("give -o or --in-place, not both")
    if show_diff and (output or in_place or as_json):
        raise click.UsageError("--diff writes nothing: drop -o/--in-place/--json, or --diff to write")
    if as_json and not (output or in_place):
        raise click.UsageError("--json needs -o or --in-place: without them stdout carries the PTX")
    if in_place and file == STDIN:
        raise click.UsageError("--in-place needs a file, not stdin")
    passes, settings = _optimize_settings(options)
    source = read_source(file)
    result = execute(Options(passes, settings, options["arch"], strict, spec), source)
    console = stderr_console()
    _warn_unmatched(console, result, options)
    _print_optimize(console, result, verbose)
    target = file if in_place else output
    if show_diff:
        if result.verified:
            _print_diff(source.display, source.text, result.text, sys.stdout.isatty())
    elif result.verified and target and (result.changed or target != file):
        write_atomic(target, result.text)
    if as_json:
        json.dump(result.to_data(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif result.verified and not target and not show_diff:
        sys.stdout.write(result.text)
    sys.exit(result.exit_code)


if __name__ == "__main__":
    main()

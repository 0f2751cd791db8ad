"""The `ptxtool` command: click commands that read options, call the library, and hand results to report/.

Exit codes (every command): 0 success, 1 the command found something (a file would change, findings),
2 bad input or usage, 3 a required tool or driver missing, 4 an internal error (a bug).
"""

from __future__ import annotations

import importlib

import click

from ptxtool import __version__
from ptxtool.deferred import Commands, argument, option
from ptxtool.group import Group, guarded
from ptxtool.help import HELP
from ptxtool.report import FORMATS, emit_and_exit

# Start-up counts against a ptxas run of a tenth of a second (benchmarks/startup.py): what only some commands use
# (sources, report.console, dataclasses, the services) is imported inside the command that uses it, and a command's
# click objects are built only when it runs (ptxtool.deferred: `command`, `option`, `argument`).


def _dash_is_stdout(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`-o -` means stdout, as everywhere else on the command line (not a file named `-`)."""
    from ptxtool.sources import STDIN

    return None if value == STDIN else value


# one file-name type for every option that takes one: each click.Path asks gettext for its name as it is made, and
# the options' arguments are made when cli.py is imported (a dozen lookups of translation files in every run)
_FILE = click.Path(dir_okay=False)


class _BlockThreads(click.IntRange):
    """`IntRange(1, MAX_BLOCK_THREADS)` that reads isa.targets when --block-size is used or shown: importing it (and
    syntax.names under it) would cost `fmt`, `parse` and `lint` a tenth of their start-up."""

    def __init__(self) -> None:
        super().__init__(1, None)

    @property
    def max(self) -> int:
        from ptxtool.isa.targets import MAX_BLOCK_THREADS

        return MAX_BLOCK_THREADS

    @max.setter
    def max(self, value: None) -> None:
        """IntRange.__init__ sets None here; the limit is always the table's."""


def _gpu_target(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--arch checked before any work: a typo is a usage error, not an nvcc failure (or 'nvcc missing') later."""
    from ptxtool.syntax.names import TARGET

    if value is not None and not TARGET.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not a GPU target: expected sm_XY, sm_XYa or sm_XYf (e.g. sm_90a)")
    return value


@click.group(
    cls=Group, help=HELP["main"], context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, prog_name="ptxtool")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for internal errors.")
@click.option("-v", "--verbose", is_flag=True, help="Say which pyproject.toml the settings came from.")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: bool) -> None:
    """The ptxtool command group: its --help is HELP["main"]."""
    # once, before any worker process starts
    if ctx.invoked_subcommand in ("inspect", "sass", "lint", "optimize", "report"):
        from ptxtool.toolchain.compile import cache_dir

        cache_dir()


main.commands = Commands()  # each command is built when it is looked up: start-up builds only the one that runs


def command(name: str):
    """`@main.command(name, help=HELP[name])`, built on first use (ptxtool.deferred)."""
    return main.commands.command(name, help=HELP[name])


def _service(name: str):
    """A service module, imported when its command runs (start-up time counts against a 0.5 s ptxas run)."""
    return importlib.import_module(f"ptxtool.services.{name}")


def _read_inputs(files: tuple[str, ...], **kinds: bool) -> list:
    """`sources.read_inputs`, imported when a command reads its files."""
    from ptxtool.sources import read_inputs

    return read_inputs(files, **kinds)


def _settings(section: str):
    """`[tool.ptxtool.<section>]`, checked; with -v, say which pyproject.toml it came from."""
    from ptxtool.config import load

    table = load(section)
    if click.get_current_context().find_root().params.get("verbose"):
        from ptxtool.report.console import stderr_console

        stderr_console().print(f"settings: {table.path or 'no pyproject.toml found'}", markup=False)
    return table


def _form(as_json: bool, sarif: bool = False, chosen: str | None = None) -> str:
    named = [f for f, given in (("json", as_json), ("sarif", sarif), (chosen, chosen)) if given]
    if len(set(named)) > 1:
        raise click.UsageError(f"choose one output format, not {' and '.join(sorted(set(named)))}")
    return named[0] if named else "text"


# ---------------------------------------------------------------- parse, fmt, doctor


@command("parse")
@argument("files", nargs=-1, required=True, metavar="FILE...")
@option("--json", "as_json", is_flag=True, help="Print the syntax tree of each file as JSON on stdout.")
@option("--check", is_flag=True, help="Also report what the file's .version/.target does not allow (exit 1).")
@guarded
def parse_command(files: tuple[str, ...], as_json: bool, check: bool) -> None:
    parse = _service("parse")
    emit_and_exit(parse.execute(parse.Options(check), _read_inputs(files)), _form(as_json))


@command("fmt")
@argument("files", nargs=-1, required=True, metavar="FILE...")
@option("-o", "--output", type=_FILE, callback=_dash_is_stdout, help="Write here (- for stdout).")
@option("--in-place", "-i", is_flag=True, help="Rewrite each file in place (atomically).")
@option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@option("--diff", is_flag=True, help="Print a unified diff of what would change (coloured on a terminal).")
@option("--color/--no-color", default=None, help="Colour the diff (default: when stdout is a terminal).")
@guarded
def fmt_command(files: tuple[str, ...], **options) -> None:
    fmt = _service("fmt")
    emit_and_exit(fmt.execute(fmt.Options(**options).checked(files), _read_inputs(files)))


@command("doctor")
@option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
@guarded
def doctor_command(as_json: bool) -> None:
    doctor = _service("doctor")
    emit_and_exit(doctor.execute(doctor.Options(), []), _form(as_json))


# ---------------------------------------------------------------- run, bench (GPU)


def _gpu_options(function):
    """The options `run` and `bench` share: the launch spec, the kernel, the seed, ptxas, --json."""
    for decorator in reversed(
        (
            argument("files", nargs=-1, required=True, metavar="A.ptx [B.ptx]"),
            option("--spec", "-s", required=True, help="Launch spec (TOML): grid, block, parameters."),
            option("--kernel", "-k", help="Kernel name (default: the spec's `kernel`, or the file's only one)."),
            option("--seed", type=int, help="Seed of the random inputs (default: the spec's `seed`)."),
            option("--ptxas", is_flag=True, help="Assemble with ptxas for this GPU instead of the driver's JIT."),
            option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout."),
        )
    ):
        function = decorator(function)
    return function


@command("run")
@_gpu_options
@option("--trials", "-n", type=click.IntRange(min=1), help="Trials, fresh random inputs each (default: spec).")
@option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds per launch.")
@guarded
def run_command(files: tuple[str, ...], as_json: bool, **options) -> None:
    run = _service("run")
    emit_and_exit(run.execute(run.Options(**options), _read_inputs(files, binary=True)), _form(as_json))


@command("bench")
@_gpu_options
@option("--launches", type=click.IntRange(min=3), default=200, show_default=True, help="Timed launches each.")
@option("--warmup", type=click.IntRange(min=0), default=20, show_default=True, help="Untimed launches first.")
@guarded
def bench_command(files: tuple[str, ...], as_json: bool, **options) -> None:
    bench = _service("bench")
    emit_and_exit(bench.execute(bench.Options(**options), _read_inputs(files, binary=True)), _form(as_json))


# ---------------------------------------------------------------- inspect, sass, cfg


def _inspect_options(arch: str | None, block_size: int | None, backend: str | None, **pressure):
    """The per-file options: flags over [tool.ptxtool.inspect] over the defaults."""
    from ptxtool.services.inspect import Options

    t = _settings("inspect")
    return Options(
        t.pick(arch, "arch"), t.pick(block_size, "block-size"), t.pick(backend, "backend", "ptxas"), **pressure
    ), t


@command("inspect")
@argument("files", nargs=-1, required=True, metavar="FILE...")
@option("--arch", callback=_gpu_target, help="Compile for this target (e.g. sm_90a), not the module's .target.")
@option(
    "--block-size",
    type=_BlockThreads(),
    help="Threads per block (default: .reqntid/.maxntid, 256).",
)
@option("--backend", type=click.Choice(["ptxas", "nvjitlink"]), help="ptxas (default) or nvJitLink in-process.")
@option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema ptxtool.inspect/1).")
@option("--sarif", is_flag=True, help="Print SARIF 2.1.0 (violations and ptxas warnings at PTX lines).")
@option("--budget", type=_FILE, help="TOML limits per kernel name or glob.")
@option("--baseline", type=_FILE, help="JSON snapshot to compare with: fail on regressions.")
@option("--update-baseline", is_flag=True, help="Write the --baseline file from this run instead of comparing.")
@option("--strict", is_flag=True, help="A budget table matching no kernel is an error (exit 1), not a warning.")
@option("-j", "--jobs", type=click.IntRange(1), help="Parallel processes (default: one per core).")
@option("--pressure", is_flag=True, help="Draw each kernel's register pressure beside ptxas's live registers.")
@option("--kernel", "-k", "pressure_kernel", help="With --pressure: only this kernel.")
@option("--svg", type=_FILE, help="With --pressure: write the picture of one kernel here.")
@guarded
def inspect_command(files: tuple[str, ...], as_json: bool, sarif: bool, **o) -> None:
    from dataclasses import replace

    from ptxtool.report.console import progress

    inspect = _service("inspect")
    form = _form(as_json, sarif)
    options, table = _inspect_options(o["arch"], o["block_size"], o["backend"], pressure=o["pressure"])
    options = replace(options, pressure_kernel=o["pressure_kernel"])
    budget, baseline = o["budget"] or table.path_value("budget"), o["baseline"] or table.path_value("baseline")
    checks = inspect.Checks(budget, baseline, o["update_baseline"], o["svg"], o["jobs"], o["strict"])
    checks = checks.checked(options, files)
    with progress(len(files), "inspecting") as advance:
        result = inspect.execute(options, _read_inputs(files, cuda=True), checks, advance)
    emit_and_exit(result, form)


@command("sass")
@argument("file", metavar="FILE")
@option("--kernel", "-k", help="Only this kernel (or function): its PTX name or its C++ name.")
@option("--arch", callback=_gpu_target, help="Compile for this target instead of the module's .target.")
@option("--plain", is_flag=True, help="SASS only, without the PTX lines it came from.")
@option("--addresses", is_flag=True, help="Each instruction's offset in its function, as nvdisasm prints it.")
@option("--source", is_flag=True, help="The CUDA/Triton source lines the PTX's .loc names, when readable.")
@guarded
def sass_command(file: str, kernel: str | None, arch: str | None, plain: bool, addresses: bool, source: bool) -> None:
    sass = _service("sass")
    options, _ = _inspect_options(arch, None, None)
    chosen = sass.Options(kernel, options.arch, options.backend, not plain, addresses, source)
    emit_and_exit(sass.execute(chosen, _read_inputs((file,), cuda=True)))


@command("cfg")
@argument("file", metavar="FILE")
@option("--kernel", "-k", help="The kernel (or function) to draw; needed when FILE has several.")
@option("-o", "--output", type=_FILE, callback=_dash_is_stdout, help="Write .dot or .svg here.")
@option("--format", "form", type=click.Choice(["dot", "svg"]), help="dot text or SVG (default: by -o, else dot).")
@guarded
def cfg_command(file: str, kernel: str | None, output: str | None, form: str | None) -> None:
    cfg = _service("cfg")
    emit_and_exit(cfg.execute(cfg.Options(kernel, output, form), _read_inputs((file,))))


@command("report")
@argument("files", nargs=-1, required=True, metavar="FILE...")
@option("-o", "--output", type=_FILE, callback=_dash_is_stdout, help="Write the page here.")
@option("--optimized", type=_FILE, help="Compare with this optimized PTX (one FILE).")
@option("--tune", type=_FILE, help="Show this tuning result (JSON).")
@option("--arch", callback=_gpu_target, help="Compile for this target instead of the module's .target.")
@option("--block-size", type=_BlockThreads(), help="Threads per block (see inspect).")
@guarded
def report_command(files: tuple[str, ...], output, optimized, tune, arch, block_size) -> None:
    from ptxtool.lint import load_settings

    report = _service("report")
    chosen, _ = _inspect_options(arch, block_size, None)  # the numbers `inspect` gives, under the same settings
    table = _settings("lint")
    lint = load_settings(table.table, table.where, arch=chosen.arch)
    options = report.Options(output, optimized, tune, chosen.arch, chosen.block_size, lint).checked(files)
    emit_and_exit(report.execute(options, _read_inputs(files)))


# ---------------------------------------------------------------- lint


def _rule_list(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t.strip() for v in values for t in v.split(",") if t.strip())


@command("lint")
@argument("files", nargs=-1, metavar="FILE...")
@option("--select", multiple=True, help="Only these rules: ids, id prefixes or names, comma-separated.")
@option("--ignore", multiple=True, help="Leave out these rules (ids, prefixes or names, comma-separated).")
@option("--explain", metavar="ID", help="Print the documentation of one rule and exit.")
@option("--list-rules", is_flag=True, help="Print every rule: id, name, severity, summary.")
@option("--no-ptxas", is_flag=True, help="Skip the rules that run ptxas (PTX008).")
@option("--arch", callback=_gpu_target, help="Target for .cu files (nvcc -arch) and ptxas (default: .target).")
@option("--require-nvcc", is_flag=True, default=None, help="A .cu/.cuh file without nvcc is an error (exit 3).")
@option(
    "--output-format",
    type=click.Choice(FORMATS),
    help="Findings as lines, JSON (ptxtool.lint/1), SARIF 2.1.0 or GitHub Actions annotations (default: text).",
)
@option("--json", "as_json", is_flag=True, help="Same as --output-format json.")
@option("--sarif", is_flag=True, help="Same as --output-format sarif.")
@option("--statistics", is_flag=True, help="Count the findings of each rule instead of listing them.")
@option("--fail-on", type=click.Choice(["error", "warning", "note"]), help="Least severity for exit 1 (note).")
@option("-j", "--jobs", type=click.IntRange(1), help="Parallel processes (default: one per core).")
@guarded
def lint_command(files: tuple[str, ...], explain: str | None, list_rules: bool, **o) -> None:
    from ptxtool.lint import load_settings

    lint = _service("lint")
    if explain or list_rules:
        if files:  # `lint --explain ID k.ptx` would print the rule and lint nothing: say so instead
            raise click.UsageError("--explain and --list-rules take no FILE: run lint FILE... on its own")
        return emit_and_exit(lint.describe(explain))
    if not files:
        raise click.UsageError("give FILE... to lint, - to read standard input (or --explain ID, --list-rules)")
    form, table = _form(o["as_json"], o["sarif"], o["output_format"]), _settings("lint")
    if o["statistics"] and form != "text":
        raise click.UsageError(f"--statistics is a text report; --output-format {form} lists every finding")
    select, ignore = _rule_list(o["select"]), _rule_list(o["ignore"])
    ptxas = False if o["no_ptxas"] else None
    flags = dict(ptxas=ptxas, require_nvcc=o["require_nvcc"], arch=o["arch"], fail_on=o["fail_on"])
    settings = load_settings(table.table, table.where, select=select, ignore=ignore, **flags)
    options = lint.Options(settings, o["jobs"], o["statistics"])
    emit_and_exit(lint.execute(options, _read_inputs(files, cuda=True)), form)


# ---------------------------------------------------------------- optimize


@command("optimize")
@argument("file", metavar="FILE")
@option("-o", "--output", type=_FILE, callback=_dash_is_stdout, help="Write the optimized PTX here.")
@option("--in-place", "-i", is_flag=True, help="Rewrite FILE in place (only once verified).")
@option("--diff", "show_diff", is_flag=True, help="Print the unified diff of the verified rewrites; write nothing.")
@option("--strict", is_flag=True, help="All or nothing: any rewrite that fails verification fails the file.")
@option("-v", "--verbose", is_flag=True, help="Also list each candidate the passes skipped, and why.")
@option("--passes", help="Comma-separated passes: cache-operators, registers, warp-roles (default: cache-operators).")
@option("--arch", callback=_gpu_target, help="Verify for this target (e.g. sm_90) instead of the module's .target.")
@option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout (needs -o or --in-place).")
@option("--verify-gpu", "spec", help="Also run original and optimized on the GPU with this launch spec.")
@option("--readonly/--no-readonly", default=None, help="`.nc` on loads of memory the kernel never writes.")
@option("--streaming/--no-streaming", default=None, help="`.L1::no_allocate` (+ `.L2::256B`) on streams.")
@option("--stores/--no-stores", default=None, help="`.cs` (or --store-hint) on write-once stores.")
@option("--l2-evict-first/--no-l2-evict-first", default=None, help="createpolicy + .L2::cache_hint on streams.")
@option("--store-hint", type=click.Choice(["cs", "L1::no_allocate"]), help="Hint for write-once stores.")
@option(
    "--unsafe-volatile-nc",
    is_flag=True,
    help="DeepEP's trick: volatile loads of data other agents write become .nc (OUTSIDE the PTX memory model).",
)
@option("--noalias", multiple=True, metavar="KERNEL", help="The kernel's pointer parameters never alias.")
@option("--include", multiple=True, metavar="KERNEL", help="Optimize only these kernels (globs).")
@option("--exclude", multiple=True, metavar="KERNEL", help="Leave these kernels alone (globs).")
@option(
    "--variant",
    type=click.Choice(["split", "split-async", "split-bulk", "pipeline"]),
    help="warp-roles: split (default; producers ld+st), split-async (producers cp.async), split-bulk (one producer "
    "warp, cp.async.bulk where checked at run time, sm_90+) or pipeline (no roles).",
)
@option("--producer-warps", type=click.IntRange(1, 32), help="warp-roles: producer warps (default: N/32).")
@option("--stages", type=click.IntRange(2, 16), help="warp-roles: mbarrier ring slots (default: 2).")
@guarded
def optimize_command(
    file: str,
    output: str | None,
    in_place: bool,
    show_diff: bool,
    strict: bool,
    verbose: bool,
    as_json: bool,
    spec: str | None,
    **flags,
) -> None:
    from dataclasses import replace

    from ptxtool.sources import read_source

    optimize = _service("optimize")
    table = _settings("optimize")
    passes, settings = optimize.settings_from(table.table, table.where, flags)
    named = tuple((o, glob) for o in ("noalias", "include", "exclude") for glob in flags[o])
    chosen = optimize.Options(
        passes, settings, flags["arch"], strict, spec, output, in_place, show_diff, verbose, named
    )
    chosen = replace(chosen, roles=optimize.roles_from(flags))
    emit_and_exit(optimize.execute(chosen.checked(file, as_json), read_source(file)), _form(as_json))


# ---------------------------------------------------------------- tune (GPU)


@command("tune")
@argument("file", metavar="FILE")
@option("--spec", "-s", required=True, help="Launch spec (TOML); its [tune] table marks what may vary.")
@option("-o", "--output", type=_FILE, help="Write the winner's PTX here.")
@option("--space", type=_FILE, help="TOML that narrows or widens the search space.")
@option("--kernel", "-k", help="Kernel name (default: the spec's `kernel`, or the file's only one).")
@option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (schema ptxtool.tune/1).")
@option("--budget-s", type=click.FloatRange(min=0.001), help="Bound the wall time, in seconds.")
@option("--objective", type=click.Choice(["alone", "neighbour"]), help="What to minimize (default: alone).")
@option("--neighbour-mib", type=click.IntRange(min=0), help="Size of the neighbour's L2-resident sum (24).")
@option("--gpus", help="GPUs to spread candidates over: all, or a number (default 1).")
@option("--fresh", is_flag=True, help="Measure again, ignoring results cached from an earlier run.")
@option("--dry-run", is_flag=True, help="List the candidates and their ptxas numbers; time nothing.")
@guarded
def tune_command(file: str, spec: str, output: str | None, space: str | None, as_json: bool, **o) -> None:
    from ptxtool.report.console import phases

    tune = _service("tune")
    table = _settings("tune")
    flags = {key: o.pop(key) for key in ("budget_s", "objective", "neighbour_mib", "gpus")}
    options = tune.Options(spec, output, space, table.table, table.where, flags, **o)
    with phases("tune") as say:
        result = tune.execute(options, _read_inputs((file,)), say)
    emit_and_exit(result, _form(as_json))


if __name__ == "__main__":
    main()

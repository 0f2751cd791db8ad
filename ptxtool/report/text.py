"""Text renderers, one per Result type: results on stdout, diagnostics and status on stderr. With `machine` the
Result's JSON or SARIF document is already on stdout, and only the stderr part is written."""

from __future__ import annotations

from ptxtool.errors import Diagnostic, Location
from ptxtool.report.console import Out, diagnostic_line

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from collections.abc import Callable


def parse(result, out: Out, machine: bool) -> None:
    """Each file's diagnostics, then its one-line summary: PTX version, targets, kernels, functions, instructions."""
    from ptxtool.syntax import ast

    for f in result.files:
        for d in (*f.errors, *f.problems):
            out.diagnostic(d)
        m = f.module
        if m is None or machine:
            continue
        kernels = len(m.kernels)
        functions = sum(1 for g in m.functions if not g.is_kernel and g.body is not None)
        count = sum(1 for g in m.functions if g.body for _ in ast.instructions(g.body))
        state = f"{len(f.problems)} legality problem(s)" if f.problems else "ok"
        out.line(
            f"{f.path}: {state} — PTX {m.version or '?'}, {', '.join(m.targets) or 'no target'}; "
            f"{kernels} kernel{'s' * (kernels != 1)}, {functions} function{'s' * (functions != 1)}, "
            f"{count} instruction{'s' * (count != 1)}"
        )


def fmt(result, out: Out, machine: bool) -> None:
    o = result.options
    colour = out.terminal if o.color is None else o.color
    for d in result.errors:
        out.diagnostic(d)
    for f in result.files:
        if o.diff and f.changed:
            _diff(out, f.path, f.before, f.after, colour)
        if o.check:
            if f.changed and not o.diff:
                out.status(f"would reformat {f.path}")
        elif not (o.in_place or o.output or o.diff or machine):
            out.stdout.write(f.after)
    if o.check or o.in_place or len(result.files) + result.failed > 1:
        verb = "would reformat" if o.check else "reformatted"
        changed = sum(f.changed for f in result.files)
        done = len(result.files)
        out.status(
            f"{verb} {changed} of {done} file{'s' * (done != 1)}"
            + (f"; {result.failed} could not be read or parsed" if result.failed else "")
        )


def _diff(out: Out, name: str, before: str, after: str, colour: bool) -> None:
    import difflib  # only --diff needs it: `fmt FILE -o OUT` and `parse` do not pay for its import

    old, new = (name, name) if name.startswith(("/", "<")) else (f"a/{name}", f"b/{name}")
    for line in difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), old, new):
        if not line.endswith("\n"):  # the marker `patch` and `git apply` need, on a line of its own
            line += "\n\\ No newline at end of file\n"
        if colour:
            code = "1" if line.startswith(("+++", "---")) else {"+": "32", "-": "31", "@": "36"}.get(line[:1])
            if code:
                line = f"\x1b[{code}m{line[:-1]}\x1b[0m\n"
        out.stdout.write(line)


def doctor(result, out: Out, machine: bool) -> None:
    if machine:
        return
    for name, tool in result.tools.items():
        if not tool["ok"]:
            state = "broken" if tool.get("path") else "missing"  # found but does not run, or not found
            label = f"{state} (required)" if tool["required"] else f"{state} (optional)"
            out.line(f"{name:10} {label}: {tool['problem']}")
            continue
        out.line(f"{name:10} {tool['version']:10} {tool['path']}  (found by {tool['found_by']})")
        if name == "ptxas":
            out.line(f"{'':10} PTX ISA up to {tool['max_ptx_isa'] or '?'}; targets {', '.join(tool['targets'])}")
    driver = result.gpu_driver
    out.line(f"{'GPU':10} {'present' if driver['present'] else 'absent':10} {driver['detail']}")


def cfg(result, out: Out, machine: bool) -> None:
    if result.written is None and not machine:
        out.stdout.write(result.text)


def report(result, out: Out, machine: bool) -> None:
    if result.written is None and not machine:
        out.stdout.write(result.html)
    else:
        kernels = sum(len(f.kernels) for f in result.files)
        out.status(f"{result.written}: report of {len(result.files)} file(s), {kernels} kernel(s)")


def sass(result, out: Out, machine: bool) -> None:
    """Each function under its name (demangled beside a C++ symbol); a source line (`--source`) or PTX line above
    the run of instructions it made, the offset before each instruction with `--addresses`."""
    from pathlib import PurePath

    from ptxtool.syntax.names import display

    if not result.functions:
        out.status(f"{result.path}: no SASS: ptxas keeps kernels (.entry) and the functions they call")
    for note in result.notes:
        out.status(f"note: {note}")
    if machine:
        return
    lines, text = result.ptx_lines, []
    for name, entries in result.functions.items():
        text.append(f"// ---- {display(name)}")
        shown, source = 0, None
        for entry in entries:
            at = result.source_of.get(entry.ptx_line)
            if at and at != source:
                source = at
                quoted = result.source_texts.get(at.file)
                code = f"  {quoted[at.line - 1].strip()}" if quoted and at.line <= len(quoted) else ""
                text.append(f"// {PurePath(at.file).name}:{at.line}{code}")
            if result.with_ptx and entry.ptx_line and entry.ptx_line != shown and entry.ptx_line <= len(lines):
                shown = entry.ptx_line
                text.append(f"        // {shown:>5}: {lines[shown - 1].strip()}")
            at_address = f"/*{entry.address:04x}*/ " if result.addresses and entry.address is not None else ""
            text.append(entry.text if entry.text.endswith(":") else f"    {at_address}{entry.text};")
        text.append("")
    out.stdout.write("\n".join(text))


def inspect(result, out: Out, machine: bool) -> None:
    from ptxtool.report.pictures import peak_text, pressure_text
    from ptxtool.report.tables import inspect_table

    for d in result.errors:
        out.diagnostic(d)
    reports = result.reports
    if reports and not machine:  # no table of nothing when every input failed
        inspect_table(out, reports)
        for report, kernel in result.drawn:
            p = kernel.pressure
            out.line(f"\n{report.path}: {report.backend} allocated {p.registers} registers")
            out.stdout.write(pressure_text(p.curve, 32, 40, p.real, f"{report.backend} live"))
            out.stdout.write(peak_text(p.curve, p.peak_live))
    for r in reports:
        if r.backend == "nvjitlink" or r.relocatable:
            what = "nvJitLink numbers are relocatable-mode numbers" if r.backend == "nvjitlink" else ""
            out.diagnostic(Diagnostic(Location(r.path), what or "relocatable: external calls unresolved", "note"))
        for d in r.ptxas_warnings():
            out.diagnostic(d)
    for warning in result.warnings:
        out.status(f"warning: {warning}")
    for note in result.notes:
        out.status(note)
    for d in result.violations:
        out.diagnostic(d)


def lint(result, out: Out, machine: bool) -> None:
    """One line per finding (severity coloured on a terminal), or with `statistics` one line per rule with its
    count; then notices, unreadable files and the summary on stderr."""
    if result.statistics and not machine:
        _lint_statistics(result, out)
    elif not machine:
        for f in result.findings:
            out.line(diagnostic_line(f, out.colour))
    notices: dict[str, list[str]] = {}
    for r in result.files:
        for n in r.notices:
            notices.setdefault(n, []).append(r.path)
        for d in r.errors:
            out.diagnostic(d)
    for message, paths in notices.items():
        out.status(f"{paths[0] if len(paths) == 1 else f'{len(paths)} files'}: notice: {message}")
    findings = result.findings
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "note")}
    detail = ", ".join(f"{n} {s}{'s' * (n != 1)}" for s, n in counts.items() if n)
    unread = sum(1 for r in result.files if r.errors)
    checked = sum(1 for r in result.files if r.checked and (r.findings or not r.errors))  # rules ran, ptxas may not
    skipped = sum(1 for r in result.files if not r.checked)
    out.status(
        f"{len(findings)} finding{'s' * (len(findings) != 1)}{f' ({detail})' if detail else ''} in {checked} "
        f"file{'s' * (checked != 1)}"
        + (f"; {skipped} not checked" if skipped else "")
        + (f"; {unread} could not be read, parsed or assembled" if unread else "")
    )


def _lint_statistics(result, out: Out) -> None:
    """`count  ID  name  severity`, most frequent first (as `ruff --statistics`)."""
    counts: dict[tuple[str, str, str], int] = {}
    for f in result.findings:
        key = (f.code, f.properties["name"], f.severity)
        counts[key] = counts.get(key, 0) + 1
    for (rule, name, severity), n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        out.line(f"{n:>5}  {rule}  {name:30} {severity}")


def rules(result, out: Out, machine: bool) -> None:
    if machine:
        return
    if result.explain:
        (r,) = result.rules
        out.line(f"{r.id} {r.name} ({r.severity})\n\n{r.doc}")
        if result.options:
            import json

            out.line("\nOptions: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in result.options.items()))
        return
    for r in result.rules:
        out.line(f"{r.id}  {r.name:26} {r.severity:8} {r.summary}")


def run(result, out: Out, machine: bool) -> None:
    """`run`: the verdict and what decided it, on stderr (stdout holds only `--json`)."""
    from ptxtool.report.gpu import run_lines

    for line in run_lines(result):
        out.status(line)


def bench(result, out: Out, machine: bool) -> None:
    from ptxtool.report.gpu import bench_lines

    for line in bench_lines(result):
        out.status(line)


def tune(result, out: Out, machine: bool) -> None:
    """`tune`: the table of candidates, the winner and how sure, on stderr (stdout holds only `--json`)."""
    from ptxtool.report.gpu import tune_lines

    for line in tune_lines(result):
        out.status(line)


def optimize(result, out: Out, machine: bool) -> None:
    """Typos in kernel globs, each kept rewrite with its reasons, per-kernel SASS changes, what verification dropped
    and why, each kernel a pass refused whole and the skipped candidates (verbose), one summary line; on stdout the
    PTX (or --diff's diff)."""
    from rich.markup import escape  # here: the commands that print no markup never load rich

    o = result.options
    for warning in result.unmatched:
        out.status(f"warning: {warning}")
    for r in result.reports:
        for rewrite in r.rewrites:
            out.status(f"{result.path}:{rewrite.line}: {rewrite.kernel}: {rewrite.before} -> {rewrite.after}")
            for reason in rewrite.reasons:
                out.status(f"    {reason}")
    for k in result.kernels:
        if k.before is None or k.after is None or k.memory_before == k.memory_after:
            continue
        spill_before, spill_after = (r.spill_stores + r.spill_loads for r in (k.before, k.after))
        out.status(
            f"{k.name}: registers {k.before.registers} -> {k.after.registers}, spill bytes {spill_before} -> "
            f"{spill_after}"
        )
        for variant in sorted(set(k.memory_before) | set(k.memory_after)):
            a, b = k.memory_before.get(variant, 0), k.memory_after.get(variant, 0)
            if a != b:
                out.status(f"    {variant}: {a} -> {b}")
    for r in result.reports:
        for k in getattr(r, "kernels", ()):
            for line in _register_lines(k, o.verbose):
                out.status(line)
    for d in result.dropped:
        out.diagnostic(d)
    for r in result.reports:  # a pass that left a whole kernel alone (the skip names the pass) says why, -v or not
        for s in (s for s in r.skipped if o.verbose or s.mnemonic == r.name):
            out.status(f"{result.path}:{s.line}: {s.kernel}: skipped {s.mnemonic}: {s.reason}")
    for warning in result.warnings:
        out.stderr.print(f"[bold yellow]warning:[/bold yellow] {escape(warning)}")
    for b in result.checks.batching:  # warp-roles: the consumers' loads in flight, loud where they fell
        if b.fell:
            out.stderr.print(f"[bold yellow]warning:[/bold yellow] {escape(str(b))}")
        else:
            out.status(str(b))
    hints = dict.fromkeys(s.kernel for r in result.reports for s in r.skipped if "--noalias" in s.reason)
    for kernel in hints:  # the one skip a user can act on: declare the pointers alias-free
        out.status(f"note: {kernel}: loads could be .nc if its pointers never alias (--noalias {kernel})")
    for problem in result.problems:
        out.stderr.print(f"[bold red]verification failed:[/bold red] {escape(problem)}")
    out.status(_optimize_summary(result))
    if machine or not result.verified:
        return
    if o.diff:
        _diff(out, result.path, result.original, result.text, out.terminal)
    elif not (o.output or o.in_place):
        out.stdout.write(result.text)


def _occupancy(n) -> str:
    return "occupancy unknown" if n.occupancy is None else f"occupancy {n.occupancy:.0%} ({n.limited_by})"


def _register_lines(k, verbose: bool) -> list[str]:
    """The register pass on one kernel: before -> after, the changes (loud where the author's bounds changed), how
    it was chosen and the speedup; or why it was left alone. Verbose: every variant tried."""
    if not k.changed:
        lines = [f"{k.name}: registers {k.before.registers}, {k.before.spill_bytes} spill bytes: {k.note}"]
    else:
        a, b = k.before, k.after
        lines = [
            f"{k.name}: registers {a.registers} -> {b.registers}, spill bytes {a.spill_bytes} -> {b.spill_bytes}, "
            f"{_occupancy(a)} -> {_occupancy(b).removeprefix('occupancy ')} · {k.chosen_by}"
        ]
        if k.author_bounds_changed:
            lines.append(f"    AUTHOR'S BOUNDS CHANGED: {k.bounds_before} -> {k.bounds_after}")
        lines += [f"    {change}" for change in k.changes]
        if k.speed:
            s = k.speed
            lines.append(f"    speedup {s.speedup:.2f}x (95% interval {s.low:.2f}-{s.high:.2f}), outputs identical")
    if verbose:
        for t in k.tried:
            n = t.numbers
            numbers = f"{n.registers} registers, {n.spill_bytes} spill bytes, {_occupancy(n)}" if n else "no numbers"
            timed = f", {t.speed.speedup:.2f}x" if t.speed else ""
            lines.append(f"    tried {t.change}: {numbers}{timed}: {t.verdict}")
    return lines


def _optimize_summary(result) -> str:
    """`FILE: 3 rewrites kept, 1 dropped · ptxas ok · 5/5 promised SASS modifiers present · no load crossed a
    barrier · other SASS unchanged · GPU: outputs identical, 3 trials` (or why nothing is written)."""
    kept = sum(len(r.rewrites) for r in result.reports)
    head = f"{result.path}: {kept} rewrite{'s' * (kept != 1)} kept"
    head += f", {len(result.dropped)} dropped" if result.dropped else ""
    if not result.verified:
        return f"{head} · NOT verified: nothing written"
    retuned = [k.name for r in result.reports for k in getattr(r, "kernels", ()) if k.changed]
    if retuned:
        head += f", {len(retuned)} kernel{'s' * (len(retuned) != 1)} retuned by the register pass"
    if not kept and not retuned:
        return head + " · input unchanged"
    c = result.checks
    if c.roles:  # warp-roles: verified as a whole, not per instruction
        return " · ".join(
            (
                head,
                "ptxas ok",
                f"SASS of {c.roles} warp-role kernel(s) shows the ring (mbarrier waits and arrivals; LDGSTS, DEPBAR)",
            )
        )
    parts = [head, "ptxas ok"]
    if retuned:
        parts.append("registers and spills as measured")
    if kept:
        parts.append(f"{c.present}/{c.promised} promised SASS modifiers present")
    if c.removed:
        parts.append(f"{c.removed} rewritten access{'es' * (c.removed != 1)} removed by ptxas")
    if kept:
        parts += ["no access crossed a barrier, fence or atomic", "other SASS memory and control flow unchanged"]
    if c.gpu:
        parts.append(f"GPU: outputs {c.gpu}, {c.trials} trial{'s' * (c.trials != 1)}")
    return " · ".join(parts)


TEXT: dict[str, Callable[[object, Out, bool], None]] = {
    "ParseResult": parse,
    "FmtResult": fmt,
    "DoctorResult": doctor,
    "CfgResult": cfg,
    "ReportResult": report,
    "SassResult": sass,
    "InspectResult": inspect,
    "LintResult": lint,
    "RulesResult": rules,
    "RunReport": run,
    "BenchReport": bench,
    "OptimizeResult": optimize,
    "TuneResult": tune,
}

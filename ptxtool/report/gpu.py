"""`run` and `bench` for people: the verdict and what decided it, or the timings and their ratio, one line each."""

from __future__ import annotations

from ptxtool.syntax.names import display

VERDICTS = {
    "ran": "ran, and gave the same bits twice on every trial",
    "identical": "outputs identical",
    "within_tolerance": "outputs agree within the spec's tolerance",
    "differ": "outputs differ",
    "nondeterministic": "the first kernel differs from itself on identical inputs",
    "overrun": "a kernel wrote past the end of a buffer",
    "fault": "a kernel failed on the GPU",
}


def mismatch_line(d, left: str, right: str) -> str:
    """The first element where two runs disagree, both values typed, and how many elements differ."""
    error = f"; largest |difference| {d.max_abs_error:.3g}" if d.max_abs_error is not None else ""
    return (
        f"{d.buffer}[{d.index}] ({d.type}, trial {d.trial}, seed {d.seed}): "
        f"{left} {d.left} vs {right} {d.right}; {d.differing} of {d.elements} elements differ{error}"
    )


def overrun_line(o) -> str:
    return f"{o.file} wrote past the end of {o.buffer} (trial {o.trial}): byte {o.offset} past it changed"


def output_line(o) -> str:
    parts = [f"{o.buffer} ({o.type} x {o.elements})"]
    if o.unwritten is not None:
        parts.append(f"{o.unwritten} unwritten")
    if o.nan:
        parts.append(f"{o.nan} NaN")
    if o.low is not None:
        parts.append(f"range [{o.low:.6g}, {o.high:.6g}]")
    parts.append(f"sha256 {o.sha256}")
    return ", ".join(parts)


def run_lines(r) -> list[str]:
    """A RunReport: the kernel, files and device; the verdict; the fault, overruns, differences; each output."""
    device = f"{r.device.name} ({r.device.arch})"
    out = [f"{display(r.kernel)}: {' vs '.join(r.files)} on {device}, {r.trials} trials, seed {r.seed}"]
    out.append(f"{r.verdict}: {VERDICTS[r.verdict]}")
    if r.fault:
        out.append(f"  {r.fault}")
    out += [f"  {overrun_line(o)}" for o in r.overruns]
    out += [f"  {mismatch_line(d, f'{r.files[0]} (run 1)', '(run 2)')}" for d in r.self_differences]
    if len(r.files) > 1:
        out += [f"  {mismatch_line(d, r.files[0], r.files[1])}" for d in r.differences]
    out += [f"  {output_line(o)}" for o in r.outputs]
    return out


def bench_lines(r) -> list[str]:
    """A BenchReport: the rotation of inputs against the L2, each file's median, the ratio B/A and the noise."""
    l2 = r.device.l2_bytes
    out = [
        f"{display(r.kernel)} on {r.device.name} ({r.device.arch}): {r.copies} input copies, "
        f"{r.working_set_bytes / 2**20:.1f} MiB in rotation (L2 {l2 / 2**20:.0f} MiB)"
        + ("" if r.working_set_bytes > l2 else " -- fits in L2: times are cache times")
    ]
    for t in r.timings:
        d = t.to_data()
        out.append(
            f"  {t.file}: median {d['median_us']:.2f} us (p10 {d['p10_us']:.2f}, p90 {d['p90_us']:.2f}, "
            f"{d['launches']} launches), {d['gb_per_s']:.0f} GB/s by the spec's buffer sizes"
        )
    if r.ratio is not None:
        out.append(f"  ratio B/A {r.ratio:.4f} (A against itself: {r.noise:.4f})")
    else:
        out.append(f"  A against itself (even vs odd launches): {r.noise:.4f}")
    return out


def _interval(i, times: str = "") -> str:
    if i is None:
        return "-"
    if i.low is None:
        return f"{i.median:.4f}{times} (too few rounds for an interval)"
    return f"{i.median:.4f}{times} [{i.low:.4f}, {i.high:.4f}]"


def tune_lines(r) -> list[str]:
    """A TuneResult: where and how it was measured, one row per candidate (the input first), the winner and how
    sure that is, what was written, and notes."""
    head = f"{display(r.kernel)} in {r.path} ({r.arch})"
    if r.dry_run:
        out = [f"{head}: {len(r.candidates)} candidates (dry run: nothing timed)"]
    else:
        gpus = ", ".join(f"GPU {i} {d.name} (CUDA {d.driver})" for i, d in enumerate(r.devices))
        out = [f"{head}, objective {r.space.objective}, on {gpus}" + (" -- from the cache" if r.cached else "")]
    width = max(len("candidate"), *(len(c.name) for c in r.candidates))
    several = not r.dry_run and len(r.devices) > 1  # then each row says which GPU timed it against its own input
    out.append(
        f"  {'candidate':{width}} {'verified':10}"
        + (" gpu " if several else "")
        + f" {'regs':>4} {'spill':>5} {'occ':>5}"
        + ("" if r.dry_run else f"  {'median us':>9}  {'ratio to input [interval]':30} neighbour slowdown")
    )
    for c in r.candidates:
        res = c.resources
        occupancy = f"{res.occupancy:.0%}" if res.occupancy is not None else "?"
        verified = {True: "yes", False: "NO", None: "-"}[c.verified]
        verified = {"input": "reference", "pruned": "pruned"}.get(c.status, verified)
        gpu = "-" if c.gpu is None else str(c.gpu)
        registers = res.registers if res.registers is not None else "?"
        row = f"  {c.name:{width}} {verified:10}" + (f" {gpu:4}" if several else "") + f" {registers:>4} "
        row += f"{res.spill_bytes:>5} {occupancy:>5}"
        if not r.dry_run:
            median = f"{c.median_us:.2f}" if c.median_us is not None else "-"
            ratio = "1" if c.status == "input" else _interval(c.ratio)
            row += f"  {median:>9}  {ratio:30} {_interval(c.neighbour_slowdown, 'x')}"
        out.append(row.rstrip())
        if c.problem:
            out.append(f"      {c.status}: {c.problem}")
    if not r.dry_run:
        together = r.space.confidence
        out.append(f"  intervals: {r.confidence:.2%} each, {together:.0%} for all together; {'; '.join(r.stopped)}")
        if several:
            out.append("  each ratio compares a candidate with the input timed on the same GPU (gpu column)")
        winner = next(c for c in r.candidates if c.name == r.winner)
        if r.winner == "input":
            out.append("winner: input (no verified candidate faster beyond noise)")
        else:
            out.append(f"winner: {r.winner}, ratio to input {_interval(winner.ratio)}")
        if winner.median_us is not None:
            where = "beside the neighbour" if r.space.objective == "neighbour" else "alone"
            slowdown = _interval(winner.neighbour_slowdown, "x")
            out.append(f"  its kernel: median {winner.median_us:.2f} us {where}; neighbour slowdown {slowdown}")
        if r.written:
            out.append(f"wrote {r.written}")
    out += [f"note: {n}" for n in r.notes]
    return out

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

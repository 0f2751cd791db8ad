"""What `optimize --passes warp-roles` buys on a GPU: each input kernel, ptxtool's split of it (S = 2, 3, 4 ring
slots; P = N/32, 1, 2 producer warps: `split3`, `split3p1`, `split3p2`), the split with cp.async producers
(`--variant split-async`, the same S and P: `async3`, `async3p1`), the split with one producer warp issuing
cp.async.bulk (`--variant split-bulk`, S = 2, 3: `bulk3`), its pipeline (`--variant pipeline`, S = 2, 3, 4:
`pipe3`) and a hand-written warp-specialized CUDA version of the same algorithm, side by side in one run.

Two steps, because the GPU machine need not have nvcc or ptxas:

    python benchmarks/warp_roles.py prepare .bench-wr   # here: nvcc (wheel) -> PTX, the pass, ptxas checks
    python benchmarks/warp_roles.py measure .bench-wr   # on the GPU (cuda-bindings + numpy): bits, then times

`measure` first checks, for every case and variant, that the output is bit-identical to the input kernel's over
LAUNCHES launches (the output buffer filled with 0xFF before each), with a watchdog: a launch that does not finish
within WATCHDOG_S seconds is reported as a hang and ends the run (a hung kernel cannot be stopped from Python: the
shell script bounds the process as well). Then it times the variants interleaved (median of TIMED launches, CUDA
events) at the occupancy the kernel's real use has (a few blocks per SM) and at full occupancy, and prints input,
ptxtool and reference times with their ratios and TFLOP/s or GB/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent / "warp_roles"
STAGES = (2, 3, 4)
PRODUCERS = (None, 1, 2)  # producer warps: None is one producer thread per consumer thread (N/32 warps)
BULK_STAGES = (2, 3)  # the split-bulk variants (one producer warp)
SETMAXNREG_PRODUCERS = (4,)  # producer warps of the setmaxnreg splits: one warpgroup
LAUNCHES = 100  # bit-identity launches per case and variant
TIMED = 31  # timed launches per case and variant
WATCHDOG_S = 10.0


@dataclass(frozen=True)
class Bench:
    """An input kernel and its hand-written warp-specialized reference (CUDA sources under benchmarks/warp_roles)."""

    source: str
    kernel: str
    reference: str
    reference_kernel: str


BENCHES = {
    "sgemm": Bench("sgemm.cu", "sgemm_tiled", "sgemm_ws.cu", "sgemm_ws"),
    # the same SGEMM with a constant-trip fill loop (nvcc unrolls it: straight-line staging the pipeline can take)
    "sgemm_unrolled": Bench("sgemm_unrolled.cu", "sgemm_unrolled", "sgemm_ws.cu", "sgemm_ws"),
    "stencil": Bench("stencil.cu", "stencil_tiled", "stencil_ws.cu", "stencil_ws"),
    "attention": Bench("attention.cu", "attention_tiled", "attention_ws.cu", "attention_ws"),
    "attention_unrolled": Bench("attention_unrolled.cu", "attention_unrolled", "attention_ws.cu", "attention_ws"),
}


def _block(path: Path, kernel: str) -> int:
    """The block size a kernel declares (`.reqntid`, else `.maxntid`)."""
    from ptxtool.analysis.launch_bounds import block_bounds
    from ptxtool.syntax import parse

    function = next(f for f in parse(path.read_text()).kernels if f.name == kernel)
    return block_bounds(function).dims[0]


def _assemble(path: Path, arch: str = "sm_90") -> None:
    """Write the cubin beside the PTX (the wheel's ptxas; InputError if it rejects it): the GPU machine's driver may be
    older than the PTX's .version and cannot JIT it, while its cubin loads."""
    from ptxtool.toolchain.compile import compile_ptx

    path.with_suffix(".cubin").write_bytes(compile_ptx(path.read_text(), str(path), arch).cubin)


def pipeline_name(stages: int) -> str:
    """`pipe3`: the manifest's and the table's name of the pipeline with S = 3."""
    return f"pipe{stages}"


def async_name(stages: int, producers: int | None) -> str:
    """`async3` (P = N/32), `async3p1`: the manifest's and the table's name of a split with cp.async producers."""
    return f"async{stages}" + (f"p{producers}" if producers else "")


def bulk_name(stages: int) -> str:
    """`bulk3`: the manifest's and the table's name of the split with one producer warp issuing cp.async.bulk."""
    return f"bulk{stages}"


def variant_name(stages: int, producers: int | None, setmaxnreg: bool = False) -> str:
    """`split3` (P = N/32), `split3p1` (one producer warp), `split3p4r` (4 producer warps and setmaxnreg on
    sm_90a): the manifest's and the table's name of a split."""
    return f"split{stages}" + (f"p{producers}" if producers else "") + ("r" if setmaxnreg else "")


def prepare(
    out: Path,
    benches: dict[str, Bench] = BENCHES,
    stages: tuple[int, ...] = STAGES,
    producers: tuple[int | None, ...] = PRODUCERS,
    setmaxnreg: tuple[int, ...] = SETMAXNREG_PRODUCERS,
    pipelines: tuple[int, ...] = STAGES,
    copying: tuple[int | None, ...] = PRODUCERS,
    bulk: tuple[int, ...] = BULK_STAGES,
) -> dict:
    """Compile inputs and references to PTX (sm_90), split each input with every S and P (and, on the input
    retargeted to sm_90a, with setmaxnreg for the warpgroup-aligned P of `setmaxnreg`), with cp.async producers for
    every S and each P of `copying`, with one cp.async.bulk producer warp for every S of `bulk`, pipeline it with
    every S of `pipelines`, write a manifest."""
    from ptxtool.passes.warp_roles import NAME, RoleSettings
    from ptxtool.services.optimize import Options, execute
    from ptxtool.sources import read_source
    from ptxtool.toolchain.compile import cuda_to_ptx

    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict] = {}
    for name, b in benches.items():
        for role, src in (("input", b.source), ("reference", b.reference)):
            text = cuda_to_ptx(str(HERE / src), "sm_90")
            (out / f"{name}.{role}.ptx").write_text(text)
            _assemble(out / f"{name}.{role}.ptx")
        retargeted = (out / f"{name}.input.ptx").read_text().replace("\n.target sm_90\n", "\n.target sm_90a\n")
        (out / f"{name}.input90a.ptx").write_text(retargeted)
        entry: dict = {
            "kernel": b.kernel,
            "block": _block(out / f"{name}.input.ptx", b.kernel),
            "reference_kernel": b.reference_kernel,
            "reference_block": _block(out / f"{name}.reference.ptx", b.reference_kernel),
            "splits": {},
        }
        plain = [(s, p, False, "split") for s in stages for p in producers]
        moving = [(s, p, True, "split") for s in stages for p in setmaxnreg]
        copied = [(s, p, False, "split-async") for s in stages for p in copying]
        copied += [(s, None, False, "split-bulk") for s in bulk]
        for stage, warps, moved, kind in plain + moving + copied + [(s, None, False, "pipeline") for s in pipelines]:
            arch, suffix = ("sm_90a", "input90a") if moved else ("sm_90", "input")
            source = read_source(str(out / f"{name}.{suffix}.ptx"))
            roles = RoleSettings(variant=kind, stages=stage, producer_warps=warps, setmaxnreg=moved or None)
            result = execute(Options(passes=(NAME,), roles=roles), source)
            reasons = [s.reason for r in result.reports for s in r.skipped if s.kernel == b.kernel]
            variant = pipeline_name(stage) if kind == "pipeline" else variant_name(stage, warps, moved)
            variant = async_name(stage, warps) if kind == "split-async" else variant
            variant = bulk_name(stage) if kind == "split-bulk" else variant
            if not (result.verified and result.changed):
                entry["splits"][variant] = {"refused": "; ".join(reasons + result.problems)}
                continue
            path = out / f"{name}.{variant}.ptx"
            path.write_text(result.text)
            _assemble(path, arch)
            after = next(k.after for k in result.kernels if k.name == b.kernel)
            entry["splits"][variant] = {"block": _block(path, b.kernel), "registers": after.registers}
            entry["splits"][variant]["loads_in_flight"] = loads_in_flight(result, b.kernel)
        manifest[name] = entry
        print(f"{name}: block {entry['block']} -> {json.dumps(entry['splits'])}; reference {entry['reference_block']}")
        print(batching_column(name, entry))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def loads_in_flight(result, kernel: str) -> str:
    """The consumers' loads in flight before -> after, as `optimize` verified the split (`?`: no loop found)."""
    found = [b for b in result.checks.batching if b.kernel == kernel]
    return " -> ".join("?" if n is None else str(n) for n in (found[0].before, found[0].after)) if found else "?"


def batching_column(name: str, entry: dict) -> str:
    """One row per split: the consumers' loads in flight per trip, input -> split (docs/warp-roles.md)."""
    splits = entry["splits"].items()
    return "\n".join(f"  {name} {v:10} loads in flight {s['loads_in_flight']}" for v, s in splits if "block" in s)


# ---------------------------------------------------------------- on the GPU


@dataclass
class Case:
    """One launch configuration: grid, parameter bytes, the output buffer, and the work it does (for rates)."""

    label: str
    grid: tuple[int, int, int]
    args: list[bytes]
    output: tuple[int, int]  # device pointer, bytes
    work: float
    unit: str  # "TFLOP/s" or "GB/s"


def _pointer(p: int) -> bytes:
    return np.uint64(p).tobytes()


def _i32(v: int) -> bytes:
    return np.int32(v).tobytes()


def _f32(v: float) -> bytes:
    return np.float32(v).tobytes()


def _buffer(gpu, data: np.ndarray, shift: int = 0) -> int:
    """`data` on the GPU at an allocation's start plus `shift` bytes (4: an input no longer 16-byte aligned)."""
    ptr = gpu.alloc(data.nbytes + 16) + shift
    gpu.upload(ptr, data)
    return ptr


def cases(gpu, name: str, small: bool = False, shift: int = 0) -> list[Case]:
    """Each benchmark's launches at its real use's occupancy (1-2 blocks per SM or fewer) and at full occupancy
    (`small`: sizes for a quick test; `shift`: every input array `shift` bytes past its allocation's start)."""
    rng = np.random.default_rng(0)
    sms = gpu.info.sm_count

    def randn(n: int) -> np.ndarray:
        return rng.standard_normal(n, dtype=np.float32)

    out = []
    if name.startswith("sgemm"):
        shapes = [(256, 256, 1024, "small")] if small else [(512, 512, 8192, "1 block/SM"), (2048, 2048, 2048, "full")]
        for m, n, k, what in shapes:
            a, b = _buffer(gpu, randn(m * k), shift), _buffer(gpu, randn(k * n), shift)
            c = gpu.alloc(m * n * 4)
            args = [_i32(m), _i32(n), _i32(k), _pointer(a), _pointer(b), _pointer(c)]
            out.append(
                Case(f"{m}x{n}x{k} {what}", (n // 64, m // 64, 1), args, (c, m * n * 4), 2 * m * n * k, "TFLOP/s")
            )
    elif name == "stencil":
        n = 1 << (20 if small else 26)
        x, y = _buffer(gpu, randn(n), shift), gpu.alloc(n * 4)
        for tiles, what in ((4, "small"),) if small else ((n // (1024 * sms), "1 block/SM"), (4, "full")):
            blocks = -(-n // (tiles * 1024))
            args = [_pointer(x), _pointer(y), _i32(n), _i32(tiles)]
            out.append(Case(f"n=2^{n.bit_length() - 1} {what}", (blocks, 1, 1), args, (y, n * 4), 8 * n, "GB/s"))
    elif name.startswith("attention"):
        nkeys = 512 if small else 4096
        k, v = _buffer(gpu, randn(nkeys * 32), shift), _buffer(gpu, randn(nkeys * 32), shift)
        for per_sm, what in ((1, "small"),) if small else ((2, "2 blocks/SM"), (16, "full")):
            blocks = sms * per_sm
            q, o = _buffer(gpu, randn(blocks * 128 * 32), shift), gpu.alloc(blocks * 128 * 32 * 4)
            args = [_pointer(q), _pointer(k), _pointer(v), _pointer(o), _i32(nkeys), _f32(0.125)]
            flops = 4.0 * 32 * nkeys * blocks * 128
            out.append(
                Case(
                    f"{blocks * 128} queries x {nkeys} keys {what}",
                    (blocks, 1, 1),
                    args,
                    (o, blocks * 128 * 128),
                    flops,
                    "TFLOP/s",
                )
            )
    return out


def load_variants(gpu, folder: Path, name: str, entry: dict) -> dict[str, tuple[object, int]]:
    """variant -> (function, block): the input, each split ptxtool made, the reference."""
    files = {"input": (f"{name}.input.ptx", entry["kernel"], entry["block"])}
    for variant, split in entry["splits"].items():
        if "block" in split:
            files[variant] = (f"{name}.{variant}.ptx", entry["kernel"], split["block"])
    files["reference"] = (f"{name}.reference.ptx", entry["reference_kernel"], entry["reference_block"])
    out = {}
    for variant, (file, kernel, block) in files.items():
        cubin = (folder / file).with_suffix(".cubin")
        module = gpu.load(cubin.read_bytes(), cubin.name, ptx=False)
        out[variant] = (gpu.function(module, kernel), block)
    return out


def identical(gpu, functions: dict, case: Case, launches: int = LAUNCHES) -> dict[str, int]:
    """Per variant, how many of `launches` outputs differ (as bits) from the input kernel's first output; a launch
    that does not finish within WATCHDOG_S raises KernelFault (ptxtool.toolchain.gpu: the watchdog)."""
    ptr, nbytes = case.output
    fn, block = functions["input"]
    gpu.fill_bytes(ptr, 0xFF, nbytes)
    gpu.launch(fn, case.grid, (block, 1, 1), case.args)
    expected = gpu.download(ptr, nbytes, timeout=WATCHDOG_S)
    differ = {}
    for variant, (fn, block) in functions.items():
        bad = 0
        for _ in range(launches):
            gpu.fill_bytes(ptr, 0xFF, nbytes)
            gpu.launch(fn, case.grid, (block, 1, 1), case.args)
            bad += not np.array_equal(gpu.download(ptr, nbytes, timeout=WATCHDOG_S), expected)
        differ[variant] = bad
    return differ


def timed(gpu, functions: dict, case: Case, reps: int = TIMED) -> dict[str, float]:
    """Median milliseconds per variant, the variants interleaved launch by launch (so drift hits all alike)."""
    samples: dict[str, list[float]] = {v: [] for v in functions}
    for fn, block in functions.values():  # warm up: JIT, caches, clocks
        gpu.launch(fn, case.grid, (block, 1, 1), case.args)
    gpu.synchronize(WATCHDOG_S * 4)
    for _ in range(reps):
        for variant, (fn, block) in functions.items():
            start, end = gpu.event(), gpu.event()
            gpu.record(start)
            gpu.launch(fn, case.grid, (block, 1, 1), case.args)
            gpu.record(end)
            gpu.synchronize(WATCHDOG_S)
            samples[variant].append(gpu.elapsed_ms(start, end))
    return {v: statistics.median(s) for v, s in samples.items()}


def measure(folder: Path, out: Path | None, only: frozenset[str] = frozenset()) -> bool:
    from ptxtool.toolchain.gpu import Gpu, KernelFault

    manifest = json.loads((folder / "manifest.json").read_text())
    rows, ok = [], True
    with Gpu() as gpu:
        print(f"{gpu.info.name}, {gpu.info.sm_count} SMs, driver CUDA {gpu.info.driver}")
        for name, entry in manifest.items():
            if only and name not in only:
                continue
            for split, info in entry["splits"].items():
                if "refused" in info:
                    print(f"  {name} {split}: refused: {info['refused']}")
            functions = load_variants(gpu, folder, name, entry)
            for case in cases(gpu, name):
                try:
                    differ = identical(gpu, functions, case)
                except KernelFault as fault:  # the context is unusable after a fault or a hang: stop here
                    print(f"{name} {case.label}: HANG or fault: {fault}")
                    return False
                times = timed(gpu, functions, case)
                ok &= not any(differ.values())
                rows.append({"kernel": name, "case": case.label, "ms": times, "differ": differ, "unit": case.unit})
                splits = {v: t for v, t in times.items() if v.startswith(("split", "async", "bulk", "pipe"))}
                best = min(splits, key=splits.get) if splits else None
                rate = 1e-9 if case.unit == "TFLOP/s" else 1e-6
                parts = [f"input {times['input']:.3f} ms ({case.work / times['input'] * rate:.2f} {case.unit})"]
                if best:
                    parts.append(f"ptxtool {best} {splits[best]:.3f} ms (x{times['input'] / splits[best]:.3f})")
                    parts.append("variants " + " ".join(f"{v}={t:.3f}" for v, t in splits.items()))
                parts.append(f"reference {times['reference']:.3f} ms (x{times['input'] / times['reference']:.3f})")
                if best:
                    parts.append(f"ptxtool/reference x{times['reference'] / splits[best]:.3f}")
                bits = "bit-identical" if not any(differ.values()) else f"DIFFER {differ}"
                print(f"{name:14} {case.label:34} " + " | ".join(parts) + f" | {bits} over {LAUNCHES} launches")
    if out:
        out.write_text(json.dumps(rows, indent=1))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prepare", "measure"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="measure: also write the rows here")
    parser.add_argument("--only", default="", help="measure: these kernels only (comma-separated names)")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.folder)
    else:
        sys.exit(0 if measure(args.folder, args.json, frozenset(filter(None, args.only.split(",")))) else 1)


if __name__ == "__main__":
    main()

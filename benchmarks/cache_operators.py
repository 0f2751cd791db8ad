"""What `ptxtool optimize`'s cache operators buy on a GPU, measured the way OPTIMIZATIONS.md says it must be.

Two steps, because the GPU machine need not have ptxas:

    python benchmarks/cache_operators.py prepare .bench       # here: optimized variants of comm/elementwise PTX
    python benchmarks/cache_operators.py verify .bench        # on the GPU: outputs bit-identical (ptxtool run)
    python benchmarks/cache_operators.py measure .bench       # on the GPU (torch + cuda.bindings): tables, JSON

`measure` prints (1) memory-bound kernels alone on the whole GPU, achieved bandwidth as a fraction of a measured
device-to-device copy (`torch` copy_, bytes read + written), original vs each variant; and (2) interference: comm's
`plain_copy` over 512 MiB on 20 blocks of 1024 threads on one stream while a second stream runs 20 `torch.sum` over an
L2-resident tensor (24 MiB, 40 MiB), timed with CUDA events against the same 20 sums alone; median of 31, the
variants interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

SOURCES = {"comm": "samples/comm.sm90.ptx", "elementwise": "samples/elementwise.sm90.ptx"}
# variant -> keyword arguments of the pass's Settings (None: the file as it is)
VARIANTS: dict[str, dict | None] = {
    "original": None,
    "default": {},
    "noalias": {"noalias": ("*",)},
    "noalias+L2evict": {"noalias": ("*",), "l2_evict_first": True},
    "noalias+NAstore": {"noalias": ("*",), "store_hint": "L1::no_allocate"},
}
MiB = 1 << 20


def prepare(out: Path) -> None:
    """Write every variant of every source (verified by ptxtool optimize) and what the SASS shows for each."""
    from ptxtool.passes.cache_operators import Policy, Settings
    from ptxtool.services.optimize import optimize
    from ptxtool.sources import read_source

    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict] = {}
    for name, path in SOURCES.items():
        source = read_source(path)
        for variant, kwargs in VARIANTS.items():
            if kwargs is None:
                result = optimize(source, settings=Settings())
                text, memory = source.text, {k.name: k.memory_before for k in result.kernels}
            else:
                args = dict(kwargs)
                if args.pop("l2_evict_first", False):
                    args["l2_evict_first"] = Policy(True)
                result = optimize(source, settings=Settings(**args), strict=True)  # a variant is all its rewrites
                if not result.verified:
                    sys.exit(f"{path} {variant}: verification failed: {result.problems}")
                text, memory = result.text, {k.name: k.memory_after for k in result.kernels}
            (out / f"{name}.{variant}.ptx").write_text(text)
            summary[f"{name}.{variant}"] = memory or {}
    (out / "sass.json").write_text(json.dumps(summary, indent=1))
    print(f"wrote {len(SOURCES) * len(VARIANTS)} variants to {out}")


# ---------------------------------------------------------------- on the GPU

# (file, launch spec) pairs compared bit for bit, original against every variant, with ptxtool's run harness
SPECS = (
    ("comm", "samples/plain_copy.toml"),
    ("comm", "samples/streaming_scale.toml"),
    ("elementwise", "samples/saxpy.toml"),
    ("elementwise", "samples/hadd2.toml"),
    ("elementwise", "samples/bf16_gelu.toml"),
    ("elementwise", "samples/fp8_quantize.toml"),
    ("elementwise", "samples/daxpy_grid_stride.toml"),
    ("elementwise", "samples/math_mix.toml"),
)


def verify(folder: Path) -> bool:
    """Original and optimized outputs on the same random inputs, compared as bits (`ptxtool run A B`)."""
    from ptxtool.services.launch import load_spec
    from ptxtool.services.run import run
    from ptxtool.sources import read_source

    ok = True
    for file, spec_path in SPECS:
        spec = load_spec(spec_path)
        for variant in list(VARIANTS)[1:]:
            pair = [read_source(str(SOURCES[file])), read_source(str(folder / f"{file}.{variant}.ptx"))]
            report = run(pair, spec)
            ok &= report.exit_code == 0
            print(f"  {spec.kernel or '?':20} {variant:16} {report.verdict} ({report.trials} trials)")
    return ok


class Driver:
    """Modules loaded into torch's context, and launches on torch streams (cuda.bindings.driver)."""

    def __init__(self) -> None:
        import torch
        from cuda.bindings import driver as cu

        torch.zeros(1, device="cuda")  # torch's primary context, current on this thread
        self.cu, self.torch = cu, torch
        self._check(cu.cuInit(0)[0], "cuInit")
        self.functions: dict[tuple[str, str], object] = {}

    def _check(self, status, what: str) -> None:
        if int(status) != 0:
            raise RuntimeError(f"{what}: {status}")

    def function(self, path: Path, kernel: str):
        key = (str(path), kernel)
        if key not in self.functions:
            status, module = self.cu.cuModuleLoadData(path.read_bytes() + b"\0")
            self._check(status, f"load {path}")
            status, fn = self.cu.cuModuleGetFunction(module, kernel.encode())
            self._check(status, f"{kernel} in {path}")
            self.functions[key] = fn
        return self.functions[key]

    def launch(self, fn, grid: int, block: int, args: list, stream) -> None:
        import numpy as np

        holders = [np.array([a], dtype=t) for a, t in args]
        pointers = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
        handle = self.cu.CUstream(stream.cuda_stream)
        self._check(
            self.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, handle, pointers.ctypes.data, 0)[0], "launch"
        )


def _median_ms(torch, work, reps: int, stream=None) -> float:
    stream = stream or torch.cuda.current_stream()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        work()
        end.record(stream)
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth(torch) -> float:
    """Device-to-device copy, bytes read + written per second (TB/s)."""
    src = torch.empty(2048 * MiB, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ms = _median_ms(torch, lambda: dst.copy_(src), 10)
    return 2 * src.numel() / ms / 1e9


def _kernels(torch, u64, i32, f32):
    """(file, kernel, grid, block, args, bytes moved, buffers to compare): memory-bound kernels over ~1-2 GiB."""
    n4 = 128 * MiB  # float4 elements: 2 GiB
    src = torch.randn(n4 * 4, device="cuda")
    dst = torch.empty_like(src)
    n = 256 * MiB  # 1 GiB per f32 array
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a, b, c = (torch.randn(n * 2, device="cuda").half() for _ in range(3))
    q = torch.empty(n // 4, dtype=torch.int32, device="cuda")  # fp8x4 outputs of n/4 float4 inputs
    p = lambda t: (t.data_ptr(), u64)  # noqa: E731
    return [
        ("comm", "plain_copy", 1056, 512, [p(src), p(dst), (n4, i32)], 2 * 16 * n4),
        ("comm", "streaming_scale", n4 // 256, 256, [p(src), p(dst), (1.5, f32), (n4, i32)], 2 * 16 * n4),
        ("elementwise", "saxpy", n // 256, 256, [(n, i32), (2.5, f32), p(x), p(y)], 3 * 4 * n),
        ("elementwise", "_Z5hadd2iPK7__half2S1_PS_", n // 256, 256, [(n, i32), p(a), p(b), p(c)], 3 * 4 * n),
        (
            "elementwise",
            "_Z12fp8_quantizeiPK6float4P15__nv_fp8x4_e4m3f",
            (n // 4) // 256,
            256,
            [(n // 4, i32), p(x), p(q), (0.5, f32)],
            20 * (n // 4),
        ),
    ]


def alone(drv: Driver, folder: Path, copy_tbs: float) -> list[dict]:
    """Each kernel on the whole GPU, each variant, interleaved; median of 15 launches."""
    import numpy as np

    torch = drv.torch
    stream = torch.cuda.current_stream()
    rows = []
    for file, kernel, grid, block, args, moved in _kernels(torch, np.uint64, np.int32, np.float32):
        fns = {v: drv.function(folder / f"{file}.{v}.ptx", kernel) for v in VARIANTS}
        samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for fn in fns.values():
            drv.launch(fn, grid, block, args, stream)
        for _ in range(15):
            for v, fn in fns.items():
                once = lambda fn=fn, grid=grid, block=block, args=args: drv.launch(fn, grid, block, args, stream)  # noqa: E731
                samples[v].append(_median_ms(torch, once, 1))
        for v in VARIANTS:
            ms = statistics.median(samples[v])
            tbs = moved / ms / 1e9
            rows.append({"kernel": kernel, "variant": v, "ms": ms, "tb_s": tbs, "of_copy": tbs / copy_tbs})
    return rows


def interference(drv: Driver, folder: Path, reps: int = 31) -> list[dict]:
    """plain_copy on 20 SMs beside 20 L2-resident reductions on another stream: slowdown of the reductions."""
    import numpy as np

    torch = drv.torch
    n4 = 32 * MiB  # 512 MiB of float4
    src = torch.randn(n4 * 4, device="cuda")
    dst = torch.empty_like(src)
    args = [(src.data_ptr(), np.uint64), (dst.data_ptr(), np.uint64), (n4, np.int32)]
    copy_stream, sum_stream = torch.cuda.Stream(), torch.cuda.Stream()
    rows = []
    for mib in (24, 40):
        t = torch.randn(mib * MiB // 4, device="cuda")

        def sums(t=t) -> float:
            """20 sums queued behind a short spin (so launch gaps count in neither case), timed on their stream."""
            s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(sum_stream):
                torch.cuda._sleep(40_000)  # also lets a copy launched just before occupy its 20 SMs first
                s0.record(sum_stream)
                for _ in range(20):
                    torch.sum(t)
                s1.record(sum_stream)
            torch.cuda.synchronize()
            return s0.elapsed_time(s1)

        sums()
        functions = {v: drv.function(folder / f"comm.{v}.ptx", "plain_copy") for v in VARIANTS}
        ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
        copies: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(reps):  # variants interleaved, so drift in clocks or L2 state hits them all alike
            for v, fn in functions.items():
                lone = sums()
                c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                c0.record(copy_stream)
                drv.launch(fn, 20, 1024, args, copy_stream)
                c1.record(copy_stream)
                ratios[v].append(sums() / lone)
                copies[v].append(2 * 16 * n4 / c0.elapsed_time(c1) / 1e9)
        for v in VARIANTS:
            rows.append(
                {
                    "reduction_mib": mib,
                    "variant": v,
                    "slowdown": statistics.median(ratios[v]),
                    "slowdown_p25_p75": statistics.quantiles(ratios[v], n=4)[::2],
                    "copy_tb_s": statistics.median(copies[v]),
                }
            )
    return rows


def measure(folder: Path, out: Path | None) -> None:
    drv = Driver()
    torch = drv.torch
    props = torch.cuda.get_device_properties(0)
    copy_tbs = copy_bandwidth(torch)
    print(f"{props.name}, {props.multi_processor_count} SMs; device-to-device copy {copy_tbs:.2f} TB/s (read+write)")
    rows = alone(drv, folder, copy_tbs)
    sass = json.loads((folder / "sass.json").read_text())
    print("\nalone on all SMs (median of 15): TB/s and fraction of the copy")
    for r in rows:
        variant = sass.get(
            f"{'comm' if 'copy' in r['kernel'] or 'scale' in r['kernel'] else 'elementwise'}.{r['variant']}"
        )
        loads = ", ".join(f"{k}x{n}" for k, n in (variant or {}).get(r["kernel"], {}).items())
        print(f"  {r['kernel'][:28]:28} {r['variant']:16} {r['tb_s']:5.2f} TB/s  {r['of_copy']:.3f}  {loads}")
    mix = interference(drv, folder)
    print("\ninterference: plain_copy on 20 blocks x 1024 beside 20 torch.sum on another stream (median of 31,")
    print("variants interleaved; [p25, p75] of the slowdown)")
    for r in mix:
        print(
            f"  {r['reduction_mib']:3} MiB  {r['variant']:16} reduction {r['slowdown']:.3f}x slower "
            f"[{r['slowdown_p25_p75'][0]:.3f}, {r['slowdown_p25_p75'][1]:.3f}], copy {r['copy_tb_s']:.3f} TB/s"
        )
    if out:
        data = {"device": props.name, "copy_tb_s": copy_tbs, "alone": rows, "interference": mix}
        out.write_text(json.dumps(data, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "verify", "measure"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="measure: also write the numbers here")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.folder)
    elif args.step == "verify":
        sys.exit(0 if verify(args.folder) else 1)
    else:
        measure(args.folder, args.json)


if __name__ == "__main__":
    main()

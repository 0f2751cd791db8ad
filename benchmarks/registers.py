"""What `ptxtool optimize --passes registers` changes, per kernel: ptxas's registers, spills and occupancy before and
after, and (on a GPU) the time of input and output measured side by side, outputs compared bit for bit.

Two steps, because the GPU machine need not have ptxas or nvcc:

    python benchmarks/registers.py prepare .bench-registers        # here: input and output PTX, specs, the table
    python benchmarks/registers.py gpu .bench-registers            # on the GPU (numpy + cuda.bindings only)
    python benchmarks/registers.py prepare .bench-registers --gpu  # both, where one machine has everything

Kernels: the corpus's pressure.cu (nvcc's launch bounds, on purpose), benchmarks/registers/streams.cu (sums over
16/32/48 streams, an unrolled 32-row reduction, a radius-16 stencil) and tests/data/registers/many_streams.cu
(pointers and offsets loaded from tables: rematerialization's case) compiled with the wheel's nvcc for sm_90, and
benchmarks/registers/triton (spill-prone Triton 3.6 kernels: attention and layernorm backward, a wide softmax), and,
with `--upstream DIR` (or PTXTOOL_UPSTREAM), real kernels of public projects with the launch bounds their authors
wrote (llm.c, ccminer), extracted into DIR by benchmarks/registers_upstream.py from clones at pinned commits (their
code is not in this repository).
`in loops` counts the SASS local-memory instructions made from PTX lines inside loops (spills in hot loops).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from registers_upstream import UPSTREAM  # noqa: E402 - beside this script, not a package

CORPUS = Path(os.environ.get("PTXTOOL_CORPUS", ROOT / "tests" / "corpus"))
STREAMS = ROOT / "benchmarks" / "registers" / "streams.cu"
MANY_STREAMS = ROOT / "tests" / "data" / "registers" / "many_streams.cu"  # pointers loaded from memory (remat)
TRITON = ROOT / "benchmarks" / "registers" / "triton"  # Triton 3.6 PTX for sm_90a (its README)
CORPUS_TRITON = ("matmul_w4_s3", "matmul_fp8", "flash_fwd")  # tests/corpus/triton36: kernels the pass was not built on
ARCH = "sm_90"
N = 1 << 22
HASHES = 1 << 20  # ccminer's kernels: one 512-bit hash per thread


def _buffers(names: list[str], count: int, dtype: str = "f32") -> list[dict]:
    return [{"name": name, "type": dtype, "count": count} for name in names]


def _sum_spec(streams: int, block: int) -> dict:
    inputs = _buffers([f"a{k}" for k in range(streams)], N)
    out = {"name": "out", "type": "f32", "count": N, "output": True}
    params = [*inputs, out, {"name": "n", "type": "s32", "value": N}]
    return {"grid": 132 * 2048 // block, "block": block, "params": params}


def _scratch() -> list[dict]:
    """Triton 3.6's two trailing pointers (global and profile scratch), unused by these kernels."""
    return [{"name": f"scratch{k}", "type": "u8", "count": 256, "init": "zeros"} for k in range(2)]


def _triton_specs() -> dict[str, dict]:
    """Launches of benchmarks/registers/triton's kernels as triton_kernels.py compiled them (meta.json)."""
    seq, rows, n = 8192, 1024, 16384
    attn = [
        *_buffers(["Q", "K", "V", "DO"], seq * 128, "f16"),
        *({"name": name, "type": "f32", "count": seq, "range": [0.0, 1.0]} for name in ("LSE", "DELTA")),
        *({"name": name, "type": "f16", "count": seq * 128, "output": True} for name in ("DK", "DV")),
        {"name": "seqlen", "type": "s32", "value": seq},
        {"name": "scale", "type": "f32", "value": 0.0883883},
        *_scratch(),
    ]
    layernorm = [
        {"name": "DX", "type": "f32", "count": rows * n, "output": True},
        *_buffers(["DY", "X"], rows * n),
        *_buffers(["W"], n),
        *_buffers(["MEAN"], rows),
        {"name": "RSTD", "type": "f32", "count": rows, "range": [0.5, 2.0]},
        {"name": "stride", "type": "s32", "value": n},
        {"name": "N", "type": "s32", "value": n},
        *_scratch(),
    ]
    softmax = [
        {"name": "OUT", "type": "f32", "count": rows * n, "output": True},
        *_buffers(["X"], rows * n),
        {"name": "stride", "type": "s32", "value": n},
        {"name": "N", "type": "s32", "value": n},
        *_scratch(),
    ]
    return {
        "attn_bwd_dkdv": {"grid": seq // 128, "block": 128, "shared_bytes": 115200, "params": attn},
        "attn_bwd_dkdv_w8": {
            "kernel": "attn_bwd_dkdv",
            "grid": seq // 128,
            "block": 256,
            "shared_bytes": 115200,
            "params": attn,
        },
        "layernorm_bwd_dx": {"grid": rows, "block": 128, "shared_bytes": 16, "params": layernorm},
        "layernorm_bwd_dx_w8": {
            "kernel": "layernorm_bwd_dx",
            "grid": rows,
            "block": 256,
            "shared_bytes": 32,
            "params": layernorm,
        },
        "softmax_wide": {"grid": rows, "block": 128, "shared_bytes": 16, "params": softmax},
        **_corpus_triton_specs(),
    }


def _corpus_triton_specs() -> dict[str, dict]:
    """Launches of tests/corpus/triton36's matmuls (C = A @ B, 4096 square) and flash-attention forward (meta.json)."""
    size, seq = 4096, 16384
    scalars = {"M": size, "N": size, "K": size, "sam": size, "sak": 1, "sbk": size, "sbn": 1, "scm": size, "scn": 1}

    def matmul(element: str, values: list, block: int) -> dict:
        params = [
            *({"name": n, "type": element, "count": size * size, "range": values} for n in "AB"),
            {"name": "C", "type": "f16", "count": size * size, "output": True},
            *({"name": n, "type": "s32", "value": v} for n, v in scalars.items()),
            *_scratch(),
        ]
        grid = [size // 128, size // 128, 1]
        return {"kernel": "matmul", "grid": grid, "block": block, "shared_bytes": 32768, "params": params}

    flash = [
        *({"name": n, "type": "f16", "count": seq * 64, "range": [-1.0, 1.0]} for n in "QKV"),
        {"name": "O", "type": "f16", "count": seq * 64, "output": True},
        {"name": "L", "type": "f32", "count": seq, "output": True},
        {"name": "seqlen", "type": "s32", "value": seq},
        {"name": "scale", "type": "f32", "value": 0.18033688},
        *_scratch(),
    ]
    return {
        "matmul_w4_s3": matmul("f16", [-1.0, 1.0], 128),
        "matmul_fp8": matmul("u8", [0, 63], 256),  # bytes 0..63: e4m3 values 0 to 1.875
        "flash_fwd": {"grid": seq // 128, "block": 128, "shared_bytes": 32768, "params": flash},
    }


def _hash_spec(block: int, nonces: bool = True, hash_type: str = "u64") -> dict:
    """ccminer's (threads, startNounce, g_hash[, g_nonceVector]): hashes updated in place, nonces 0..threads-1."""
    words = 8 if hash_type == "u64" else 16
    params = [
        {"name": "threads", "type": "u32", "value": HASHES},
        {"name": "startNounce", "type": "u32", "value": 0},
        {"name": "g_hash", "type": hash_type, "count": HASHES * words, "output": True, "init": "random"},
    ]
    if nonces:
        params.append({"name": "g_nonceVector", "type": "u32", "count": HASHES, "init": "iota", "start": 0, "step": 1})
    return {"grid": HASHES // block, "block": block, "params": params}


def _filtered_spec(block: int, hash_type: str, threads: bool) -> dict:
    """ccminer's phi filters: ([threads,] g_hash, d_filter, filter_val), every filter entry equal to the value."""
    words = 8 if hash_type == "u64" else 16
    params = [{"name": "threads", "type": "u32", "value": HASHES}] if threads else []
    params += [
        {"name": "g_hash", "type": hash_type, "count": HASHES * words, "output": True, "init": "random"},
        {"name": "d_filter", "type": "u32", "count": HASHES, "init": "zeros"},
        {"name": "filter_val", "type": "u32", "value": 0},
    ]
    return {"grid": HASHES // block, "block": block, "params": params}


def _upstream_specs() -> dict[str, dict]:
    """Launches of benchmarks/registers_upstream.py's kernels as their projects launch them (block sizes as written)."""
    rows, c = 64 * 1024, 768  # llm.c: B*T rows of GPT-2's C channels
    bf16 = [{"name": n, "type": "bf16", "count": rows * c, "range": [-1.0, 1.0]} for n in ("dout", "inp")]
    layernorm = [
        {"name": "dinp", "type": "bf16", "count": rows * c, "output": True, "init": "random", "range": [-1.0, 1.0]},
        *(  # summed by float atomics across blocks: their last bits vary from run to run
            {"name": n, "type": "bf16", "count": c, "output": True, "init": "zeros", "rtol": 1e-2, "atol": 1e-2}
            for n in ("dweight", "dbias")
        ),
        # the kernel's atomics scratch (partial sums, then its block counter): written, so compared, with a tolerance
        {
            "name": "scratch",
            "type": "f32",
            "count": 2 * c + 1,
            "output": True,
            "init": "zeros",
            "rtol": 1e-3,
            "atol": 1e-3,
        },
        *bf16,
        {"name": "weight", "type": "bf16", "count": c, "range": [-1.0, 1.0]},
        {"name": "mean", "type": "bf16", "count": rows, "range": [-0.5, 0.5]},
        {"name": "rstd", "type": "bf16", "count": rows, "range": [0.5, 2.0]},
        *({"name": n, "type": "s32", "value": v} for n, v in (("B", 64), ("T", 1024), ("C", c))),
    ]
    tribus = _hash_spec(256, nonces=False)
    tribus["params"] = [
        tribus["params"][0],
        tribus["params"][2],
        {"name": "resNonce", "type": "u32", "count": 2, "output": True, "init": "constant", "value": 0xFFFFFFFF},
        {"name": "target", "type": "u64", "value": 0},
    ]
    shared = 4 * (2 * c + 1)  # llm.c launches 1024 threads, two blocks per SM, (2C + 1) floats of shared memory
    return {
        "layernorm_backward_kernel8": {"grid": 264, "block": 1024, "shared_bytes": shared, "params": layernorm},
        "x11_echo512_gpu_hash_64": _hash_spec(128),
        "x11_shavite512_gpu_hash_64": _hash_spec(128),
        "x11_shavite512_gpu_hash_80": _hash_spec(128, nonces=False),
        "streebog_gpu_hash_64_sm5": _filtered_spec(256, "u64", threads=False),
        "quark_skein512_gpu_hash_64": _hash_spec(512),
        "quark_bmw512_gpu_hash_64": _hash_spec(32),
        "quark_bmw512_gpu_hash_80": _hash_spec(128, nonces=False),
        "x16_echo512_gpu_hash_80": _hash_spec(128, nonces=False),
        "x16_echo512_gpu_hash_64": _filtered_spec(128, "u32", threads=True),
        "tribus_echo512_gpu_final": tribus,
    }


def specs() -> dict[str, dict]:
    """Per kernel, a launch spec (as TOML data) sized for an H200: several waves, inputs beyond L2 where it matters."""
    nx, ny, nz = 520, 520, 72
    rows, cols = 264 * 256 * 32, 16
    sx, planes = 264 * 1024 + 32, 8
    return (
        _triton_specs()
        | _upstream_specs()
        | {
            "long_live_ranges": {
                "grid": 264,
                "block": 1024,
                "params": [
                    *_buffers(["x"], 24 * 270336, "f64"),
                    {"name": "y", "type": "f64", "count": 24 * 270336, "output": True},
                    {"name": "n", "type": "s32", "value": 270336},
                ],
            },
            "stencil_25pt": {
                "grid": [2, ny - 8, 1],
                "block": 256,
                "params": [
                    *_buffers(["in"], nx * ny * (nz + 1)),  # the kernel reads one plane past nz - 4
                    {"name": "out", "type": "f32", "count": nx * ny * nz, "output": True, "init": "zeros"},
                    *({"name": d, "type": "s32", "value": v} for d, v in (("nx", nx), ("ny", ny), ("nz", nz))),
                ],
            },
            "nbody_tile": {
                "grid": 64,
                "block": 128,
                "params": [
                    {"name": "pos", "type": "f32", "count": 4 * 32768, "range": [0.5, 1.5]},
                    {"name": "acc", "type": "f32", "count": 4 * 32768, "output": True},
                    {"name": "n", "type": "s32", "value": 32768},
                    {"name": "eps2", "type": "f32", "value": 0.01},
                ],
            },
            "sum_offsets": {  # many_streams.cu's sum_table reads a table of pointers, which a spec cannot express
                "grid": 1056,
                "block": 256,
                "params": [
                    *_buffers(["in"], 49 * (1 << 20)),
                    {"name": "offsets", "type": "s32", "count": 48, "init": "iota", "start": 0, "step": 1 << 20},
                    {"name": "out", "type": "f32", "count": 1 << 20, "output": True},
                    {"name": "n", "type": "s32", "value": 1 << 20},
                ],
            },
            "sum16": _sum_spec(16, 256),
            "sum32": _sum_spec(32, 256),
            "sum48": _sum_spec(48, 512),
            "row_reduce32": {
                "grid": 264,
                "block": 256,
                "params": [
                    *_buffers(["m"], rows * cols),
                    {"name": "out", "type": "f32", "count": rows, "output": True},
                    {"name": "rows", "type": "s32", "value": rows},
                    {"name": "cols", "type": "s32", "value": cols},
                ],
            },
            "stencil_r16": {
                "grid": 264,
                "block": 1024,
                "params": [
                    *_buffers(["in"], sx * planes),
                    *_buffers(["coef"], 33),
                    {"name": "out", "type": "f32", "count": sx * planes, "output": True, "init": "zeros"},
                    {"name": "nx", "type": "s32", "value": sx},
                    {"name": "planes", "type": "s32", "value": planes},
                ],
            },
        }
    )


def entry(source: str, kernel: str) -> str:
    """A benchmark's name: the kernel's in a file of several, the file's for Triton's (one kernel each)."""
    return kernel if source in ("pressure", "streams", "many_streams", *(u.name for u in UPSTREAM)) else source


def _toml(kernel: str, spec: dict) -> str:
    def value(v) -> str:
        return json.dumps(v)

    lines = [f'kernel = "{spec.get("kernel", kernel)}"', f"grid = {value(spec['grid'])}"]
    lines += [f"block = {value(spec['block'])}"]
    lines += [f"shared_bytes = {spec['shared_bytes']}"] if "shared_bytes" in spec else []
    lines.append("")
    for p in spec["params"]:
        lines += ["[[param]]", *(f"{k} = {value(v)}" for k, v in p.items()), ""]
    return "\n".join(lines)


def _occupancy(n: dict) -> str:
    return "?" if n["occupancy"] is None else f"{n['occupancy']:.0%} ({n['limited_by']})"


def upstream_sources(folder: Path | None) -> dict[str, Path]:
    """The extracted upstream sources found in `folder` (PTXTOOL_UPSTREAM when None), by name."""
    folder = folder or (Path(os.environ["PTXTOOL_UPSTREAM"]) if os.environ.get("PTXTOOL_UPSTREAM") else None)
    if folder is None:
        return {}
    found = {u.name: folder / f"{u.name}.cu" for u in UPSTREAM if (folder / f"{u.name}.cu").is_file()}
    missing = [u.name for u in UPSTREAM if u.name not in found]
    if missing:
        print(f"{folder}: not extracted (benchmarks/registers_upstream.py): {', '.join(missing)}")
    return found


def prepare(out: Path, upstream: Path | None = None) -> list[dict]:
    """Write each source's input and the register pass's output (verified by ptxtool optimize), a spec per kernel,
    and print the ptxas table; returns its rows."""
    from ptxtool.services.launch import check_signature, load_spec
    from ptxtool.services.optimize import optimize
    from ptxtool.sources import Source
    from ptxtool.syntax import parse
    from ptxtool.toolchain.compile import cuda_to_ptx

    out.mkdir(parents=True, exist_ok=True)
    sources = {
        "pressure": (CORPUS / "ptx" / "pressure.sm90.ptx").read_text(),
        "streams": cuda_to_ptx(str(STREAMS), ARCH),
        "many_streams": cuda_to_ptx(str(MANY_STREAMS), ARCH),
        **{p.name.removesuffix(".sm90.ptx"): p.read_text() for p in sorted(TRITON.glob("*.sm90.ptx"))},
        **{name: (CORPUS / "triton36" / f"{name}.sm90a.ptx").read_text() for name in CORPUS_TRITON},
        **{name: cuda_to_ptx(str(path), ARCH) for name, path in upstream_sources(upstream).items()},
    }
    rows = []
    for name, text in sources.items():
        result = optimize(Source(f"{name}.ptx", text), passes=("registers",))
        if not result.verified:
            sys.exit(f"{name}: verification failed: {result.problems}")
        (out / f"{name}.input.ptx").write_text(text)
        (out / f"{name}.registers.ptx").write_text(result.text)
        report = next(r for r in result.reports if r.name == "registers")
        for k in report.kernels:
            rows.append({"source": name} | k.to_data())
    kernels = {entry(s, f.name): f for s, text in sources.items() for f in parse(text).kernels}
    for name, spec in specs().items():
        if name not in kernels:
            continue  # an upstream kernel not extracted
        path = out / f"{name}.toml"
        path.write_text(_toml(name, spec))
        check_signature(kernels[name], load_spec(str(path)), name)  # a wrong spec fails here, not on the GPU
    (out / "registers.json").write_text(json.dumps(rows, indent=1))
    print(
        f"{'kernel':20} {'registers':>10} {'spill B':>11} {'in loops':>10} {'occupancy':>32}"
        "  change (ptxas numbers, not timed)"
    )
    for r in rows:
        a, b = r["before"], r["after"]
        change = "; ".join(r["changes"]) or r["note"]
        loud = " [AUTHOR'S BOUNDS CHANGED]" if r["author_bounds_changed"] else ""
        print(
            f"{entry(r['source'], r['kernel']):20} {a['registers']:>4} -> {b['registers']:<4} "
            f"{a['spill_bytes']:>4} -> {b['spill_bytes']:<4} "
            f"{r['loop_spills']['before']['instructions']:>3} -> {r['loop_spills']['after']['instructions']:<3} "
            f"{_occupancy(a):>15} -> {_occupancy(b):<15}  {change}{loud}"
        )
    spilling = [r for r in rows if r["before"]["spill_bytes"]]
    hot = [r for r in spilling if r["loop_spills"]["before"]["instructions"]]
    clean = [r for r in hot if not r["loop_spills"]["after"]["instructions"]]
    print(
        f"spilling kernels: {len(spilling)}, {len(hot)} with spills in loops; no spill left in a loop in "
        f"{len(clean)} of {len(hot)} ({', '.join(entry(r['source'], r['kernel']) for r in clean)})"
    )
    return rows


def gpu(folder: Path, launches: int = 200, ptxas: bool = False) -> list[dict]:
    """Per kernel: input and output on identical inputs (bit for bit), then timed side by side, interleaved;
    assembled by the driver's JIT, or with `ptxas` by the wheel's ptxas (whose numbers the table shows)."""
    from ptxtool.passes.registers import speed_of
    from ptxtool.services.bench import bench
    from ptxtool.services.launch import load_spec
    from ptxtool.services.run import run
    from ptxtool.sources import Source

    rows = json.loads((folder / "registers.json").read_text())
    results = []
    print(f"{'kernel':20} {'input us':>10} {'output us':>10} {'speedup':>8} {'95% interval':>14}  outputs")
    for r in rows:
        spec_path = folder / f"{entry(r['source'], r['kernel'])}.toml"
        if not spec_path.is_file():
            print(f"{entry(r['source'], r['kernel']):20} no launch spec: ptxas numbers only")
            continue
        texts = [(folder / f"{r['source']}.{v}.ptx").read_text() for v in ("input", "registers")]
        sources = [Source(f"{r['source']}.{v}.ptx", t) for v, t in zip(("input", "registers"), texts, strict=True)]
        spec = load_spec(str(spec_path))
        verdict = run(sources, spec, r["kernel"], ptxas=ptxas).verdict
        timing = bench(sources, spec, r["kernel"], launches=launches, ptxas=ptxas).timings
        speed = speed_of(timing[0].samples, timing[1].samples, verdict == "identical")
        same = " (same PTX)" if texts[0] == texts[1] or not r["changes"] else ""
        name = entry(r["source"], r["kernel"])
        print(
            f"{name:20} {timing[0].median_us:>10.1f} {timing[1].median_us:>10.1f} {speed.speedup:>7.2f}x "
            f"{speed.low:>6.2f}-{speed.high:<6.2f}  {verdict}{same}"
        )
        results.append({"kernel": name, "verdict": verdict, **speed.to_data(), "input_us": timing[0].median_us})
    (folder / "registers_gpu.json").write_text(json.dumps(results, indent=1))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "gpu"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--gpu", action="store_true", help="after prepare, also time input vs output on the GPU")
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--ptxas", action="store_true", help="assemble with the wheel's ptxas, not the driver's JIT")
    parser.add_argument("--upstream", type=Path, help="extracted upstream kernels (benchmarks/registers_upstream.py)")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.folder, args.upstream)
    if args.step == "gpu" or args.gpu:
        gpu(args.folder, args.launches, args.ptxas)


if __name__ == "__main__":
    main()

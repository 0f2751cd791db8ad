"""Rematerialization on the GPU: nvcc's many-stream loops and their rematerialized forms give bit-identical
outputs (recomputing integer arithmetic and reloading read-only memory is exact). Skipped where no CUDA driver is
found (`pytest -m gpu` on a machine with an NVIDIA GPU runs them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_pass_registers_remat import MANY_STREAMS, remat_module

from ptxtool.services.launch import spec_from_data
from ptxtool.services.run import run
from ptxtool.sources import Source
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.gpu import Gpu, probe

REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]

N = 1 << 20
STREAMS = 32
OFFSETS = 48
SPREAD = 4096  # offsets lie in [0, SPREAD)


@pytest.mark.usefixtures("ptxas")
def test_sum_offsets_outputs_identical() -> None:
    """Through `ptxtool run`'s machinery: both files on the same random inputs, outputs compared as bits."""
    after, done = remat_module(MANY_STREAMS.read_text(), pure=False)
    assert done["sum_offsets"]
    spec = spec_from_data(
        {
            "kernel": "sum_offsets",
            "grid": 264,
            "block": 256,
            "trials": 3,
            "param": [
                {"name": "in", "type": "f32", "count": N + SPREAD, "init": "random"},
                {"name": "offsets", "type": "s32", "count": OFFSETS, "init": "random", "range": [0, SPREAD - 1]},
                {"name": "out", "type": "f32", "count": N, "output": True},
                {"name": "n", "type": "s32", "value": N},
            ],
        },
        "sum_offsets.toml",
        Path("."),
    )
    sources = [Source(str(MANY_STREAMS), MANY_STREAMS.read_text()), Source("rematerialized.ptx", after)]
    report = run(sources, spec, ptxas=True)
    assert report.verdict == "identical", (report.differences, report.fault)


@pytest.mark.usefixtures("ptxas")
def test_sum_table_outputs_identical() -> None:
    """A table of 32 device pointers (the spec format has no pointer tables, so the launch is made here)."""
    after, done = remat_module(MANY_STREAMS.read_text(), pure=False)
    assert len(done["sum_table"]) >= STREAMS
    rng = np.random.default_rng(15)
    with Gpu() as gpu:
        inputs = [gpu.alloc(4 * N) for _ in range(STREAMS)]
        for ptr in inputs:
            gpu.upload(ptr, rng.uniform(-4, 4, N).astype(np.float32))
        table = gpu.alloc(8 * STREAMS)
        gpu.upload(table, np.array(inputs, dtype=np.uint64))
        out = gpu.alloc(4 * N)
        results = []
        for name, text in (("original.ptx", MANY_STREAMS.read_text()), ("rematerialized.ptx", after)):
            cubin = compile_ptx(text, name, gpu.info.arch.rstrip("a")).cubin  # the wheel's ptxas, as `run --ptxas`
            function = gpu.function(gpu.load(cubin, name, ptx=False), "sum_table")
            gpu.fill_bytes(out, 0x5A, 4 * N)
            args = [table.to_bytes(8, "little"), out.to_bytes(8, "little"), N.to_bytes(4, "little", signed=True)]
            gpu.launch(function, (264, 1, 1), (256, 1, 1), args)
            results.append(gpu.download(out, 4 * N))
    assert np.array_equal(results[0], results[1])
    assert not np.all(results[0] == 0x5A)  # the kernel wrote its output


def _benchmark_spec(name: str):
    """benchmarks/registers.py's launch of one Triton kernel, as a spec."""
    import importlib.util

    from conftest import ROOT

    loader = importlib.util.spec_from_file_location("registers_benchmark", ROOT / "benchmarks" / "registers.py")
    benchmark = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(benchmark)
    data = dict(benchmark.specs()[name])
    data["kernel"], data["param"] = data.get("kernel", name), data.pop("params")
    return spec_from_data(data, f"{name}.toml", Path("."))


@pytest.mark.usefixtures("ptxas")
def test_triton_attention_backward_w8_outputs_identical() -> None:
    """attn_bwd_dkdv at 8 warps as the register pass writes it (~140 descriptors, addresses and epilogue pointers
    recomputed at their reads) computes dK and dV bit for bit as Triton's PTX does, both assembled by ptxas."""
    from conftest import ROOT

    from ptxtool.services.optimize import optimize

    path = ROOT / "benchmarks" / "registers" / "triton" / "attn_bwd_dkdv_w8.sm90.ptx"
    result = optimize(Source(str(path), path.read_text()), passes=("registers",))
    assert result.verified and result.text != path.read_text()
    sources = [Source(str(path), path.read_text()), Source("registers.ptx", result.text)]
    report = run(sources, _benchmark_spec("attn_bwd_dkdv_w8"), ptxas=True)
    assert report.verdict == "identical", (report.differences, report.fault)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("seed", range(6))
def test_random_integer_kernels_outputs_identical(seed: int) -> None:
    """test_pass_registers_remat's random kernels (values made before a loop, read in it, some written again in
    it, all stored after it) and their rematerialized forms, pure arithmetic included, agree bit for bit."""
    from test_pass_registers_remat import FUZZ_VALUES, fuzz_kernel

    text = fuzz_kernel(seed)
    after, done = remat_module(text, pure=True)
    assert done["fuzz"]
    grid, block = 32, 128
    spec = spec_from_data(
        {
            "kernel": "fuzz",
            "grid": grid,
            "block": block,
            "param": [
                {"name": "out", "type": "u32", "count": grid * block * (FUZZ_VALUES + 1), "output": True},
                {"name": "n", "type": "u32", "value": 5 + seed},
                {"name": "s", "type": "u32", "value": 0x9E3779B9 >> seed},
            ],
        },
        "fuzz.toml",
        Path("."),
    )
    report = run([Source("fuzz.ptx", text), Source("rematerialized.ptx", after)], spec, ptxas=True)
    assert report.verdict == "identical", (report.differences, report.fault)


def _matmul_spec(path: Path, size: int, element: str, values: list[float]):
    """tests/corpus/triton36's matmul (A[M, K] @ B[K, N] -> C, fp16 out; Triton's two scratch pointers last)."""
    block = 256 if ".reqntid 256" in path.read_text() else 128
    scalars = {"M": size, "N": size, "K": size, "sam": size, "sak": 1, "sbk": size, "sbn": 1, "scm": size, "scn": 1}
    return spec_from_data(
        {
            "kernel": "matmul",
            "grid": [size // 128, size // 128, 1],
            "block": block,
            "shared_bytes": 32768,  # meta.json's `shared` (Triton's launch size)
            "param": [
                *({"name": n, "type": element, "count": size * size, "range": values} for n in "AB"),
                {"name": "C", "type": "f16", "count": size * size, "output": True},
                *({"name": n, "type": "s32", "value": v} for n, v in scalars.items()),
                *({"name": f"scratch{k}", "type": "u8", "count": 256, "init": "zeros"} for k in range(2)),
            ],
        },
        f"{path.stem}.toml",
        Path("."),
    )


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(
    ("name", "element", "values"), [("matmul_w4_s3", "f16", [-1.0, 1.0]), ("matmul_fp8", "u8", [0, 63])]
)
def test_triton_corpus_matmuls_outputs_identical(name: str, element: str, values: list[float]) -> None:
    """The register pass's output of Triton matmuls it was not built on (288 -> 0 and 12 -> 0 spill bytes by
    rematerialization) computes C bit for bit (fp8 inputs: bytes 0..63, e4m3 values 0 to 1.875)."""
    from conftest import CORPUS

    path = CORPUS / "triton36" / f"{name}.sm90a.ptx"
    text, done = remat_module(path.read_text())  # the rewrite itself (timing decides whether optimize keeps it)
    assert done["matmul"]
    sources = [Source(str(path), path.read_text()), Source("registers.ptx", text)]
    report = run(sources, _matmul_spec(path, 512, element, values), ptxas=True)
    assert report.verdict == "identical", (report.differences, report.fault)


@pytest.mark.usefixtures("ptxas")
def test_triton_corpus_flash_attention_outputs_identical() -> None:
    """tests/corpus/triton36's flash_fwd, which the register pass takes from 232 to 177 registers by
    rematerialization: O and L bit for bit."""
    from conftest import CORPUS

    path = CORPUS / "triton36" / "flash_fwd.sm90a.ptx"
    text, done = remat_module(path.read_text())  # the rewrite itself (timing decides whether optimize keeps it)
    assert done["flash_fwd"]
    seq = 2048
    spec = spec_from_data(
        {
            "kernel": "flash_fwd",
            "grid": seq // 128,
            "block": 128,
            "shared_bytes": 32768,  # meta.json's `shared`
            "param": [
                *({"name": n, "type": "f16", "count": seq * 64, "range": [-1.0, 1.0]} for n in "QKV"),
                {"name": "O", "type": "f16", "count": seq * 64, "output": True},
                {"name": "L", "type": "f32", "count": seq, "output": True},
                {"name": "seqlen", "type": "s32", "value": seq},
                {"name": "scale", "type": "f32", "value": 0.18033688},
                *({"name": f"scratch{k}", "type": "u8", "count": 256, "init": "zeros"} for k in range(2)),
            ],
        },
        "flash_fwd.toml",
        Path("."),
    )
    report = run([Source(str(path), path.read_text()), Source("registers.ptx", text)], spec, ptxas=True)
    assert report.verdict == "identical", (report.differences, report.fault)

"""`ptxtool optimize` on the GPU: original and optimized kernels give the same outputs, with `--verify-gpu` on the
samples and, for the issue's shape 2, while a second stream writes the data the kernel reads after its acquire.
Skipped where no CUDA driver is found (`pytest -m gpu` on a machine with an NVIDIA GPU runs them)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.passes.cache_operators import Settings
from ptxtool.services.optimize import optimize
from ptxtool.sources import read_source
from ptxtool.toolchain.gpu import Gpu, probe

REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
DATA = Path(__file__).parent / "data" / "optimize"

CASES = [
    ("comm.sm90.ptx", "plain_copy.toml"),
    ("comm.sm90.ptx", "streaming_scale.toml"),
    ("elementwise.sm90.ptx", "hadd2.toml"),
    ("elementwise.sm90.ptx", "fp8_quantize.toml"),
]


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("ptx", "spec"), CASES, ids=[s.removesuffix(".toml") for _, s in CASES])
def test_optimized_outputs_identical(ptx: str, spec: str, tmp_path: Path) -> None:
    out = tmp_path / ptx
    args = ["optimize", str(SAMPLES / ptx), "--noalias", "*", "--l2-evict-first", "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--verify-gpu", str(SAMPLES / spec)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "GPU: outputs identical" in result.stderr and out.is_file()


@pytest.mark.usefixtures("ptxas")
def test_stdin_with_verify_gpu() -> None:
    """`ptxtool optimize - --verify-gpu spec < k.ptx`: the input is read once, from stdin."""
    text = (SAMPLES / "comm.sm90.ptx").read_text()
    args = ["optimize", "-", "--verify-gpu", str(SAMPLES / "plain_copy.toml")]
    result = CliRunner().invoke(main, args, input=text, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "GPU: outputs identical" in result.stderr


# ---------------------------------------------------------------- shape 2: a second stream writes the data

N = 1 << 16  # 256 blocks: spinning blocks leave the SMs room for the writer stream's copy
BLOCK = 256
OLD, NEW = 0.0, 1.5
TRIALS = 3


def _consume(gpu: Gpu, text: str, name: str) -> np.ndarray:
    """Launch `consumer(data)` with data = OLD and g_ready = 0, then from a second stream copy NEW into data and
    set g_ready (a stream write after the copy, fenced by the driver); g_out afterwards. The kernel's spin is
    bounded (g_timed_out), and every wait here has a timeout: nothing can hang."""
    from cuda.bindings import driver as cu

    def call(result: tuple, what: str) -> tuple:
        assert result[0] == cu.CUresult.CUDA_SUCCESS, f"{what}: {result[0]}"
        return result[1:]

    module = gpu.load(text.encode(), name, ptx=True)
    function = gpu.function(module, "_Z8consumerPKf")
    ready = int(call(cu.cuModuleGetGlobal(module.handle, b"g_ready"), "g_ready")[0])
    timed_out = int(call(cu.cuModuleGetGlobal(module.handle, b"g_timed_out"), "g_timed_out")[0])
    out = int(call(cu.cuModuleGetGlobal(module.handle, b"g_out"), "g_out")[0])
    data, fresh = gpu.alloc(4 * N), gpu.alloc(4 * N)
    gpu.upload(data, np.full(N, OLD, dtype=np.float32))
    gpu.upload(fresh, np.full(N, NEW, dtype=np.float32))
    gpu.upload(out, np.full(N, -1.0, dtype=np.float32))
    gpu.upload(ready, np.zeros(1, dtype=np.int32))
    gpu.upload(timed_out, np.zeros(1, dtype=np.int32))
    gpu.synchronize(30)
    writer = call(cu.cuStreamCreate(int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")[0]
    try:
        gpu.launch(function, (N // BLOCK, 1, 1), (BLOCK, 1, 1), [data.to_bytes(8, "little")])
        time.sleep(0.05)  # let the first blocks reach their wait (the outcome must not depend on it)
        call(cu.cuMemcpyDtoDAsync(data, fresh, 4 * N, writer), "cuMemcpyDtoDAsync")
        write = int(cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT)  # fenced after the copy
        call(cu.cuStreamWriteValue32(writer, ready, 1, write), "cuStreamWriteValue32")
        gpu.synchronize(60)
        call(cu.cuStreamSynchronize(writer), "cuStreamSynchronize")
    finally:
        cu.cuStreamDestroy(writer)
    assert gpu.download(timed_out, 4).view(np.int32)[0] == 0, "the flag never arrived: the writer stream did not run"
    return gpu.download(out, 4 * N).view(np.float32)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("settings", [Settings(), Settings(noalias=("*",))], ids=["default", "noalias"])
def test_second_stream_writes_after_launch(settings: Settings) -> None:
    """The issue's shape 2 (acquire in a non-inlined callee, data written by another stream after launch): the
    optimized kernel reads what the original reads, the new data, in every trial."""
    source = read_source(str(DATA / "second_stream.sm90.ptx"))
    result = optimize(source, settings=settings)
    assert result.exit_code == 0, result.problems
    with Gpu() as gpu:
        for trial in range(TRIALS):
            original = _consume(gpu, source.text, "original.ptx")
            assert np.all(original == NEW), f"trial {trial}: the original itself read stale data (test setup)"
            optimized = _consume(gpu, result.text, "optimized.ptx")
            stale = int(np.count_nonzero(optimized != NEW))
            assert stale == 0, f"trial {trial}: {stale} of {N} values stale in the optimized kernel"

"""The sm_80 splits on the GPU through the driver's PTX JIT: a GPU of sm_90 cannot run an sm_80 cubin, but its driver
JIT-compiles `.target sm_80` PTX (cuModuleLoadData on the text). Each benchmark kernel (benchmarks/warp_roles), compiled
by the wheel's nvcc for sm_80 and written at an older PTX ISA (7.1 for the ld+st split: `.shared` mbarriers; 7.8 for
the split with cp.async producers: `.shared::cta`), is split by `optimize` (ptxas for sm_80 accepts it, its sm_80
SASS shows the ring), then the input's PTX and the splits' are JIT-compiled by the driver and compared bit for bit
over 100 launches each with the watchdog. Skipped where no CUDA driver is found or the wheel's nvcc cannot compile."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ptxtool.errors import EnvironmentProblem
from ptxtool.toolchain.gpu import Gpu, probe

REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import warp_roles as bench  # noqa: E402

PTX_ISA = {"split": "7.1", "split-async": "7.8"}  # the oldest each form assembles at; the driver JITs both
COPIED = ("sgemm_unrolled", "attention_unrolled")  # the inputs whose staging the producers can copy with cp.async


def _sm80_input(name: str, ptx: str) -> str:
    """The benchmark's input kernel as nvcc writes it for sm_80, at PTX ISA `ptx` (ptxas checks it holds nothing
    newer; the driver may be older than the wheel's PTX ISA)."""
    from ptxtool.toolchain.compile import compile_ptx, cuda_to_ptx

    text = cuda_to_ptx(str(bench.HERE / bench.BENCHES[name].source), "sm_80")
    text = re.sub(r"^\.version \d+\.\d+$", f".version {ptx}", text, count=1, flags=re.M)
    compile_ptx(text, f"{name}.sm80.ptx", "sm_80")
    return text


def _block(text: str, kernel: str) -> int:
    from ptxtool.analysis.launch_bounds import block_bounds
    from ptxtool.syntax import parse

    return block_bounds(next(f for f in parse(text).kernels if f.name == kernel)).dims[0]


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("variant", sorted(PTX_ISA))
@pytest.mark.parametrize("name", sorted(bench.BENCHES))
def test_sm80_split_jitted_bit_identical(name: str, variant: str) -> None:
    from ptxtool.passes.warp_roles import NAME, RoleSettings
    from ptxtool.services.optimize import Options, execute
    from ptxtool.sources import Source

    kernel = bench.BENCHES[name].kernel
    try:
        text = _sm80_input(name, PTX_ISA[variant])
    except EnvironmentProblem as problem:
        pytest.skip(f"cannot compile the benchmark source: {problem}")
    splits: dict[str, str] = {}
    for stages in (2, 3):
        roles = RoleSettings(variant=variant, stages=stages)
        result = execute(Options(passes=(NAME,), roles=roles), Source(f"{name}.sm80.ptx", text))
        reasons = [s.reason for r in result.reports for s in r.skipped]
        if variant == "split-async" and name not in COPIED:
            assert not result.changed and all(why.startswith("cp.async producers: ") for why in reasons), reasons
            pytest.skip(f"{name}: the producers' staging does not convert: {reasons}")
        if name.startswith("attention") and stages == 3:  # S = 3 does not fit attention's 48 KB of static shared
            assert not result.changed and reasons and "does not fit 3 stages" in reasons[0], reasons
            continue
        assert result.verified and result.changed, (reasons, result.problems)
        assert "mbarrier.test_wait.parity" in result.text and "try_wait" not in result.text
        assert ("::cta" in result.text) == (variant == "split-async")
        splits[f"{variant}{stages}"] = result.text
    with Gpu() as gpu:
        assert int(re.sub(r"\D", "", gpu.info.arch) or 0) >= 80, gpu.info.arch
        functions = {}
        for label, code in {"input": text, **splits}.items():
            module = gpu.load(code.encode(), f"{name}.{label}.ptx", ptx=True)  # the driver's JIT, for this GPU
            functions[label] = (gpu.function(module, kernel), _block(code, kernel))
        assert all(block == functions["input"][1] * 2 for _, block in list(functions.values())[1:])
        for case in bench.cases(gpu, name, small=True):
            differ = bench.identical(gpu, functions, case, launches=100)
            assert differ == dict.fromkeys(functions, 0), (case.label, differ)

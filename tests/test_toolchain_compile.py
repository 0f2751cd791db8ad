"""ptxas -v numbers, warnings, rejected PTX and the cache, checked against ptxas text and cuobjdump read here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ptxtool.errors import EnvironmentProblem, InputError
from ptxtool.toolchain.compile import compile_ptx, target_arch
from ptxtool.toolchain.discover import find_tool

SAMPLES = Path(__file__).parent.parent / "samples"

# file, arch: kernels that spill, use shared memory and barriers, tensor cores, and Hopper wgmma/setmaxnreg
CASES = [
    ("pressure.sm80.ptx", "sm_80"),
    ("gemm_smem.sm80.ptx", "sm_80"),
    ("tensorcore.sm80.ptx", "sm_80"),
    ("hopper.sm90a.ptx", "sm_90a"),
    ("control.sm80.ptx", "sm_80"),
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))


def _ptxas_v(path: Path, arch: str) -> dict[str, dict[str, int]]:
    """The wheel ptxas's -v numbers per entry function, read with regexes of this test's own."""
    log = subprocess.run(
        [find_tool("ptxas").path, "-v", f"-arch={arch}", str(path), "-o", "/dev/null"], capture_output=True, text=True
    ).stderr
    numbers: dict[str, dict[str, int]] = {}
    for block in re.split(r"ptxas info\s*: Compiling entry function ", log)[1:]:
        name = block.split("'")[1]

        def get(pattern: str, block: str = block) -> int:
            return int((re.search(pattern, block) or [0, 0])[1])

        numbers[name] = {
            "registers": get(r"Used (\d+) registers"),
            "stack_frame": get(r"(\d+) bytes stack frame"),
            "spill_stores": get(r"(\d+) bytes spill stores"),
            "spill_loads": get(r"(\d+) bytes spill loads"),
            "shared": get(r"(\d+) bytes smem"),
            "barriers": get(r"used (\d+) barriers"),
        }
    return numbers


def _res_usage(cubin: bytes, tmp_path: Path) -> dict[str, dict[str, int]]:
    """cuobjdump -res-usage on the cubin: REG, STACK, SHARED, LOCAL per function."""
    (tmp_path / "k.cubin").write_bytes(cubin)
    text = subprocess.run(
        [find_tool("cuobjdump").path, "-res-usage", str(tmp_path / "k.cubin")], capture_output=True, text=True
    ).stdout
    return {
        m.group(1): {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", m.group(2))}
        for m in re.finditer(r"Function (\S+):\n(.*)", text)
    }


@pytest.mark.parametrize(("name", "arch"), CASES, ids=[c[0] for c in CASES])
def test_resources_match_ptxas_and_cuobjdump(name, arch, tmp_path):
    path = SAMPLES / name
    compiled = compile_ptx(path.read_text(), str(path), arch)
    expected = _ptxas_v(path, arch)
    usage = _res_usage(compiled.cubin, tmp_path)
    kernels = {n: f for n, f in compiled.functions.items() if f.is_kernel}
    assert set(kernels) == set(expected) and kernels
    for kernel, numbers in expected.items():
        got = kernels[kernel]
        assert {k: getattr(got, k) for k in numbers} == numbers, kernel
        # from sm_90 on, a cubin's shared size also holds the 1 KB the system reserves per block, once any is used
        reserved = 1024 if arch >= "sm_90" and usage[kernel]["SHARED"] else 0
        assert (got.registers, got.stack_frame, got.shared + reserved) == (
            usage[kernel]["REG"],
            usage[kernel]["STACK"],
            usage[kernel]["SHARED"],
        ), kernel


def test_facts_of_known_kernels():
    compiled = compile_ptx((SAMPLES / "pressure.sm80.ptx").read_text(), "pressure.sm80.ptx", "sm_80")
    spilled = compiled.functions["long_live_ranges"]
    assert spilled.spill_stores > 0 and spilled.spill_loads > 0 and spilled.uses_local_memory
    assert compiled.functions["nbody_tile"].shared == 2048 and compiled.functions["nbody_tile"].barriers == 1
    assert compiled.functions["stencil_25pt"].constant[2] == 8
    spills = [w for w in compiled.warnings if w.kind == "spill"]
    assert "long_live_ranges" in {w.function for w in spills}


def _hopper() -> str:
    return (SAMPLES / "hopper.sm90a.ptx").read_text()


def test_setmaxnreg_ignored_without_maxntid():
    text = _hopper().replace(".maxntid 384, 1, 1\n", "", 1)
    compiled = compile_ptx(text, "hopper.sm90a.ptx", "sm_90a")
    assert [w.code for w in compiled.warnings if w.kind == "setmaxnreg-ignored"] == ["C7508"]
    assert (
        compiled.functions["ws_tma_scale"].registers
        < 168
        == compile_ptx(_hopper(), "h", "sm_90a").functions["ws_tma_scale"].registers
    )


def test_wgmma_serialization_surfaced():
    lines = _hopper().splitlines(keepends=True)
    at = next(i for i, s in enumerate(lines) if s.startswith("wgmma.mma_async"))
    # an accumulator written by a non-wgmma instruction between two wgmma's forces ptxas to serialize them
    lines[at - 1 : at - 1] = ["\tmov.f32 %f3, %f1;\n\twgmma.fence.sync.aligned;\n", lines[at], "\tmov.f32 %f3, %f1;\n"]
    compiled = compile_ptx("".join(lines), "hopper.sm90a.ptx", "sm_90a")
    serialized = [w for w in compiled.warnings if w.kind == "wgmma-serialized"]
    assert serialized and serialized[0].function == "wgmma_tile" and serialized[0].line > at


def test_rejected_ptx_mapped_to_lines():
    text = (SAMPLES / "reduce.sm80.ptx").read_text()
    lines = text.splitlines()
    victim = next(i for i, s in enumerate(lines) if "mov.u32" in s)
    lines[victim] = lines[victim].replace("mov.u32", "mov.u99")
    with pytest.raises(InputError) as error:
        compile_ptx("\n".join(lines) + "\n", "reduce.sm80.ptx", "sm_80")
    first = error.value.diagnostics[0]
    assert (first.location.path, first.location.line) == ("reduce.sm80.ptx", victim + 1)
    assert "mov.u99" in first.location.source and "'.u99'" in first.message


def test_unresolved_extern_compiles_relocatable():
    text = """.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 r) helper (.param .b32 a);
.visible .entry k(.param .u64 p)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [p];
	mov.u32 %r1, 5;
	{
	.param .b32 a0;
	.param .b32 r0;
	st.param.b32 [a0], %r1;
	call (r0), helper, (a0);
	ld.param.b32 %r2, [r0];
	}
	st.global.u32 [%rd1], %r2;
	ret;
}
"""
    compiled = compile_ptx(text, "k.ptx", "sm_80")
    assert compiled.relocatable and compiled.functions["k"].registers > 0


def test_cache_by_content(tmp_path):
    text = (SAMPLES / "tensorcore.sm80.ptx").read_text()
    first = compile_ptx(text, "t.ptx", "sm_80")
    again = compile_ptx(text, "t.ptx", "sm_80")
    other = compile_ptx(text, "t.ptx", "sm_86")
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert again.cubin == first.cubin and again.functions == first.functions


def test_broken_ptxas(monkeypatch):
    monkeypatch.setenv("PTXTOOL_PTXAS", "/bin/false")
    with pytest.raises(EnvironmentProblem, match="does not work"):
        compile_ptx(_hopper(), "h.ptx", "sm_90a")


def test_arch_from_target_or_override():
    assert target_arch(("sm_90a",), "h.ptx") == "sm_90a"
    assert target_arch(("sm_80", "texmode_independent"), "x.ptx", "sm_89") == "sm_89"
    with pytest.raises(InputError, match="--arch"):
        target_arch(("compute_80",), "x.ptx")


def test_nvjitlink_backend_relocatable_or_clear_message():
    text = (SAMPLES / "pressure.sm80.ptx").read_text()
    try:
        compiled = compile_ptx(text, "p.ptx", "sm_80", backend="nvjitlink")
    except EnvironmentProblem as problem:
        assert "nvidia-nvjitlink" in str(problem)
        return
    assert compiled.relocatable and compiled.functions["nbody_tile"].registers > 0
    spilled = compiled.functions["long_live_ranges"]
    assert spilled.spill_stores > 0 and spilled.stack_frame > 0


def test_nvjitlink_rejection_at_lines():
    text = (SAMPLES / "tensorcore.sm80.ptx").read_text().replace("mov.u32", "mov.u99", 1)
    line = text[: text.index("mov.u99")].count("\n") + 1
    try:
        compile_ptx(text, "t.ptx", "sm_80", backend="nvjitlink")
    except EnvironmentProblem as problem:
        assert "nvidia-nvjitlink" in str(problem)
        return
    except InputError as error:
        assert error.diagnostics[0].location.line == line
        return
    pytest.fail("nvJitLink accepted an unknown modifier")

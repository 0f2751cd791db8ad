"""Warp-role splitting: the staged tile loop the analysis finds (on a planted kernel and nvcc's tiled SGEMM), each
refusal cause planted into that kernel, and the split's structure (roles, barriers, ring indices) checked on the
output, which ptxas must accept and whose SASS must hold the mbarrier (SYNCS) instructions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CORPUS

from ptxtool.analysis.staging import Refusal, StagedLoop, find_staged_loop
from ptxtool.passes.report import PassReport
from ptxtool.syntax import ast, format_module, parse
from ptxtool.toolchain.compile import compile_ptx

DATA = Path(__file__).parent / "data" / "warp_roles"
STAGED = (DATA / "staged.ptx").read_text()


def _find(text: str, **kwargs) -> StagedLoop | Refusal:
    module = parse(text)
    return find_staged_loop(module, module.kernels[0], **kwargs)


def _planted(old: str, new: str) -> str:
    assert old in STAGED, old
    return STAGED.replace(old, new, 1)


def test_finds_the_planted_loop() -> None:
    found = _find(STAGED)
    assert isinstance(found, StagedLoop), found
    ops = parse(STAGED).kernels[0]
    assert found.kind == "ld+st" and found.threads == 128
    assert [b.name for b in found.buffers] == ["tile"] and found.shared_bytes == 512
    assert len(found.loads) == 1 and len(found.stores) == 1 and len(found.compute) == 2
    assert ops.name == "staged" and found.filled < found.released


def test_finds_nvcc_tiled_sgemm() -> None:
    module = parse((CORPUS / "ptx" / "gemm_smem.sm90.ptx").read_text())
    kernel = next(k for k in module.kernels if k.name == "sgemm_tiled")
    found = find_staged_loop(module, kernel)
    assert isinstance(found, StagedLoop), found
    assert found.threads == 256 and found.kind == "ld+st"
    assert sorted(b.name for b in found.buffers) == ["_ZZ11sgemm_tiledE2As", "_ZZ11sgemm_tiledE2Bs"]
    assert len(found.loads) == len(found.stores) == 14  # the fill loop: 3 peeled trips and 4 unrolled, A and B each


REFUSALS = {
    "trip-count": (
        ("setp.lt.u32 \t%p2, %r12, %r1;", "setp.lt.u32 \t%p2, %r12, %r2;"),
        "trip count not uniform across the CTA",
    ),
    "exit-in-loop": (
        (
            "fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;",
            "fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n\tsetp.gt.f32 %p3, %f1, 0f47000000;\n\t@%p3 ret;",
        ),
        "ret inside the loop",
    ),
    "divergent-barrier": (
        (
            "\tbar.sync \t0;\n\tadd.s64",
            "\tsetp.lt.u32 %p3, %r2, 64;\n\t@%p3 bra $L__skip;\n\tbar.sync \t0;\n$L__skip:\n\tadd.s64",
        ),
        "barrier under divergent control",
    ),
    "loaded-address": (
        (
            "ld.global.nc.f32 \t%f2, [%rd5];",
            "ld.global.nc.u32 \t%r13, [%rd5];\n\tmul.wide.u32 %rd9, %r13, 4;\n\tadd.s64 %rd9, %rd3, %rd9;\n"
            "\tld.global.nc.f32 \t%f2, [%rd9];",
        ),
        "staging address depends on a value loaded at line",
    ),
    "shared-too-large": (("tile[512]", "tile[24576]"), "shared memory does not fit 2 stages: 49184 bytes > 49152"),
    "written-source": (
        ("st.global.f32 \t[%rd8], %f1;", "st.global.f32 \t[%rd8], %f1;\n\tst.global.f32 \t[%rd3], %f1;"),
        "reads global memory the kernel may write",
    ),
    "generic-shared": (
        (
            "ld.shared.f32 \t%f3, [%r11];",
            "cvt.u64.u32 %rd9, %r11;\n\tcvta.shared.u64 %rd9, %rd9;\n\tld.f32 \t%f3, [%rd9];",
        ),
        "a generic pointer into shared memory (cvta)",
    ),
    "value-crosses-roles": (
        ("fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;", "fma.rn.f32 \t%f1, %f3, %f2, %f1;"),
        "the compute part uses %f2, which the staging part computes",
    ),
    "shared-after-loop": (
        ("st.global.f32 \t[%rd8], %f1;", "st.global.f32 \t[%rd8], %f1;\n\tst.shared.f32 \t[%r8], %f1;"),
        "shared memory is used outside the loop",
    ),
    "aliasing-load": (
        (
            "ld.global.nc.f32 \t%f2, [%rd5];\n\tst.shared.f32 \t[%r8], %f2;\n\tbar.sync \t0;\n"
            "\tld.shared.f32 \t%f3, [%r11];",
            "ld.global.f32 \t%f2, [%rd5];\n\tst.shared.f32 \t[%r8], %f2;\n\tbar.sync \t0;\n"
            "\tld.shared.f32 \t%f3, [%r11];\n\tst.global.f32 \t[%rd2], %f3;",
        ),
        "reads memory without .nc and the kernel writes global memory at line",
    ),
    "block-size": ((".reqntid 128, 1, 1", ".reqntid 128, 2, 1"), "not declared one-dimensional"),
    "named-barrier": (("\tbar.sync \t0;\n\tld.shared", "\tbar.sync \t1, 128;\n\tld.shared"), "not a plain CTA barrier"),
}


@pytest.mark.parametrize("cause", sorted(REFUSALS))
def test_refusal(cause: str) -> None:
    (old, new), reason = REFUSALS[cause]
    text = _planted(old, new)
    found = _find(text)
    assert isinstance(found, Refusal), f"{cause}: not refused"
    assert reason in found.reason, found
    assert found.line > 0 and "\n" not in str(found)


def test_refusal_registers_from_ptxas() -> None:
    """sgemm_tiled takes 80 registers per thread (ptxas): 1,024 threads would need 81,920 of the 65,536."""
    text = (CORPUS / "ptx" / "gemm_smem.sm90.ptx").read_text()
    registers = compile_ptx(text, "gemm_smem.sm90.ptx", "sm_90").functions["sgemm_tiled"].registers
    module = parse(text)
    kernel = next(k for k in module.kernels if k.name == "sgemm_tiled")
    assert isinstance(find_staged_loop(module, kernel, extra_threads=256, registers=registers), StagedLoop)
    found = find_staged_loop(module, kernel, extra_threads=768, registers=registers)
    assert isinstance(found, Refusal) and "registers do not fit" in found.reason, found


def test_no_staged_loop_is_a_refusal() -> None:
    found = _find(STAGED.replace("\tbar.sync \t0;\n", "", 2))
    assert isinstance(found, Refusal) and "no loop waits at a CTA barrier twice" in found.reason


# ---------------------------------------------------------------- the split's structure, ptxas and the SASS


def _split(text: str, **settings) -> tuple[ast.Module, object]:
    from ptxtool.passes.warp_roles import RoleSettings, warp_roles

    return warp_roles(parse(text), RoleSettings(**settings))


def _instructions(function: ast.Function) -> list[ast.Instruction]:
    return list(ast.instructions(function.body))


def _mnemonics(function: ast.Function) -> list[str]:
    return [i.mnemonic for i in _instructions(function)]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_split_structure(stages: int) -> None:
    """Roles: consumers below %tid.x 128, producers replay with %tid.x - 128; ring indices k mod S and parity
    (k / S) & 1; each role waits on the other's barrier with the right parity; block grown and reported."""
    out, report = _split(STAGED, stages=stages)
    kernel = out.kernels[0]
    assert [d.word for d in kernel.directives] == [".reqntid"]
    assert [v.text for v in kernel.directives[0].values] == ["256", "1", "1"]
    (rewrite,) = report.rewrites
    assert rewrite.after.startswith("256 threads") and "4 producer warps" in rewrite.reasons[0]
    text = format_module(out)
    assert f"__wr_ring[{stages * 512}]" in text and f"__wr_full[{stages}]" in text
    assert text.count("mbarrier.init.shared::cta.b64") == 2 * stages
    assert f"rem.u32 %wr_slot, %wr_k, {stages};" in text and f"div.u32 %wr_ph, %wr_k, {stages};" in text
    consumer, _, producer = text.partition("$__wr_producer:")
    # consumers: no global load of the tile any more, a wait on full with parity ph, an arrive on empty
    assert "ld.global.nc.f32" not in consumer and "st.shared" not in consumer
    assert "mbarrier.try_wait.parity.shared::cta.b64 %wr_done, [%wr_bar], %wr_ph;" in consumer
    assert "mov.u32 %wr_bar, __wr_full;" in consumer and "[%wr_ebar]" in consumer
    assert consumer.count("bar.sync 0;") == 1  # only the one before the roles part, where every thread meets
    # producers: the staging with %tid.x replaced, the opposite parity on empty, an arrive on full, no compute
    assert "sub.u32 %wr_vtid, %wr_tid, 128;" in producer and "%tid.x" not in producer
    assert "xor.b32 %wr_eph, %wr_ph, 1;" in producer and "[%wr_bar], %wr_eph;" in producer
    assert "ld.global.nc.f32" in producer and "ld.shared" not in producer and "st.global" not in producer
    assert "fma.rn.f32" not in producer and "bar.sync" not in producer
    # the stores and loads of the tile move by the slot's offset
    assert "add.u32 %wr_a0, %wr_a0, %wr_off;\n\tst.shared.f32 [%wr_a0]" in producer
    assert "add.u32 %wr_a1, %wr_a1, %wr_off;\n\tld.shared.f32 %f3, [%wr_a1]" in consumer


def test_split_named_barriers_for_consumers() -> None:
    """A CTA barrier outside the loop becomes `bar.sync 1, 128` (consumers only); producers drop it."""
    extra = STAGED.replace("\tcvta.to.global.u64 \t%rd6, %rd2;", "\tbar.sync \t0;\n\tcvta.to.global.u64 \t%rd6, %rd2;")
    out, report = _split(extra)
    text = format_module(out)
    consumer, _, producer = text.partition("$__wr_producer:")
    assert "bar.sync 1, 128;" in consumer and "bar.sync" not in producer
    assert report.rewrites


def test_split_is_refused_with_reasons() -> None:
    out, report = _split(STAGED.replace(".target sm_90", ".target sm_75"), variant="pipeline")
    assert not report.rewrites and "'cp.async' is not available on .target sm_75" in report.skipped[0].reason
    assert format_module(out) == format_module(parse(STAGED.replace(".target sm_90", ".target sm_75")))
    for producers in (3, 5):
        _, report = _split(STAGED, producer_warps=producers)
        assert f"producer warps must divide the 4 consumer warps, not {producers}" in report.skipped[0].reason
    old = STAGED.replace(".target sm_90", ".target sm_75")
    _, report = _split(old)  # the ISA tables decide: the first instruction the split would write that sm_75 lacks
    assert report.skipped[0].reason == (
        "the split would write mbarrier.init.shared::cta.b64: "
        "instruction 'mbarrier.init' is not available on .target sm_75 (needs sm_80 or later)"
    )


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("source", ["staged", "sgemm"])
def test_split_assembles_and_shows_mbarriers(source: str, stages: int, tmp_path: Path) -> None:
    """ptxas accepts the split, its block is the grown one, and the SASS holds the ring's SYNCS instructions."""
    from ptxtool.toolchain.sass import disassemble

    text = STAGED if source == "staged" else (CORPUS / "ptx" / "gemm_smem.sm90.ptx").read_text()
    out, report = _split(text, stages=stages)
    assert report.rewrites
    compiled = compile_ptx(format_module(out), f"{source}.ptx", "sm_90")
    kernel = report.rewrites[0].kernel
    assert compiled.functions[kernel].spill_bytes == 0
    opcodes = " ".join(i.opcode for i in disassemble(compiled.cubin)[kernel])
    assert "SYNCS.PHASECHK" in opcodes and "SYNCS.ARRIVE" in opcodes


def test_optimize_cli_runs_the_split_alone(tmp_path: Path) -> None:
    """`optimize --passes warp-roles --stages 3 -o OUT` writes the verified split and says what it checked;
    mixing it with another pass is a usage error (exit 2); a kernel the pipeline variant refuses is said (no -v
    needed) and the input written."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(STAGED)
    run = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", "--stages", "3", str(source), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "SASS of 1 warp-role kernel(s) shows the ring (mbarrier waits and arrivals; LDGSTS, DEPBAR)" in run.output
    assert ".reqntid 256, 1, 1" in out.read_text() and "__wr_ring[1536]" in out.read_text()
    mixed = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles,cache-operators", str(source)])
    assert mixed.exit_code == 2 and "runs alone" in mixed.output
    source.write_text(STAGED.replace("st.shared.f32 \t[%r8], %f2;", "st.shared.f32 \t[%r8], %f1;"))
    refused = CliRunner().invoke(
        main, ["optimize", "--passes", "warp-roles", "--variant", "pipeline", str(source), "-o", str(out)]
    )  # a kernel refused whole is said without -v
    assert refused.exit_code == 0 and "staged: skipped warp-roles: " in refused.output, refused.output
    assert out.read_text() == source.read_text()


def test_consumers_keep_the_headers_arithmetic() -> None:
    """A tile index computed at the top of the staging part and read by the compute part (nvcc's stencil does
    this) stays in the consumers' code; the staging loads and stores do not."""
    text = _planted("$L__loop:\n", "$L__loop:\n\tadd.s32 \t%r13, %r12, 7;\n")
    text = text.replace(
        "fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;", "cvt.rn.f32.s32 %f4, %r13;\n\tadd.f32 %f1, %f3, %f4;"
    )
    found = _find(text)
    assert isinstance(found, StagedLoop) and len(found.kept) == 1, found
    consumer, _, producer = format_module(_split(text)[0]).partition("$__wr_producer:")
    assert "add.s32 %r13, %r12, 7;" in consumer and "add.s32 %r13, %r12, 7;" in producer
    assert "ld.global.nc.f32" not in consumer


def test_split_twice_is_split_once() -> None:
    """The split's own loops wait on mbarriers, not at two CTA barriers: a second run refuses and changes nothing."""
    once, _ = _split(STAGED)
    twice, report = _split(format_module(once))
    assert format_module(twice) == format_module(once)
    assert not report.rewrites and "no loop waits at a CTA barrier twice" in report.skipped[0].reason


@pytest.mark.parametrize(("version", "target"), [("7.8", "sm_90"), ("8.6", "sm_100")])
def test_split_assembles_at_the_oldest_version_and_newer_targets(version: str, target: str) -> None:
    """mbarrier.try_wait.parity and `.shared::cta` need PTX ISA 7.8: the split of a 7.8 file assembles as it is."""
    text = STAGED.replace(".version 8.0", f".version {version}").replace(".target sm_90", f".target {target}")
    out, report = _split(text)
    assert report.rewrites
    compiled = compile_ptx(format_module(out), "staged.ptx", target)
    assert compiled.functions["staged"].registers


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks" / "warp_roles"


@pytest.mark.parametrize(
    ("source", "kernel", "consumers"),
    [("sgemm.cu", "sgemm_tiled", 256), ("stencil.cu", "stencil_tiled", 256), ("attention.cu", "attention_tiled", 128)],
)
def test_split_of_nvccs_benchmark_kernels(source: str, kernel: str, consumers: int) -> None:
    """Each benchmark input, compiled by the wheel's nvcc, is found and split (ptxas accepts it, SASS shows SYNCS):
    the shapes nvcc makes of a tiled GEMM, a halo stencil and a K/V-staging loop, not only the planted kernel."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx
    from ptxtool.toolchain.sass import disassemble

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    found = _find(text)
    assert isinstance(found, StagedLoop) and found.threads == consumers, found
    out, report = _split(text)
    assert [r.kernel for r in report.rewrites] == [kernel]
    compiled = compile_ptx(format_module(out), source, "sm_90")
    opcodes = " ".join(i.opcode for i in disassemble(compiled.cubin)[kernel])
    assert "SYNCS.PHASECHK" in opcodes and "SYNCS.ARRIVE" in opcodes
    assert compiled.functions[kernel].spill_bytes == 0


def fuzz_split(seed: int, split: Callable[[str], tuple[str, PassReport]]) -> dict[str, int]:
    """Fixed-seed mutants of the planted kernel (an instruction line dropped, doubled or moved) that ptxas takes, each
    split under a time bound: refused with a reason, or split into what ptxas accepts; how many went each way."""
    import random
    import time

    from ptxtool.errors import InputError

    rng = random.Random(seed)
    lines = STAGED.splitlines()
    body = [n for n, line in enumerate(lines) if line.startswith("\t") and line.rstrip().endswith(";") and "." in line]
    outcomes = {"refused": 0, "split": 0}
    for _ in range(30):
        mutant = list(lines)
        n = rng.choice(body)
        kind = rng.choice(("drop", "double", "move"))
        if kind == "drop":
            del mutant[n]
        elif kind == "double":
            mutant.insert(n, mutant[n])
        else:
            mutant.insert(rng.choice(body), mutant.pop(n))
        text = "\n".join(mutant) + "\n"
        try:
            compile_ptx(text, "mutant.ptx", "sm_90")
        except InputError:
            continue  # not PTX ptxas takes: not the pass's input
        start = time.monotonic()
        out, report = split(text)
        assert time.monotonic() - start < 5
        if report.rewrites:
            outcomes["split"] += 1
            compile_ptx(out, "mutant.split.ptx", "sm_90")
        else:
            outcomes["refused"] += 1
            assert report.skipped and all(s.reason for s in report.skipped)
    return outcomes


def test_fuzzed_kernels_are_refused_or_split_into_what_ptxas_accepts() -> None:
    def split(text: str) -> tuple[str, PassReport]:
        module, report = _split(text)
        return format_module(module), report

    outcomes = fuzz_split(0, split)
    assert outcomes["split"] and outcomes["refused"], outcomes

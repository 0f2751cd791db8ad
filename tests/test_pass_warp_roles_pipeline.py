"""The warp-role pass's pipeline variant (no roles, S - 1 trips of cp.async ahead): its structure on the planted
kernel (entry trips, commit and wait counts, ring slots), nvcc's bounds-checked staging turned into zero-filling
copies, each safety rule's breaking kernel refused with its reason, and ptxas's acceptance with the SASS's
LDGSTS / LDGDEPBAR / DEPBAR on the planted kernel and on nvcc's benchmark inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_pass_warp_roles import STAGED, fuzz_split

from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import PIPELINE_PROOF, RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks" / "warp_roles"
LOAD = "\tld.global.nc.f32 \t%f2, [%rd5];\n"
STORE = "\tst.shared.f32 \t[%r8], %f2;\n"


def _pipeline(text: str, stages: int = 2) -> tuple[str | None, PassReport]:
    out, report = warp_roles(parse(text), RoleSettings(variant="pipeline", stages=stages))
    return (format_module(out) if report.rewrites else None), report


def _planted(*edits: tuple[str, str]) -> str:
    text = STAGED
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _sass_proof(text: str, kernel: str = "staged") -> None:
    from ptxtool.toolchain.sass import disassemble, missing

    compiled = compile_ptx(text, "pipelined.ptx", "sm_90")
    assert compiled.functions[kernel].spill_bytes == 0
    sass = disassemble(compiled.cubin)[kernel]
    assert not missing(PIPELINE_PROOF, sass), [i.opcode for i in sass]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipeline_structure(stages: int) -> None:
    """The block and %tid stay; S - 1 entry trips and one per loop trip, each one commit group; trip k waits for all
    but the S - 1 newest groups, then the input's barriers; copies go to slot q mod S, reads to slot k mod S."""
    out, report = _pipeline(STAGED, stages)
    assert out is not None, report.skipped
    kernel = parse(out).kernels[0]
    assert [v.text for v in kernel.directives[0].values] == ["128", "1", "1"]
    assert f"__wr_ring[{stages * 512}]" in out and ".shared .align 4 .b8 tile" not in out
    entry, _, rest = out.partition("$L__loop:")
    loop, _, after = rest.partition("$L__done:")
    assert (
        entry.count("cp.async.ca.shared.global") == stages - 1 and entry.count("cp.async.commit_group;") == stages - 1
    )
    assert entry.count("@!%wr_more bra") == stages - 1 and "mov.pred %wr_more, 1;" in entry
    assert loop.count("cp.async.ca.shared.global") == 1 and loop.count("cp.async.commit_group;") == 1
    assert loop.count(f"cp.async.wait_group {stages - 1};") == 1 and "wait_all" not in loop
    order = [loop.index(x) for x in ("commit_group", "wait_group", "bar.sync 0", "ld.shared.f32", "bar.sync 0;\n\tadd")]
    assert order == sorted(order), order
    assert out.count(f"rem.u32 %wr_qslot, %wr_q, {stages};") == stages
    assert out.count(f"rem.u32 %wr_slot, %wr_k, {stages};") == 1
    assert re.search(
        r"add\.u32 %wr_a0, %wr_a0, %wr_qoff;\n\tcp\.async\.ca\.shared\.global \[%wr_a0\], \[%wr_src0\], 4;", loop
    )
    assert "add.u32 %wr_a1, %wr_a1, %wr_off;\n\tld.shared.f32 %f3, [%wr_a1];" in loop
    assert after.lstrip().startswith("cp.async.wait_all;")  # before anything after the loop
    assert "ld.global.nc" not in out and "st.shared" not in out and "%tid.x" in out
    # the ahead copy runs the staging and the tail in registers of its own, from the loop's entry values
    assert "mov.b64 %wr_s1_rd5, %rd5;" in entry and "add.s64 %wr_s1_rd5, %wr_s1_rd5, 512;" in loop
    assert "add.s64 %rd5, %rd5, 512;" in loop  # and the kernel's own tail still steps its own
    _sass_proof(out)


ZERO_FILLS = {
    "branch": (
        LOAD,
        "\tmov.f32 \t%f2, 0f00000000;\n\tsetp.ge.u32 \t%p3, %r5, 1000;\n\t@%p3 bra \t$L__st;\n" + LOAD + "$L__st:\n",
    ),
    "predicated": (
        LOAD,
        "\tmov.f32 \t%f2, 0f00000000;\n\tsetp.lt.u32 \t%p3, %r5, 1000;\n\t@%p3 ld.global.nc.f32 \t%f2, [%rd5];\n",
    ),
    "selp": (
        LOAD,
        "\tsetp.lt.u32 \t%p3, %r5, 1000;\n\tld.global.nc.f32 \t%f4, [%rd5];\n\tselp.f32 \t%f2, %f4, 0f00000000, %p3;\n",
    ),
    "zero_through_a_mov": (
        LOAD,
        "\tmov.b32 \t%f5, 0;\n\tmov.f32 \t%f2, %f5;\n\tsetp.ge.u32 \t%p3, %r5, 1000;\n\t@%p3 bra \t$L__st;\n"
        + LOAD
        + "$L__st:\n",
    ),
}


@pytest.mark.parametrize("form", sorted(ZERO_FILLS))
def test_bounds_checked_staging_becomes_a_zero_filling_copy(form: str) -> None:
    """nvcc's `in bounds ? load : 0.f` (a branch around the load, a predicated load, a selp): the copy reads 4 bytes
    where the load would have run and 0 (zero-filling all 4) where the zero would have been stored."""
    out, report = _pipeline(_planted(ZERO_FILLS[form]))
    assert out is not None, report.skipped
    loop = out.partition("$L__loop:")[2]
    assert "selp.u32 %wr_n0, 4, 0, %wr_cp0;" in loop
    assert re.search(r"cp\.async\.ca\.shared\.global \[%wr_a0\], \[%wr_src0\], 4, %wr_n0;", loop)
    if form == "selp":
        assert "mov.pred %wr_cp0, %wr_s1_p3;" in loop and "selp.f32" not in loop
    elif form == "predicated":
        assert "mov.pred %wr_cp0, 0;" in loop and "@%wr_s1_p3 mov.pred %wr_cp0, 1;" in loop
        assert "@%wr_s1_p3 add.s64 %wr_src0, %wr_s1_rd5, 0;" in loop
    else:
        assert loop.index("mov.pred %wr_cp0, 0;") < loop.index("mov.pred %wr_cp0, 1;")
    assert "1 zero-filled" in report.rewrites[0].reasons[1]
    _sass_proof(out)


REFUSALS = {
    # the zero path stores 1.0 or -0.0 (not all-zero bits): a zero-filling copy would store other bytes
    "nonzero_else": (
        (
            LOAD,
            "\tmov.f32 \t%f2, 0f3F800000;\n\tsetp.ge.u32 \t%p3, %r5, 1000;\n\t@%p3 bra \t$L__st;\n"
            + LOAD
            + "$L__st:\n",
        ),
        "the load or a value other than zero",
    ),
    "negative_zero": (
        (
            LOAD,
            "\tmov.f32 \t%f2, 0f80000000;\n\tsetp.ge.u32 \t%p3, %r5, 1000;\n\t@%p3 bra \t$L__st;\n"
            + LOAD
            + "$L__st:\n",
        ),
        "the load or a value other than zero",
    ),
    # two copies of one trip overlap by two bytes: cp.asyncs land in any order
    "overlapping_pair": (
        (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r8+2], %f4;\n"),
        "write the same bytes",
    ),
    # the second address is another register holding the same value: no proof they differ, so refused
    "unproven_pair": (
        (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r13], %f4;\n"),
        "cannot prove the staging stores",
        ("\tmov.u32 \t%r12, 0;\n", "\tmov.u32 \t%r12, 0;\n\tadd.s32 \t%r13, %r8, %r1;\n"),
    ),
    # a store the loop skips on some trips: the skipped byte would hold trip k - S's value, not trip k - 1's
    "store_on_some_trips": (
        (LOAD + STORE, "\tsetp.ne.u32 \t%p3, %r12, 0;\n\t@%p3 bra \t$L__kept;\n" + LOAD + STORE + "$L__kept:\n"),
        "is skipped on some paths of a trip",
    ),
    # the address changes with the trip (odd trips the upper half): a byte one trip skips is S trips old
    "address_per_trip": (
        (STORE, "\tand.b32 \t%r14, %r12, 1;\n\tmad.lo.s32 \t%r15, %r14, 256, %r8;\n\tst.shared.f32 \t[%r15], %f2;\n"),
        "may change from trip to trip",
    ),
    # the staged value is computed, not only loaded
    "computed_value": (
        (STORE, "\tmul.f32 \t%f4, %f2, 0f40000000;\n\tst.shared.f32 \t[%r8], %f4;\n"),
        "not only loaded from global memory",
    ),
    # an 8-byte copy into a buffer declared 4-byte aligned: not proven aligned in the ring
    "unaligned_copy": (
        (
            LOAD + STORE,
            "\tld.global.nc.v2.f32 \t{%f2, %f4}, [%rd5];\n\tmov.b64 \t%rd9, {%f2, %f4};\n"
            "\tld.global.nc.u64 \t%rd9, [%rd5];\n\tst.shared.u64 \t[%r8], %rd9;\n",
        ),
        "not proven aligned",
    ),
    # a plain (not .nc) staging read while the kernel writes global memory: read S - 1 trips early
    "plain_read": (
        (LOAD, "\tld.global.f32 \t%f2, [%rd5];\n"),
        "reads memory without .nc",
        ("\tmov.u32 \t%r12, 0;\n", "\tmov.u32 \t%r12, 0;\n\tcvta.to.global.u64 \t%rd9, %rd2;\n"),
        ("\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n", "\tst.global.f32 \t[%rd9], %f3;\n"),
    ),
    # an ordered load (it observes other agents): a cp.async issued trips early would not keep its order
    "relaxed_load": ((LOAD, "\tld.relaxed.gpu.global.f32 \t%f2, [%rd5];\n"), "in the staging part"),
    # a store in an inner loop of the staging part writes the same word on both of its trips: the second copy
    # may land first (fills.py runs every thread's trip)
    "inner_loop": (
        (
            LOAD + STORE,
            "\tmov.u32 \t%r13, 0;\n$L__fill:\n" + LOAD + STORE + "\tadd.s32 \t%r13, %r13, 1;\n"
            "\tsetp.lt.u32 \t%p3, %r13, 2;\n\t@%p3 bra \t$L__fill;\n",
        ),
        "the staging store at line 45 writes the same bytes of tile twice in thread 0 of one trip",
    ),
    # code before the loop branches to its header: the entry trips would not be issued
    "entered_by_a_branch": (
        ("\t@%p1 bra \t$L__done;\n", "\t@%p1 bra \t$L__done;\n\tbra.uni \t$L__loop;\n"),
        "branches to the loop's header",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_pipeline_refusal(case: str) -> None:
    """Each rule's breaking kernel (ptxas takes it) is refused in one line that says why, and left as it was."""
    edit, reason, *more = REFUSALS[case]
    text = _planted(edit, *more)
    if case != "unaligned_copy":
        compile_ptx(text, f"{case}.ptx", "sm_90")
    out, report = _pipeline(text)
    assert out is None and report.skipped, out
    assert reason in report.skipped[0].reason, report.skipped[0].reason
    assert "\n" not in report.skipped[0].reason


def test_disjoint_pair_is_pipelined() -> None:
    """Two copies from one base register at offsets 0 and 4 (4 bytes each) write disjoint bytes: pipelined."""
    text = _planted(
        ("tile[512]", "tile[1024]"),
        (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r8+512], %f4;\n"),
    )
    out, report = _pipeline(text, 3)
    assert out is not None, report.skipped
    assert out.count("cp.async.ca.shared.global") == 2 * 3
    _sass_proof(out)


VECTOR = (
    (".reg .f32 \t%f<6>;", ".reg .f32 \t%f<10>;"),
    (".align 4 .b8 tile[512]", ".align 16 .b8 tile[2048]"),
    ("shl.b32 \t%r7, %r2, 2;", "shl.b32 \t%r7, %r2, 4;"),
    (
        LOAD + STORE,
        "\tld.global.nc.v4.f32 \t{%f6, %f7, %f8, %f9}, [%rd5];\n\tst.shared.v4.f32 \t[%r8], {%f6, %f7, %f8, %f9};\n",
    ),
)


def test_a_vector_copy_is_one_16_byte_cp_async() -> None:
    """`ld.global.nc.v4.f32` + `st.shared.v4.f32` of the same registers: one 16-byte `cp.async.cg` (L2 only)."""
    out, report = _pipeline(_planted(*VECTOR), 3)
    assert out is not None, report.skipped
    assert out.count("cp.async.cg.shared.global [%wr_a0], [%wr_src0], 16;") == 3 and ".v4" not in out
    _sass_proof(out)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("{%f6, %f7, %f8, %f9};", "{%f6, %f7, %f9, %f8};"), "stores other than one vector load's registers"),
        (("\tld.global.nc.v4", "\tsetp.lt.u32 \t%p3, %r5, 9;\n\t@%p3 ld.global.nc.v4"), "is guarded"),
        ((".align 16 .b8 tile", ".align 8 .b8 tile"), "not proven aligned"),
    ],
)
def test_vector_copy_refusals(edit: tuple[str, str], reason: str) -> None:
    """Elements swapped, a guarded vector load (its registers keep older values on the other path), a buffer
    aligned to less than the copy: refused."""
    out, report = _pipeline(_planted(*VECTOR, edit))
    assert out is None and reason in report.skipped[0].reason, report.skipped


@pytest.mark.parametrize(("offset", "pipelined"), [(512, True), (2, False)])
def test_disjointness_by_each_threads_addresses(offset: int, pipelined: bool) -> None:
    """A second copy through another register, %r13 = %r8 + offset (%r8 = tile + 4 %tid.x): the addresses are
    evaluated for every %tid.x (up to 1,024 without a declared block): 512 bytes apart, disjoint in every thread;
    2 bytes apart, they overlap and the pair is refused."""
    text = _planted(
        (".reqntid 128, 1, 1\n", ""),
        ("tile[512]", "tile[1024]"),
        ("\tmov.u32 \t%r12, 0;\n", f"\tmov.u32 \t%r12, 0;\n\tadd.s32 \t%r13, %r8, {offset};\n"),
        (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r13], %f4;\n"),
    )
    out, report = _pipeline(text)
    if not pipelined:
        assert out is None and "cannot prove the staging stores" in report.skipped[0].reason, report.skipped
        return
    assert out is not None, report.skipped
    assert out.count("cp.async.ca.shared.global") == 2 * 2
    _sass_proof(out)


def test_pipeline_needs_cp_async_targets() -> None:
    for target in ("sm_75", "sm_70"):
        text = STAGED.replace(".target sm_90", f".target {target}")
        out, report = _pipeline(text)
        assert out is None and report.skipped[0].reason == (
            "the pipeline would write cp.async.ca.shared.global: instruction 'cp.async' is not available on "
            f".target {target} (needs sm_80 or later)"
        )


def test_pipeline_assembles_for_sm_80() -> None:
    out, _ = _pipeline(STAGED.replace(".target sm_90", ".target sm_80"), 3)
    assert out is not None
    assert compile_ptx(out, "pipelined.ptx", "sm_80").functions["staged"].registers


def test_pipeline_twice_is_refused() -> None:
    """The pipelined loop stages with cp.async already: a second run refuses and changes nothing."""
    once, _ = _pipeline(STAGED)
    assert once is not None
    twice, report = _pipeline(once)
    assert twice is None and report.skipped


@pytest.mark.parametrize(
    ("source", "kernel", "copies"),
    [
        ("sgemm_unrolled.cu", "sgemm_unrolled", 8),
        ("attention_unrolled.cu", "attention_unrolled", 32),
        ("sgemm.cu", "sgemm_tiled", 14),
        ("stencil.cu", "stencil_tiled", 7),
        ("attention.cu", "attention_tiled", 14),
    ],
)
def test_pipeline_of_nvccs_benchmark_kernels(source: str, kernel: str, copies: int) -> None:
    """nvcc's benchmark inputs are pipelined for S = 2, 3, 4 (the attention loops: 2, 3 fit 48 KB) and assemble with
    the SASS proof: the constant-trip fills (8 and 32 bounds-checked stores per thread, disjoint per thread by their
    addresses for each %tid.x) and the thread-strided fill loops (peeled and unrolled by nvcc: 14, 7, 14 stores,
    each thread's trip run by fills.py), all zero-filling copies."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    for stages in (2, 3, 4):
        out, report = _pipeline(text, stages)
        if kernel.startswith("attention") and stages == 4:  # 4 x 16 KB: over the 48 KB of static shared memory
            assert out is None and "does not fit 4 stages: 65536 bytes > 49152" in report.skipped[0].reason
        else:
            assert out is not None, report.skipped
            assert f"{copies} zero-filled" in report.rewrites[0].reasons[1]
            _sass_proof(out, kernel)


def test_optimize_cli_runs_the_pipeline(tmp_path: Path) -> None:
    """`optimize --passes warp-roles --variant pipeline --stages 3` writes the pipelined kernel, whose SASS it
    checked for LDGSTS / LDGDEPBAR / DEPBAR."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(STAGED)
    args = ["optimize", "--passes", "warp-roles", "--variant", "pipeline", "--stages", "3", str(source), "-o", str(out)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0 and "SASS of 1 warp-role kernel(s) shows the ring" in run.output, run.output
    text = out.read_text()
    assert ".reqntid 128, 1, 1" in text and "__wr_ring[1536]" in text and "cp.async.wait_group 2;" in text


def test_fuzzed_kernels_are_refused_or_pipelined_into_what_ptxas_accepts() -> None:
    """Fixed-seed mutants of the planted kernel: refused with a reason, or pipelined into what ptxas accepts and,
    where the simulator runs the mutant (in bounds, within its step limit), into the same output bits."""
    made: list[tuple[str, str]] = []

    def pipeline(text: str) -> tuple[str, PassReport]:
        module, report = warp_roles(parse(text), RoleSettings(variant="pipeline"))
        if report.rewrites:
            made.append((text, format_module(module)))
        return format_module(module), report

    outcomes = fuzz_split(0, pipeline)
    assert outcomes["split"] and outcomes["refused"], outcomes
    compared = 0
    for text, out in made:
        try:
            expected = _simulated(text, trips=3, blocks=1, limit=60_000)
        except (AssertionError, KeyError, ValueError):
            continue  # out of bounds, endless, or outside the simulator's subset: ptxas's word is all we have
        assert _simulated(out, trips=3, blocks=1) == expected, out
        compared += 1
    assert compared >= len(made) // 2, (compared, len(made))


def _simulated(text: str, trips: int = 5, blocks: int = 2, seed: int = 0, limit: int = 10**6) -> bytes:
    """The output buffer after a simulated launch (tests/ptx_sim.py: cp.async lands only at a wait, in a random
    order) of `blocks` CTAs of 128 threads over `trips` tiles of random floats."""
    import random
    import struct

    from ptx_sim import run_grid

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * trips * 128))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    run_grid(text, 128, blocks, [0, len(data), trips], memory, seed, limit)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_outputs_match_on_a_simulated_cta(stages: int) -> None:
    """The pipelined kernel's outputs are the input's, bit for bit, on the CPU simulator; waiting for one group
    fewer (wait_group S instead of S - 1) reads slots whose copies have not landed and gives other bits."""
    expected = _simulated(STAGED)
    out, _ = _pipeline(STAGED, stages)
    assert out is not None
    assert _simulated(out, seed=stages) == expected
    early = out.replace(f"cp.async.wait_group {stages - 1};", f"cp.async.wait_group {stages};")
    assert _simulated(early, seed=stages) != expected
    for trips in (0, 1, 2):  # fewer trips than the entry issues: the groups beyond the last trip are empty
        assert _simulated(out, trips=trips, seed=stages) == _simulated(STAGED, trips=trips)


@pytest.mark.parametrize("form", sorted(ZERO_FILLS))
def test_zero_filled_outputs_match_on_a_simulated_cta(form: str) -> None:
    """Threads of the second CTA past element 700 take the zero path: the zero-filling copies give the input's
    bits, and copying 4 bytes on the zero path too (src-size left at 4) gives other bits."""
    text = _planted((ZERO_FILLS[form][0], ZERO_FILLS[form][1].replace("1000", "700")))
    expected = _simulated(text)
    assert expected != _simulated(_planted((ZERO_FILLS[form][0], ZERO_FILLS[form][1].replace("1000", "100000"))))
    out, _ = _pipeline(text, 3)
    assert out is not None
    assert _simulated(out, seed=3) == expected
    assert _simulated(out.replace("selp.u32 %wr_n0, 4, 0,", "selp.u32 %wr_n0, 4, 4,"), seed=3) != expected

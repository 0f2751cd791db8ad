"""Warp-role splitting with P producer warps fewer than the consumers' N/32: each producer thread p stages the
parts of consumer threads p + 32P·j in turn. Checked on the output: the block and barrier counts, the share
mapping (every consumer thread staged by exactly one producer thread and share), each share's registers and labels
its own, the refusals planted, and ptxas's acceptance of the planted kernel and nvcc's benchmark kernels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_pass_warp_roles import BENCHMARKS, STAGED, _planted, fuzz_split

from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx


def _split(text: str, **settings) -> tuple[str, object]:
    out, report = warp_roles(parse(text), RoleSettings(**settings))
    return format_module(out), report


def _shares(producer: str, consumers: int) -> dict[int, int]:
    """Share number -> the offset its %tid.x stands at from the producer thread's p = %tid.x - N, read back from
    the output (share 0: `sub.u32 %wr_vtid, %wr_tid, N`; share j: `add.u32 %wr_sJ_wr_vtid, %wr_vtid, C`)."""
    assert f"sub.u32 %wr_vtid, %wr_tid, {consumers};" in producer
    found = {0: 0}
    for j, c in re.findall(r"add\.u32 %wr_s(\d+)_wr_vtid, %wr_vtid, (\d+);", producer):
        found[int(j)] = int(c)
    return found


@pytest.mark.parametrize("producers", [1, 2, 4])
def test_every_consumer_thread_is_staged_exactly_once(producers: int) -> None:
    """Enumerate the mapping the output computes: producer threads p < 32P, shares j; p + offset(j) must hit each
    consumer thread 0..N-1 once. The block grows by 32P, the full barriers count 32P arrivals, the empty N."""
    text, report = _split(STAGED, producer_warps=producers)
    (rewrite,) = report.rewrites
    total = 128 + 32 * producers
    assert rewrite.after == f"{total} threads (.reqntid)" and f"+ {producers} producer warps" in rewrite.reasons[0]
    assert f".reqntid {total}, 1, 1" in text
    assert text.count(f"mbarrier.init.shared::cta.b64 [__wr_full+0], {32 * producers};") == 1
    assert text.count("mbarrier.init.shared::cta.b64 [__wr_empty+0], 128;") == 1
    producer = text.partition("$__wr_producer:")[2]
    offsets = _shares(producer, 128)
    assert len(offsets) == 4 // producers
    staged = sorted(p + off for p in range(32 * producers) for off in offsets.values())
    assert staged == list(range(128))
    # producer warp q's share j is consumer warp q + P j, lane for lane (warp-level operations keep their lanes)
    for p in range(32 * producers):
        assert all((p + off) % 32 == p % 32 for off in offsets.values())


def test_each_share_stages_with_its_own_registers_once_per_trip() -> None:
    """P = 1, 4 shares: per trip one wait on empty, four staging copies each storing through its own registers
    into the slot, one arrival on full, four tail copies stepping each share's pointer; only the last share's
    exit branch leaves the loop (the trip count is uniform: all shares agree)."""
    text, _ = _split(STAGED, producer_warps=1)
    producer = text.partition("$__wr_producer:")[2]
    loop = producer[producer.index("$__wr_p$L__loop:") :]
    assert loop.count("mbarrier.try_wait") == 1 and loop.count("mbarrier.arrive") == 1
    assert "ld.global.nc.f32 %f2, [%rd5];" in loop
    for j in (1, 2, 3):
        assert f"ld.global.nc.f32 %wr_s{j}_f2, [%wr_s{j}_rd5];" in loop
        assert (
            f"mov.u32 %wr_a0, %wr_s{j}_r8;\n\tadd.u32 %wr_a0, %wr_a0, %wr_off;\n\tst.shared.f32 [%wr_a0], %wr_s{j}_f2;"
            in loop
        )
        assert f"add.s64 %wr_s{j}_rd5, %wr_s{j}_rd5, 512;" in loop
        assert f"mov.u32 %wr_s{j}_r2, %wr_s{j}_wr_vtid;" in producer  # share j's %tid.x
    assert loop.index("mbarrier.arrive") > loop.rindex("st.shared")  # all shares staged before the arrival
    assert loop.count("bra $__wr_p$L__loop;") == 1 and "@%wr_s3_p2 bra $__wr_p$L__loop;" in loop
    assert "@%p2 bra $__wr_tail1;" in loop and "@%wr_s1_p2 bra $__wr_tail2;" in loop
    consumer = text.partition("$__wr_producer:")[0]
    assert "%wr_s1_" not in consumer.split("mov.u32 %wr_tid, %tid.x;")[1]  # the consumers' code is as for P = N/32


def test_thread_dependent_branches_in_staging_get_a_label_per_share() -> None:
    """Divergent control inside the staging part (half the threads skip their store) is each share's own: the
    copies branch to their own labels, and the last share's skip lands before the arrival; ptxas accepts it."""
    text = _planted(
        "\tld.global.nc.f32 \t%f2, [%rd5];\n\tst.shared.f32 \t[%r8], %f2;\n",
        "\tsetp.lt.u32 %p3, %r2, 64;\n\t@%p3 bra $L__skip;\n\tld.global.nc.f32 \t%f2, [%rd5];\n"
        "\tst.shared.f32 \t[%r8], %f2;\n$L__skip:\n",
    )
    out, report = _split(text, producer_warps=1)
    assert report.rewrites, report.skipped
    loop = out[out.index("$__wr_p$L__loop:") :]
    assert "@%p3 bra $__wr_staging1;" in loop and "@%wr_s1_p3 bra $__wr_staging2;" in loop
    assert "@%wr_s3_p3 bra $__wr_p$L__skip;" in loop and loop.count("$__wr_p$L__skip:") == 1
    assert loop.index("$__wr_p$L__skip:") < loop.index("mbarrier.arrive")
    compile_ptx(out, "skip.ptx", "sm_90")


def test_local_memory_in_the_producers_code_is_refused_for_shares() -> None:
    """One producer thread has one local frame: a share's st.local would clobber another's before it reads it back.
    With P = N/32 (one share) the split stands; with fewer producers it is refused, saying why."""
    text = _planted("\tmov.u32 \t%r3, %ctaid.x;\n", "\tmov.u32 \t%r3, %ctaid.x;\n\tst.local.u32 [scratch], %r2;\n")
    text = text.replace(
        "\tld.global.nc.f32 \t%f2, [%rd5];", "\tld.local.u32 %r13, [scratch];\n\tld.global.nc.f32 \t%f2, [%rd5];"
    ).replace(".shared .align 4 .b8 tile[512];", ".shared .align 4 .b8 tile[512];\n\t.local .align 4 .b8 scratch[4];")
    _, report = _split(text, producer_warps=4)
    assert report.rewrites, report.skipped
    _, report = _split(text, producer_warps=2)
    assert not report.rewrites
    assert report.skipped[0].reason.startswith("the producers' code uses local memory at line ")
    assert "2 shares would share one frame" in report.skipped[0].reason


def test_a_nested_scope_across_the_parts_is_refused() -> None:
    """A `{ }` scope that holds the staging store and the first barrier cannot be copied per share (nor dropped)."""
    text = _planted(
        "\tst.shared.f32 \t[%r8], %f2;\n\tbar.sync \t0;\n", "\t{\n\tst.shared.f32 \t[%r8], %f2;\n\tbar.sync \t0;\n\t}\n"
    )
    for producers in (1, 4):
        _, report = _split(text, producer_warps=producers)
        assert not report.rewrites and "spans the loop's parts" in report.skipped[0].reason


def test_a_nested_scope_inside_the_staging_part_is_copied_per_share() -> None:
    """A scope wholly inside the staging part (nvcc wraps some intrinsics so) is copied per share with its registers."""
    text = _planted(
        "\tst.shared.f32 \t[%r8], %f2;\n",
        "\t{\n\t.reg .f32 %t;\n\tmul.f32 %t, %f2, 0f3F800000;\n\tst.shared.f32 \t[%r8], %t;\n\t}\n",
    )
    out, report = _split(text, producer_warps=2)
    assert report.rewrites, report.skipped
    assert "mul.f32 %wr_s1_t, %wr_s1_f2, 0f3F800000;" in out and ".reg .f32 %wr_s1_t;" in out
    compile_ptx(out, "scoped.ptx", "sm_90")


@pytest.mark.parametrize("producers", [1, 2])
@pytest.mark.parametrize("stages", [2, 4])
def test_fewer_producers_assemble_and_show_mbarriers(producers: int, stages: int) -> None:
    from ptxtool.toolchain.sass import disassemble

    out, report = _split(STAGED, producer_warps=producers, stages=stages)
    compiled = compile_ptx(out, "staged.ptx", "sm_90")
    assert compiled.functions["staged"].spill_bytes == 0
    opcodes = " ".join(i.opcode for i in disassemble(compiled.cubin)["staged"])
    assert "SYNCS.PHASECHK" in opcodes and "SYNCS.ARRIVE" in opcodes


@pytest.mark.parametrize("producers", [1, 2])
@pytest.mark.parametrize(
    ("source", "kernel", "consumers"),
    [("sgemm.cu", "sgemm_tiled", 256), ("stencil.cu", "stencil_tiled", 256), ("attention.cu", "attention_tiled", 128)],
)
def test_fewer_producers_of_nvccs_benchmark_kernels(source: str, kernel: str, consumers: int, producers: int) -> None:
    """nvcc's tiled SGEMM (its fill loop with bounds checks: thread-dependent branches in the staging part), halo
    stencil and K/V loop split with 1 and 2 producer warps: ptxas accepts without spills, the SASS shows SYNCS."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx
    from ptxtool.toolchain.sass import disassemble

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    out, report = _split(text, producer_warps=producers)
    assert [r.kernel for r in report.rewrites] == [kernel], report.skipped
    assert f".reqntid {consumers + 32 * producers}, 1, 1" in out
    compiled = compile_ptx(out, source, "sm_90")
    assert compiled.functions[kernel].spill_bytes == 0
    opcodes = " ".join(i.opcode for i in disassemble(compiled.cubin)[kernel])
    assert "SYNCS.PHASECHK" in opcodes and "SYNCS.ARRIVE" in opcodes


def test_optimize_cli_takes_producer_warps(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ptxtool.cli import main

    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(STAGED)
    args = ["optimize", "--passes", "warp-roles", "--producer-warps", "1", str(source), "-o", str(out)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.output
    assert ".reqntid 160, 1, 1" in out.read_text()
    bad = CliRunner().invoke(main, [*args[:4], "3", *args[5:], "-v"])
    assert "producer warps must divide the 4 consumer warps, not 3" in bad.output


@pytest.mark.parametrize(
    ("source", "kernel", "block"), [("sgemm_ws.cu", "sgemm_ws", 288), ("stencil_ws.cu", "stencil_ws", 288)]
)
def test_hand_written_references_copy_asynchronously(source: str, kernel: str, block: int) -> None:
    """The references the benchmark times the split against: one producer warp whose cp.asyncs (LDGSTS) arrive on
    the ring's full barrier when they land (ARRIVES.LDGSTSBAR), consumers waiting on it (SYNCS.PHASECHK)."""
    from ptxtool.analysis.launch_bounds import block_bounds
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx
    from ptxtool.toolchain.sass import disassemble

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    assert block_bounds(next(k for k in parse(text).kernels if k.name == kernel)).dims[0] == block
    compiled = compile_ptx(text, source, "sm_90")
    assert compiled.functions[kernel].spill_bytes == 0
    opcodes = " ".join(i.opcode for i in disassemble(compiled.cubin)[kernel])
    assert all(o in opcodes for o in ("LDGSTS", "ARRIVES.LDGSTSBAR", "SYNCS.PHASECHK")), opcodes


def test_fuzzed_kernels_with_one_producer_warp_are_refused_or_assemble() -> None:
    """The planted kernel's fixed-seed mutants split with P = 1 and 2: refused with a reason, or split into what
    ptxas accepts, each run under a time bound."""
    for producers in (1, 2):
        outcomes = fuzz_split(1, lambda text, producers=producers: _split(text, producer_warps=producers))
        assert outcomes["split"] and outcomes["refused"], (producers, outcomes)

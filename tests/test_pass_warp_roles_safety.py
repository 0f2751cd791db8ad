"""The warp-role pass's safety rules shared by both variants (issue 16's review, tests/test_breakpipe.py): what the
split refuses as the pipeline does, the launch bounds both read, the evaluator's exact opcodes and the CLI's usage
error."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_breakpipe import CACHE_VOLATILE, IRREDUCIBLE, LABELS_DIFFERING_BY_DOLLAR, NO_PERCENT, _many_stores
from test_pass_warp_roles import STAGED

from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx


def _kernel(directive: str) -> str:
    return STAGED.replace(".reqntid 128, 1, 1", directive, 1)


@pytest.mark.parametrize(
    ("directive", "limits"),
    [
        (".reqntid 16, 8, 1", (16, 8, 1)),  # exact: each dimension is the launch's
        (".maxntid 16, 8, 1", (128, 128, 64)),  # the product bounds each dimension (z at most 64 in hardware)
        (".maxntid 128", (128, 128, 64)),
        (".maxntid 1024, 1, 1", (1024, 1024, 64)),
    ],
)
def test_tid_limits(directive: str, limits: tuple[int, int, int]) -> None:
    bounds = block_bounds(parse(_kernel(directive)).kernels[0])
    assert bounds is not None and bounds.tid_limits == limits


def _split_refusal(text: str) -> str:
    _, report = warp_roles(parse(text), RoleSettings())
    assert not report.rewrites and report.skipped, "split a kernel it must refuse"
    return report.skipped[0].reason


def test_split_refuses_cache_volatile_loads() -> None:
    """The split's producers run ahead too: a `.cv` load (memory another agent rewrites) is refused in either."""
    assert ".cv" in _split_refusal(CACHE_VOLATILE)


def test_split_refuses_irreducible_cycles() -> None:
    assert "irreducible" in _split_refusal(IRREDUCIBLE)


def test_counted_barrier_says_what_is_wrong() -> None:
    text = STAGED.replace("\tbar.sync \t0;\n\tld.shared", "\tbar.sync \t0, 128;\n\tld.shared", 1)
    for settings in (RoleSettings(), RoleSettings(variant="pipeline")):
        _, report = warp_roles(parse(text), settings)
        reason = report.skipped[0].reason
        assert "bar.sync at line" not in reason and "not a plain CTA barrier" in reason and "needs" not in reason


@pytest.mark.parametrize("kind", ["f16"])
def test_entry_copies_are_bit_typed(kind: str) -> None:
    """A half register read by the ahead copy (the loop's trip count kept in one) is copied with mov.b16."""
    text = STAGED.replace("\t.reg .f32 \t%f<6>;\n", f"\t.reg .f32 \t%f<6>;\n\t.reg .{kind} \t%h<2>;\n", 1)
    text = text.replace("\tmov.u32 \t%r12, 0;\n", "\tmov.u32 \t%r12, 0;\n\tmov.b16 \t%h1, 0x3C00;\n", 1)
    text = text.replace("\tadd.s32 \t%r12, %r12, 1;\n", "\tmov.b16 \t%h1, %h1;\n\tadd.s32 \t%r12, %r12, 1;\n", 1)
    out, report = warp_roles(parse(text), RoleSettings(variant="pipeline"))
    assert report.rewrites, report.skipped
    written = format_module(out)
    assert f"mov.{kind}" not in written and "mov.b16 %wr_s1_h1, %h1;" in written
    compile_ptx(written, "pipelined.ptx", "sm_90")


@pytest.mark.parametrize("producer_warps", [None, 2])
def test_split_copies_of_names_without_percent_and_dollar_labels_assemble(producer_warps: int | None) -> None:
    """Share copies of `r5` and `%r5`, `$st` and `st` stay distinct (producers.share_name, emit.own_label)."""
    for text in (NO_PERCENT, LABELS_DIFFERING_BY_DOLLAR):
        out, report = warp_roles(parse(text), RoleSettings(producer_warps=producer_warps))
        if report.rewrites:
            compile_ptx(format_module(out), "split.ptx", "sm_90")


def test_many_stores_in_a_declared_block_are_fast() -> None:
    """256 staging stores in a block of undeclared size (1,024 threads evaluated): the evaluator computes each
    definition once for all threads, so the decision takes well under the 5 s bound (89 s before)."""
    import time

    start = time.monotonic()
    _, report = warp_roles(parse(_many_stores(256)), RoleSettings(variant="pipeline"))
    assert time.monotonic() - start < 5
    assert report.rewrites or report.skipped


def test_producer_warps_with_the_pipeline_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ptxtool.cli import main

    source = tmp_path / "staged.ptx"
    source.write_text(STAGED)
    args = ["optimize", "--passes", "warp-roles", "--variant", "pipeline", "--producer-warps", "2", str(source)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 2 and "--producer-warps is the split's setting" in run.output, run.output
    assert "Traceback" not in run.output


_STAGE = "\tld.global.nc.f32 \t%f2, [%rd5];\n\tst.shared.f32 \t[%r8], %f2;\n\tbar.sync \t0;\n"


def _guarded(condition: str) -> str:
    """The planted kernel with its staging (load and store) skipped where `condition` sets %p3."""
    assert _STAGE in STAGED
    return STAGED.replace(
        _STAGE,
        f"{condition}\t@%p3 bra \t$L__skip;\n\tld.global.nc.f32 \t%f2, [%rd5];\n\tst.shared.f32 \t[%r8], %f2;\n"
        "$L__skip:\n\tbar.sync \t0;\n",
        1,
    )


def _simulated(text: str, seed: int = 0, trips: int = 4) -> bytes:
    import random
    import struct

    from ptx_sim import run_grid

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(trips * 128))
    memory = bytearray(data) + bytearray(128 * 4)
    run_grid(text, 128, 1, [0, len(data), trips], memory, seed)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize(
    "condition",
    [
        "\tsetp.ge.u32 \t%p3, %r2, 64;\n",  # %tid.x >= 64, decided in the loop from a register set before it
        "\tmov.u32 \t%r13, %tid.x;\n\tand.b32 \t%r13, %r13, 3;\n\tsetp.eq.u32 \t%p3, %r13, 1;\n",  # from %tid.x there
        "\tsetp.ge.u32 \t%p3, %r5, 1000;\n",  # a bound on the block's first index (%ctaid.x, the parameter n)
    ],
)
def test_trip_invariant_guard_is_pipelined(condition: str) -> None:
    """A staging store skipped by some threads on every trip (its guard depends on %tid, %ctaid, parameters only):
    a byte it skips is one that thread never writes in the loop, so the ring's slot holds what the input's tile
    holds; the simulator gives the input's bits for S = 2, 3 and every landing order."""
    text = _guarded(condition)
    compile_ptx(text, "input.ptx", "sm_90")
    expected = _simulated(text)
    for stages in (2, 3):
        out, report = warp_roles(parse(text), RoleSettings(variant="pipeline", stages=stages))
        assert report.rewrites, report.skipped
        written = format_module(out)
        compile_ptx(written, "pipelined.ptx", "sm_90")
        assert all(_simulated(written, seed) == expected for seed in range(3))


@pytest.mark.parametrize(
    "condition",
    [
        "\tsetp.ge.u32 \t%p3, %r12, 1;\n",  # the trip counter: stores on trip 0 only
        "\tmov.u32 \t%r13, %clock;\n\tand.b32 \t%r13, %r13, 1;\n\tsetp.eq.u32 \t%p3, %r13, 0;\n",  # a clock
        "\tld.global.nc.u32 \t%r13, [%rd5+4];\n\tsetp.eq.u32 \t%p3, %r13, 0;\n",  # a loaded flag
    ],
)
def test_trip_variant_guard_is_refused(condition: str) -> None:
    text = _guarded(condition)
    compile_ptx(text, "input.ptx", "sm_90")
    out, report = warp_roles(parse(text), RoleSettings(variant="pipeline"))
    assert not report.rewrites, "pipelined a store skipped on some trips only"
    assert "may go another way on another trip" in report.skipped[0].reason, report.skipped


@pytest.mark.parametrize("variant", ["split", "pipeline"])
def test_generic_staging_read_of_a_flag_the_loop_writes_locally(variant: str) -> None:
    """LOCAL_FLAG with the staging part's flag read through a generic ld (it may be the local flag): refused."""
    from test_breakpipe import LOCAL_FLAG

    text = LOCAL_FLAG.replace("\tld.local.u32 \t%r15, [%rd9];\n", "\tld.u32 \t%r15, [%rd9];\n", 1)
    assert text != LOCAL_FLAG
    _, report = warp_roles(parse(text), RoleSettings(variant=variant))
    assert not report.rewrites and "reads local memory the loop may write" in report.skipped[0].reason

"""Adversarial review (breakit2) of rematerialization (passes/registers) and the warp-role split with P producer
warps and setmaxnreg (passes/warp_roles). A confirmed break is an `xfail(strict=True)` test whose assertion is what
a correct pass must do; an attempt the passes handle correctly is a plain test (a regression test)."""

from __future__ import annotations

import re
import time

import pytest
from test_pass_registers_remat import TABLE_NC, kernel, remat_module
from test_pass_warp_roles import STAGED

from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse


def _planted(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _split(text: str, **settings) -> tuple[str | None, tuple[str, ...]]:
    """The split module's text (None when nothing was split) and the refusal reasons."""
    out, report = warp_roles(parse(text), RoleSettings(**settings))
    return (format_module(out) if report.rewrites else None), tuple(s.reason for s in report.skipped)


def _producers(text: str) -> str:
    """The producers' code of a split kernel (after the role branch)."""
    return text.partition("$__wr_producer:")[2]


def _assembles(assemble, text: str) -> None:
    cubin, messages = assemble(text)
    assert cubin is not None, messages


# ---------------------------------------------------------------------------------------------------------------
# Warp roles: confirmed breaks

PLAIN_LOAD = ("\tld.global.nc.f32 \t%f2, [%rd5];", "\tld.global.f32 \t%f2, [%rd5];")
BEFORE_LOOP = "\tmov.u32 \t%r12, 0;\n"
SPIN = "$L__spin:\n\t{load} \t%r13, [%rd3];\n\tsetp.eq.u32 \t%p3, %r13, 0;\n\t@%p3 bra \t$L__spin;\n{fence}"
# the loop's trip count read from memory before the loop (%r13 instead of the parameter n)
TRIP_R13 = [("setp.eq.s32 \t%p1, %r1, 0;", "setp.eq.s32 \t%p1, %r13, 0;")]
TRIP_R13 += [("setp.lt.u32 \t%p2, %r12, %r1;", "setp.lt.u32 \t%p2, %r12, %r13;")]


@pytest.mark.parametrize("load", ["ld.volatile.global.u32", "ld.relaxed.gpu.global.u32"])
def test_producers_keep_the_load_that_gives_the_trip_count(load: str, assemble) -> None:
    """`ld.volatile.global.u32 %r13, [count]` (nvcc's code for a `volatile int *`): the consumers run %r13 trips,
    the producers test a register nothing wrote (ptxas 13.5's SASS: the producers' ISETP reads R3, left from the
    role prologue). Fewer producer trips: consumers wait on full forever; more: producers wait on empty forever."""
    text = _planted(STAGED, (BEFORE_LOOP, BEFORE_LOOP + f"\t{load} \t%r13, [%rd3];\n"), *TRIP_R13)
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("before the loop defines a register the producers" in r for r in reasons), reasons


def test_producers_keep_a_relaxed_spin_and_its_fence(assemble) -> None:
    spin = SPIN.format(load="ld.relaxed.gpu.global.u32", fence="\tfence.acq_rel.gpu;\n")
    text = _planted(STAGED, PLAIN_LOAD, (BEFORE_LOOP, BEFORE_LOOP + spin))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("ld.relaxed.gpu.global.u32 at line" in r for r in reasons), reasons


def test_producers_do_not_drop_an_acquire_whose_value_nothing_reads(assemble) -> None:
    """`ld.acquire` before the loop orders the loads after it even when nothing reads its value: the producers
    would drop it (it defines a register they could not replay) and load unordered. Refused."""
    text = _planted(STAGED, PLAIN_LOAD, (BEFORE_LOOP, BEFORE_LOOP + "\tld.acquire.gpu.global.u32 \t%r13, [%rd3];\n"))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("ld.acquire.gpu.global.u32 at line" in r for r in reasons), reasons


def test_producers_do_not_replay_setmaxnreg_before_the_loop(assemble) -> None:
    """The kernel's own setmaxnreg before the loop (a resource change): the producers would replay it beside the
    split's own register moves. Refused."""
    text = _planted(
        STAGED.replace(".target sm_90", ".target sm_90a"),
        (BEFORE_LOOP, BEFORE_LOOP + "\tsetmaxnreg.inc.sync.aligned.u32 \t240;\n"),
        (".reqntid 128, 1, 1", ".reqntid 128, 1, 1\n.maxnreg 128"),
    )
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("setmaxnreg.inc.sync.aligned.u32 at line" in r for r in reasons), reasons


def test_producers_replay_a_fence_before_the_loop(assemble) -> None:
    """A fence (no register, no memory) before the loop is replayed by the producers, before their loads."""
    text = _planted(STAGED, PLAIN_LOAD, (BEFORE_LOOP, BEFORE_LOOP + "\tfence.acq_rel.gpu;\n"))
    out, reasons = _split(text)
    assert out is not None, reasons
    producers = _producers(out)
    assert "fence.acq_rel.gpu;" in producers.partition("$__wr_p$L__loop:")[0]
    _assembles(assemble, out)


@pytest.mark.parametrize(
    "read",
    [
        "\tmov.u16 \t%rs1, %tid.x;\n\tcvt.u32.u16 \t%r2, %rs1;",  # refused: a 16-bit read
        "\tcvt.u16.u32 \t%rs1, %tid.x;\n\tcvt.u32.u16 \t%r2, %rs1;",  # split: %tid.x read as its 32 bits
    ],
)
def test_a_16_bit_read_of_tid_is_split_into_what_ptxas_accepts_or_refused(read: str, assemble) -> None:
    """`mov.u16 %rs1, %tid.x` was renamed to the 32-bit %wr_vtid in the producers and ptxas rejected the split
    (optimize: 'a bug in ptxtool'); a read at another width than 32 bits is refused now."""
    text = _planted(
        STAGED,
        ("\tmov.u32 \t%r2, %tid.x;", read),
        (".reg .pred \t%p<4>;", ".reg .pred \t%p<4>;\n\t.reg .b16 \t%rs<4>;"),
    )
    _assembles(assemble, text)
    out, reasons = _split(text)
    if "mov.u16" in read:
        assert out is None and any("reads %tid.x as a 16-bit value" in r for r in reasons), reasons
    else:
        assert out is not None, reasons
        _assembles(assemble, out)


@pytest.mark.parametrize("read", ["mov.v4.u32 \t{%r2, %r13, %r15, %r0}, %tid;", "mov.u32 \t%r2, %ntid.x;"])
def test_producers_reading_tid_as_a_vector_stage_their_own_tid(read: str, assemble) -> None:
    """ptxas accepts `mov.v4.u32 {%r2, ..}, %tid`. The producers replay it unchanged, so their %r2 is their real
    %tid.x (128..255), not %wr_vtid (0..127): they load a[base + 128 + t] and store it at ring slot offset
    4·(128 + t), i.e. into the next slot (slot 1: past the 1024-byte ring), while tile[t] is never written.
    Shape registers are matched by name now, not by a prefix: refused (%ntid.x, the grown block's size, too)."""
    text = _planted(STAGED, ("\tmov.u32 \t%r2, %tid.x;", f"\t{read}"))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("which the grown block would change" in r for r in reasons), reasons


def test_producers_keep_griddepcontrol_wait(assemble) -> None:
    """Consumers wait (griddepcontrol.wait) but never load the tiles; producers load them without waiting. Any
    read the kernel does after the wait must stay after it in whichever role does it; refusing is also correct."""
    text = _planted(STAGED, PLAIN_LOAD, (BEFORE_LOOP, BEFORE_LOOP + "\tgriddepcontrol.wait;\n"))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is not None, reasons
    producers = _producers(out)
    assert "griddepcontrol.wait;" in producers.partition("$__wr_p$L__loop:")[0]
    _assembles(assemble, out)


def test_producers_keep_an_acquire_spin_before_the_loop(assemble) -> None:
    """`spin: ld.acquire.gpu [flag]; until flag != 0` then the tile loop: the producers' copy is `spin: setp %p3,
    %r13, 0; @%p3 bra spin` with %r13 never written; SASS (ptxas 13.5): the producers' path has no LDG.STRONG.GPU,
    they load tile data another grid has not published yet (or spin forever where %r13 happens to be 0)."""
    spin = SPIN.format(load="ld.acquire.gpu.global.u32", fence="")
    text = _planted(STAGED, PLAIN_LOAD, (BEFORE_LOOP, BEFORE_LOOP + spin))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("ld.acquire.gpu.global.u32 at line" in r for r in reasons), reasons


def test_staging_is_not_run_ahead_of_an_acquire_in_the_compute_part(assemble) -> None:
    """Trip k polls `flag > k` (ld.acquire.gpu) after computing, so trip k+1's plain loads see what the other agent
    published. After the split, the producers pass empty[1] at once (first S trips) and load tile 1 before any
    consumer's acquire; later trips only chain through the consumers' acquire of flag > k+1-S. Must be refused."""
    poll = (
        "$L__poll:\n\tld.acquire.gpu.global.u32 \t%r13, [%rd3];\n\tsetp.le.u32 \t%p3, %r13, %r12;\n"
        "\t@%p3 bra \t$L__poll;\n"
    )
    fma = "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n"
    text = _planted(STAGED, PLAIN_LOAD, (fma, fma + poll))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("in the compute part: producers running ahead" in r for r in reasons), reasons


@pytest.mark.parametrize("where", ["compute", "tail"])
def test_staging_is_not_run_ahead_of_a_fence_in_the_loop(where: str, assemble) -> None:
    """A relaxed poll's fence (here alone) in the compute part or the tail orders the next trip's loads: refused."""
    at = FMA if where == "compute" else "\tadd.s32 \t%r12, %r12, 1;\n"
    text = _planted(STAGED, PLAIN_LOAD, (at, at + "\tfence.acq_rel.gpu;\n"))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any(f"in the {where} part" in r and "fence.acq_rel" in r for r in reasons), reasons


# ---------------------------------------------------------------------------------------------------------------
# Warp roles: attempts handled correctly (refused)

FMA = "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n"

REFUSED = {
    # the trip count read back from memory the thread itself wrote before the loop (producers drop the store)
    "own_store_read_back": (
        [
            (
                BEFORE_LOOP,
                BEFORE_LOOP + "\tcvta.to.global.u64 \t%rd9, %rd2;\n\tst.global.u32 \t[%rd9], %r1;\n"
                "\tld.global.u32 \t%r13, [%rd9];\n",
            ),
            *TRIP_R13,
        ],
        "the code before the loop reads global memory the kernel may write",
    ),
    # a CTA reduction (bar.red) gives the trip count: producers would drop it
    "bar_red_trip_count": (
        [
            (BEFORE_LOOP, BEFORE_LOOP + "\tsetp.lt.u32 \t%p3, %r2, %r1;\n\tbar.red.popc.u32 \t%r13, 0, %p3;\n"),
            *TRIP_R13,
        ],
        "bar.red.popc.u32 is not a plain CTA barrier",
    ),
    # a warp vote gives a per-warp trip count
    "vote_trip_count": (
        [
            (
                BEFORE_LOOP,
                BEFORE_LOOP + "\tsetp.lt.u32 \t%p3, %r2, %r1;\n\tvote.sync.ballot.b32 \t%r13, %p3, -1;\n"
                "\tpopc.b32 \t%r13, %r13;\n",
            ),
            *TRIP_R13,
        ],
        "trip count not uniform across the CTA",
    ),
    # the tail steps the counter by a value the compute part read from the tile
    "tail_steps_by_computed": (
        [
            (FMA, FMA + "\tld.shared.u32 \t%r13, [tile];\n\tand.b32 \t%r13, %r13, 1;\n"),
            ("\tadd.s32 \t%r12, %r12, 1;\n", "\tadd.s32 \t%r12, %r12, 1;\n\tadd.s32 \t%r12, %r12, %r13;\n"),
        ],
        "the tail part uses %r13, which the compute part computes",
    ),
    # the tail moves the staging pointer by a computed stride
    "tail_pointer_by_computed": (
        [
            (FMA, FMA + "\tld.shared.u32 \t%r13, [tile];\n\tand.b32 \t%r13, %r13, 4;\n\tcvt.u64.u32 \t%rd9, %r13;\n"),
            ("\tadd.s64 \t%rd5, %rd5, 512;\n", "\tadd.s64 \t%rd5, %rd5, 512;\n\tadd.s64 \t%rd5, %rd5, %rd9;\n"),
        ],
        "the tail part uses %rd9, which the compute part computes",
    ),
    # the staging pointer is advanced in the compute part, which the producers do not run
    "compute_advances_staging_pointer": (
        [("\tadd.s64 \t%rd5, %rd5, 512;\n", ""), (FMA, FMA + "\tadd.s64 \t%rd5, %rd5, 512;\n")],
        "the staging part uses %rd5, which the compute part computes",
    ),
    # the staging load's guard is decided by the compute part (data-dependent early stop of the loads)
    "staging_guard_from_compute": (
        [
            (FMA, FMA + "\tsetp.gt.f32 \t%p3, %f1, 0f42C80000;\n"),
            (
                "\tld.global.nc.f32 \t%f2, [%rd5];",
                "\tmov.f32 \t%f2, 0f00000000;\n\t@!%p3 ld.global.nc.f32 \t%f2, [%rd5];",
            ),
            (BEFORE_LOOP, BEFORE_LOOP + "\tsetp.ne.s32 \t%p3, %r1, %r1;\n"),
        ],
        "the staging part uses %p3, which the compute part computes",
    ),
}


REFUSED |= {
    # named barrier ids the pass uses for the consumers (1), by any spelling; a register id
    "named_barrier_1": ([(BEFORE_LOOP, BEFORE_LOOP + "\tbar.sync \t1;\n")], "not a plain CTA barrier"),
    "barrier_aligned_1": (
        [(BEFORE_LOOP, BEFORE_LOOP + "\tbarrier.sync.aligned \t1, 128;\n")],
        "not a plain CTA barrier",
    ),
    "bar_arrive": ([(BEFORE_LOOP, BEFORE_LOOP + "\tbar.arrive \t2, 128;\n")], "not a plain CTA barrier"),
    "barrier_id_in_register": (
        [(BEFORE_LOOP, BEFORE_LOOP + "\tmov.u32 \t%r13, 0;\n\tbar.sync \t%r13;\n")],
        "not a plain CTA barrier",
    ),
    # producers would skip a cluster barrier every thread of the cluster must arrive at (deadlock)
    "cluster_barrier": (
        [(BEFORE_LOOP, BEFORE_LOOP + "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n")],
        "not a plain CTA barrier",
    ),
    "bar_warp_sync": ([(BEFORE_LOOP, BEFORE_LOOP + "\tbar.warp.sync \t-1;\n")], "not a plain CTA barrier"),
    # an mbarrier of the kernel's own
    "own_mbarrier": (
        [
            ("tile[512];", "tile[512];\n\t.shared .align 8 .b64 mymbar;"),
            (BEFORE_LOOP, BEFORE_LOOP + "\tmbarrier.init.shared.b64 \t[mymbar], 128;\n"),
        ],
        "shared memory is used outside the loop",
    ),
    # block sizes: not whole warps, not declared
    "block_of_100": ([(".reqntid 128, 1, 1", ".reqntid 100, 1, 1")], "not a whole number of warps"),
    "block_undeclared": ([(".reqntid 128, 1, 1\n", "")], "not declared one-dimensional"),
    # the staging part reads the tile it refills (the previous trip's value, in the ring another slot's)
    "staging_reads_the_tile": (
        [
            (
                "\tst.shared.f32 \t[%r8], %f2;\n",
                "\tld.shared.f32 \t%f4, [%r8];\n\tadd.f32 \t%f2, %f2, %f4;\n\tst.shared.f32 \t[%r8], %f2;\n",
            )
        ],
        "the staging part reads shared memory",
    ),
    # a uniform break out of the compute part: producers would stage on and wait forever
    "break_in_compute": (
        [
            (BEFORE_LOOP, BEFORE_LOOP + "\tshr.u32 \t%r13, %r1, 1;\n"),
            (FMA, FMA + "\tsetp.eq.u32 \t%p3, %r12, %r13;\n\t@%p3 bra \t$L__done;\n"),
        ],
        "a branch leaves the loop's compute part",
    ),
    # the staged loop inside an outer loop: producers return after the first outer trip
    "staged_loop_in_an_outer_loop": (
        [
            (
                "\tmov.f32 \t%f1, 0f00000000;\n\tmov.u32 \t%r12, 0;\n",
                "\tmov.f32 \t%f1, 0f00000000;\n\tmov.u32 \t%r13, 0;\n$L__outer:\n\tmov.u32 \t%r12, 0;\n"
                "\tadd.s64 \t%rd5, %rd3, %rd4;\n",
            ),
            (
                "$L__done:\n",
                "$L__done:\n\tadd.s32 \t%r13, %r13, 1;\n\tsetp.lt.u32 \t%p3, %r13, 2;\n\t@%p3 bra \t$L__outer;\n",
            ),
        ],
        "barrier inside an inner loop",
    ),
    # a store before the loop to `out`, which may be `a`, read by the staging part's plain load
    "store_before_the_loop_through_an_alias": (
        [
            PLAIN_LOAD,
            (
                BEFORE_LOOP,
                BEFORE_LOOP + "\tcvta.to.global.u64 \t%rd9, %rd2;\n\tadd.s64 \t%rd9, %rd9, %rd4;\n"
                "\tst.global.f32 \t[%rd9], 0f3F800000;\n",
            ),
        ],
        "the staging part reads memory without .nc and the kernel writes global memory",
    ),
    # ordered loads and atomics in the staging part
    "volatile_staging_load": (
        [("\tld.global.nc.f32 \t%f2, [%rd5];", "\tld.volatile.global.f32 \t%f2, [%rd5];")],
        "in the staging part (producers must not order or wait)",
    ),
    "atomic_staging": (
        [("\tld.global.nc.f32 \t%f2, [%rd5];", "\tatom.global.add.f32 \t%f2, [%rd5], 0f00000000;")],
        "in the staging part (producers must not order or wait)",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_warp_roles_refuses(case: str, assemble) -> None:
    edits, reason = REFUSED[case]
    text = _planted(STAGED, *edits)
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any(reason in r for r in reasons), reasons


# ---------------------------------------------------------------------------------------------------------------
# Rematerialization: attempts handled correctly (tests/test_pass_registers_remat.py's kernel: %rd4, a pointer made
# before the loop, is read in it; `before` makes %rd4, `inside` is planted in the loop body)

CHANGING_SPECIALS = {
    "globaltimer": "\tmov.u64 %rd10, %globaltimer;\n\tadd.s64 %rd4, %rd2, %rd10;",
    "clock64": "\tmov.u64 %rd10, %clock64;\n\tadd.s64 %rd4, %rd2, %rd10;",
    "smid": "\tmov.u32 %r5, %smid;\n\tmul.wide.u32 %rd10, %r5, 4;\n\tadd.s64 %rd4, %rd2, %rd10;",
    "nwarpid": "\tmov.u32 %r5, %nwarpid;\n\tmul.wide.u32 %rd10, %r5, 4;\n\tadd.s64 %rd4, %rd2, %rd10;",
    "carry_chain": "\tmov.b64 {%r5, %r6}, %rd2;\n\tadd.cc.u32 %r7, %r5, 16;\n\taddc.u32 %r8, %r6, 0;\n"
    "\tmov.b64 %rd4, {%r7, %r8};",
}


@pytest.mark.parametrize("case", sorted(CHANGING_SPECIALS))
def test_remat_never_rereads_a_changing_special_register_or_the_carry_flag(case: str, assemble) -> None:
    text = kernel(CHANGING_SPECIALS[case])
    _assembles(assemble, text)
    out, done = remat_module(text)
    assert "%rd4" not in {r.register for r in done["k"]}
    _assembles(assemble, out)


def test_remat_rereads_laneid(assemble) -> None:
    """%laneid is one value per thread for the launch: recomputing from it is allowed (and assembles)."""
    text = kernel("\tmov.u32 %r5, %laneid;\n\tmul.wide.u32 %rd10, %r5, 4;\n\tadd.s64 %rd4, %rd2, %rd10;")
    out, done = remat_module(text)
    assert "%rd4" in {r.register for r in done["k"]}
    _assembles(assemble, out)


OBSERVING = {
    # programmatic dependent launch: the table may be written by the grid this one waits for
    "griddepcontrol_wait": ("\tgriddepcontrol.wait;", ""),
    # a bulk store by the async proxy may write the table
    "bulk_store": ("\tcp.async.bulk.global.shared::cta.bulk_group [%rd6], [sm], 16;", ".shared .align 16 .b8 sm[64];"),
}


@pytest.mark.parametrize("case", sorted(OBSERVING))
def test_remat_never_reloads_a_nc_table_past_other_agents_writes(case: str, assemble) -> None:
    inside, globals_ = OBSERVING[case]
    text = kernel(TABLE_NC, inside, globals_)
    _assembles(assemble, text)
    out, done = remat_module(text)
    assert "%rd4" not in {r.register for r in done["k"]}
    _assembles(assemble, out)


def test_remat_never_reloads_through_a_generic_pointer_to_local_memory_the_loop_writes(assemble) -> None:
    before = (
        "\tmov.u64 %rd10, loc;\n\tcvta.local.u64 %rd11, %rd10;\n\tst.local.u64 [loc], %rd2;\n\tld.u64 %rd4, [%rd11];"
    )
    text = kernel(before, "\tst.local.u64 [loc], %rd6;")
    text = text.replace(".reg .pred %p<4>;", ".reg .pred %p<4>;\n\t.local .align 8 .b8 loc[8];", 1)
    _assembles(assemble, text)
    out, done = remat_module(text)
    assert "%rd4" not in {r.register for r in done["k"]}


def test_remat_beside_a_nested_block_that_shadows_its_operands(assemble) -> None:
    """The loop holds a `{ }` block redeclaring %rd1..%rd3 (the table's registers): the recomputation stands at
    the top level, before the read, where the names mean the outer registers; the block is left as it was."""
    nested = (
        "\t{\n\t.reg .b64 %rd1, %rd2, %rd3;\n\tmov.u64 %rd1, 0;\n\tmov.u64 %rd2, 8;\n\tmov.u64 %rd3, 16;\n"
        "\tadd.s64 %rd1, %rd1, %rd3;\n\t}"
    )
    text = kernel(TABLE_NC, nested)
    out, done = remat_module(text)
    assert "%rd4" in {r.register for r in done["k"]}
    loop = out[out.index("$LOOP:") : out.index("@%p1 bra $LOOP;")]
    block = loop[loop.index("{") : loop.index("}")]
    assert "remat" not in block and loop.index("ld.global.u64 %remat_") < loop.index("{")
    _assembles(assemble, out)


def test_remat_never_rereads_a_device_functions_param(assemble) -> None:
    """A `.func`'s `.param` is the caller's argument area (not the kernel's read-only parameters): not reread."""
    text = kernel("\tmov.u64 %rd4, %rd2;").replace(".visible .entry k(", ".visible .func k(")
    _assembles(assemble, text)
    _, done = remat_module(text)
    assert not {"%rd4", "%rd2", "%r1"} & {r.register for r in done["k"]}


def test_wgmma_descriptors_follow_the_ring_slot(assemble) -> None:
    """`%desc` = (tile >> 4) & 0x3FFF | 1 << 32 before the loop; the consumers' wgmma reads `%desc` unchanged
    (`__wr_ring+0`) while trip k is staged into slot k mod 2: odd trips multiply slot 0 (stale, or being refilled
    for trip k+1 after the consumers' arrival on empty). Either the descriptor moves with the slot or the split is
    refused."""
    text = STAGED.replace(".target sm_90", ".target sm_90a")
    text = _planted(
        text,
        (".reg .b64 \t%rd<10>;", ".reg .b64 \t%rd<10>;\n\t.reg .f32 \t%acc<4>;\n\t.reg .b64 \t%desc;"),
        (
            "\tmov.f32 \t%f1, 0f00000000;\n",
            "\tmov.f32 \t%f1, 0f00000000;\n\tcvt.u64.u32 \t%desc, %r6;\n\tshr.u64 \t%desc, %desc, 4;\n"
            "\tand.b64 \t%desc, %desc, 16383;\n\tor.b64 \t%desc, %desc, 4294967296;\n"
            + "".join(f"\tmov.f32 \t%acc{j}, 0f00000000;\n" for j in range(4)),
        ),
        (
            FMA,
            FMA + "\twgmma.fence.sync.aligned;\n\twgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
            "{%acc0, %acc1, %acc2, %acc3}, %desc, %desc, 1, 1, 1;\n\twgmma.commit_group.sync.aligned;\n"
            "\twgmma.wait_group.sync.aligned 0;\n",
        ),
        ("\tst.global.f32 \t[%rd8], %f1;\n", "\tadd.f32 \t%f1, %f1, %acc0;\n\tst.global.f32 \t[%rd8], %f1;\n"),
    )
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("wgmma.mma_async" in r and "ring slot" in r for r in reasons), reasons


@pytest.mark.parametrize("first", [True, False])
def test_a_shared_address_loaded_from_the_tile_is_refused(first: bool, assemble) -> None:
    """`ld.shared.u32 %r11, [%r11]`: the next address is data read from the tile (an absolute shared address the
    staging stored), not computed from the buffer's address; the ring would add the slot's offset to it. Refused,
    whether the load comes before or after the read through %r11 (its definition is not a use as data)."""
    read, chase = "\tld.shared.f32 \t%f3, [%r11];\n", "\tld.shared.u32 \t%r11, [%r11];\n"
    text = _planted(STAGED, (read, chase + read if first else read + chase))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("a shared address computed from something else" in r for r in reasons), reasons


def test_a_shared_address_stored_to_memory_is_refused(assemble) -> None:
    """The tile's address written to global memory (for another kernel, a debug dump) escapes the ring: refused."""
    store = "\tst.global.f32 \t[%rd8], %f1;\n"
    text = _planted(STAGED, (store, store + "\tst.global.u32 \t[%rd8+4], %r8;\n"))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("st.global.u32 takes a value computed from a shared buffer" in r for r in reasons)


def test_setmaxnreg_is_refused_beside_minnctapersm(assemble) -> None:
    """.minnctapersm 2 lets ptxas allocate fewer registers than the .maxnreg the pool arithmetic assumes: the
    consumers' setmaxnreg.inc could then wait forever. Refused."""
    text = _planted(
        STAGED.replace(".target sm_90", ".target sm_90a"), (".reqntid 128, 1, 1", ".reqntid 128, 1, 1\n.minnctapersm 2")
    )
    _assembles(assemble, text)
    out, reasons = _split(text, setmaxnreg=True)
    assert out is None and any(".minnctapersm" in r for r in reasons), reasons


def test_setmaxnreg_pool_fits_and_producers_stay_under_their_count(assemble) -> None:
    """256 consumers + 4 producer warps with setmaxnreg: the pool arithmetic (N·C + 32P·D <= L·(N + 32P), counts
    multiples of 8 in 24..256, .inc above and .dec below the launch count) holds on the output's own numbers."""
    text = STAGED.replace(".target sm_90", ".target sm_90a")
    text = _planted(
        text,
        (".reqntid 128, 1, 1", ".reqntid 256, 1, 1"),
        ("tile[512]", "tile[1024]"),
        ("shl.b32 \t%r4, %r4, 7;", "shl.b32 \t%r4, %r4, 8;"),
        ("add.s64 \t%rd5, %rd5, 512;", "add.s64 \t%rd5, %rd5, 1024;"),
    )
    out, _ = _split(text, setmaxnreg=True, producer_warps=4)
    assert out is not None
    launch = int(re.search(r"^\.maxnreg (\d+)", out, re.M)[1])
    consumers = int(re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+);", out)[1])
    producers = int(re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+);", out)[1])
    assert all(c % 8 == 0 and 24 <= c <= 256 for c in (launch, consumers, producers))
    assert producers < launch < consumers and launch * 384 <= 65536
    assert 256 * consumers + 128 * producers <= launch * 384
    _assembles(assemble, out)


@pytest.mark.parametrize("leave", ["\t@%p3 exit;\n", "\t@%p3 bra \t$L__end;\n"])
def test_a_barrier_after_some_consumer_warps_exit_is_not_given_a_count(leave: str, assemble) -> None:
    """The counted barrier must count only the threads that can still arrive, or the split must be refused."""
    end = "$L__end:\n" if "bra" in leave else ""
    store = "\tst.global.f32 \t[%rd8], %f1;\n"
    text = _planted(STAGED, (store, "\tsetp.ge.u32 \t%p3, %r2, 64;\n" + leave + "\tbar.sync \t0;\n" + store + end))
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is None and any("a CTA barrier outside the loop some threads may have left" in r for r in reasons)


def test_a_barrier_after_a_uniform_exit_is_still_split(assemble) -> None:
    """An exit every thread of the CTA takes or none (a parameter's test) leaves the barrier after it counted."""
    store = "\tst.global.f32 \t[%rd8], %f1;\n"
    leave = "\tsetp.eq.u32 \t%p3, %r1, 7;\n\t@%p3 exit;\n\tbar.sync \t0;\n"
    out, reasons = _split(_planted(STAGED, (store, leave + store)))
    assert out is not None and "bar.sync 1, 128;" in out, reasons
    _assembles(assemble, out)


SPLIT_OK = {
    # the staging part computes the next counter, the tail (run by both roles) reads it: consumers keep it
    "tail_reads_the_staging_counter": [
        ("\tld.global.nc.f32 \t%f2, [%rd5];\n", "\tadd.s32 \t%r13, %r12, 1;\n\tld.global.nc.f32 \t%f2, [%rd5];\n"),
        (
            "\tadd.s32 \t%r12, %r12, 1;\n\tsetp.lt.u32 \t%p2, %r12, %r1;\n",
            "\tmov.u32 \t%r12, %r13;\n\tsetp.lt.u32 \t%p2, %r13, %r1;\n",
        ),
    ],
    # three buffers of different alignments in one slot, read with v4/v2 at offsets
    "buffers_of_mixed_alignment": [
        (
            "\t.shared .align 4 .b8 tile[512];\n",
            "\t.shared .align 4 .b8 flagbuf[4];\n\t.shared .align 16 .b8 tile[512];\n"
            "\t.shared .align 8 .b8 tileC[24];\n",
        ),
        (
            "\tst.shared.f32 \t[%r8], %f2;\n",
            "\tst.shared.f32 \t[%r8], %f2;\n\tst.shared.f32 \t[flagbuf], %f2;\n\tst.shared.f32 \t[tileC], %f2;\n",
        ),
        (
            "\tld.shared.f32 \t%f3, [%r11];\n",
            "\tld.shared.v4.f32 \t{%f3, %f4, %f5, %f0}, [tile];\n\tld.shared.v2.f32 \t{%f4, %f5}, [tileC+8];\n"
            "\tadd.f32 \t%f3, %f3, %f4;\n",
        ),
    ],
}


@pytest.mark.parametrize("case", sorted(SPLIT_OK))
def test_warp_roles_splits_correctly(case: str, assemble) -> None:
    text = _planted(STAGED, *SPLIT_OK[case])
    _assembles(assemble, text)
    out, reasons = _split(text)
    assert out is not None, reasons
    consumers = out.partition("$__wr_producer:")[0]
    if case == "tail_reads_the_staging_counter":
        loop = consumers[consumers.index("$L__loop:") :]
        assert loop.index("add.s32 %r13, %r12, 1;") < loop.index("setp.lt.u32 %p2, %r13, %r1;")
    else:
        # each slot is a multiple of 16 bytes and every buffer keeps its alignment within it
        ring = int(re.search(r"\.shared \.align 16 \.b8 __wr_ring\[(\d+)\];", out)[1])
        assert ring % 32 == 0
        assert re.search(r"ld\.shared\.v4\.f32 \{[^}]*\}, \[%wr_a\d\+(\d+)\];", consumers)[1] == "16"
        assert re.search(r"ld\.shared\.v2\.f32 \{[^}]*\}, \[%wr_a\d\+(\d+)\];", consumers)[1] == "536"
    _assembles(assemble, out)


def test_a_long_chain_of_address_arithmetic_is_analysed_without_recursion(assemble) -> None:
    """1,500 steps computing the staging addresses (deeper than Python's recursion limit): the split is made, in
    time linear in the chain (it raised RecursionError, an internal bug, when the walk to a loaded source recursed)."""
    chain = "".join("\tadd.s32 \t%r11, %r11, 4;\n\tadd.s32 \t%r8, %r8, 4;\n" for _ in range(1500))
    text = _planted(STAGED, ("\tmov.f32 \t%f1, 0f00000000;\n", chain + "\tmov.f32 \t%f1, 0f00000000;\n"))
    started = time.perf_counter()
    out, reasons = _split(text)
    assert out is not None, reasons
    assert time.perf_counter() - started < 30
    _assembles(assemble, out)

"""Adversarial kernels for the warp-role pass's pipeline variant (issue 16): each is valid PTX that ptxas takes, and
each breaks a rule the pipeline relies on. A test asserts what a correct pass must do (refuse, or write PTX that
ptxas accepts), so it fails while the break stands and passes once it is fixed; where the break changes the bytes a
launch writes, a GPU test (marked gpu, skipped without a driver) runs the input and the pipelined output on random
inputs and compares the bytes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_pass_warp_roles import STAGED

from ptxtool.errors import InputError
from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

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


def _refused(text: str, stages: int = 2) -> None:
    """The input is valid PTX; a correct pass leaves it as it was."""
    compile_ptx(text, "input.ptx", "sm_90")
    out, report = _pipeline(text, stages)
    assert out is None, "pipelined a kernel whose pipeline is wrong"
    assert report.skipped and report.skipped[0].reason


def _refused_or_assembles(text: str, stages: int = 2) -> None:
    """The input is valid PTX; a correct pass refuses it or writes PTX that ptxas takes."""
    compile_ptx(text, "input.ptx", "sm_90")
    out, _ = _pipeline(text, stages)
    if out is not None:
        try:
            compile_ptx(out, "pipelined.ptx", "sm_90")
        except InputError as problem:
            pytest.fail(f"ptxas rejects the pipelined kernel: {problem}")


def _simulated(text: str, seed: int = 0, trips: int = 3) -> bytes:
    """`out` after a simulated launch of one CTA of 128 threads (tests/ptx_sim.py) over random a[]."""
    import random
    import struct

    from ptx_sim import run_grid

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range((trips + 1) * 128))
    memory = bytearray(data) + bytearray(128 * 4)
    run_grid(text, 128, 1, [0, len(data), trips], memory, seed)
    return bytes(memory[len(data) :])


# --- .maxntid bounds the block's thread count, not %tid.x ------------------------------------------------------
# The disjointness proof (copies.py, _Converter.enumerated) evaluates each store's address for %tid.x in
# 0 .. dims[0]-1 of `.maxntid X, Y, Z`. The PTX ISA bounds only the product X*Y*Z (".maxntid ... the maximum number
# of threads is the product of the maximum extent in each dimension"; it does not bound any one dimension), so a
# kernel declaring `.maxntid 16, 8, 1` that never reads %tid.y is launched (128, 1, 1) and %tid.x reaches 127. Here
# thread t >= 16 stores a[i] (streamed: a DRAM miss each trip) and then a[t] (the same word every trip: a cache hit)
# to the same word tile[t] in one trip ((t + 112) >> 7 is 1 from t = 16 on); the input's program order keeps a[t].
# For t < 16 the second store goes to tile[128 + t]. The proof sees only t < 16 and calls the stores disjoint; the
# output issues two cp.asyncs to one word, which land in either order (cp.asyncs are not ordered with each other:
# PTX ISA, cp.async), and the hit lands first, so out[] may hold sums of 0.5 * a[i] where the input's hold
# 0.5 * a[t].
MAXNTID_BY_PRODUCT = _planted(
    (".reqntid 128, 1, 1", ".maxntid 16, 8, 1"),
    ("%r<16>", "%r<24>"),
    ("%rd<10>", "%rd<12>"),
    ("tile[512]", "tile[1024]"),
    (
        "\tadd.s32 \t%r8, %r6, %r7;\n",
        "\tadd.s32 \t%r8, %r6, %r7;\n\tadd.s32 \t%r15, %r2, 112;\n\tshr.u32 \t%r15, %r15, 7;\n"
        "\txor.b32 \t%r15, %r15, 1;\n\tmad.lo.s32 \t%r16, %r15, 512, %r8;\n"
        "\tmul.wide.u32 \t%rd10, %r2, 4;\n\tadd.s64 \t%rd11, %rd3, %rd10;\n",
    ),
    (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd11];\n\tst.shared.f32 \t[%r16], %f4;\n"),
)


def test_maxntid_bounds_the_product_not_tid_x() -> None:
    _refused(MAXNTID_BY_PRODUCT)


def test_maxntid_break_on_the_simulated_cta() -> None:
    """tests/ptx_sim.py (the pipeline's own CPU oracle: a group's copies land in a seeded random order at the wait)
    launches 128 threads: over a few seeds the pipeline's bits differ from the input's where thread t >= 16's two
    copies land first-stored-last."""
    out, _ = _pipeline(MAXNTID_BY_PRODUCT, 2)
    if out is None:
        return  # refused: nothing to compare
    expected = _simulated(MAXNTID_BY_PRODUCT)
    assert all(_simulated(out, seed) == expected for seed in range(4))


# Register names need no `%` (PTX ISA, identifiers: `.reg .b32 r<16>;` is a register like `%r<16>`), but the ahead
# copy's names are `%wr_s1_` + the name without its first character (producers.share_name): `r<16>`, `f<6>` and `p<4>`
# all become `%wr_s1_<N>` ("Duplicate definition of variable '%wr_s1_<'"), and `rd5` becomes `%wr_s1_d5`. The
# staging load's base is taken for a symbol too (pipeline._capture tests for a leading `%`): `[rd5+4]` becomes
# `mov.u64 %wr_src0, %wr_s1_d5+4`, a register plus an offset where mov takes a symbol.
NO_PERCENT = re.sub(
    r"%(rd|r|f|p)(\d+|<\d+>)",
    r"\1\2",
    _planted(
        (LOAD, "\tld.global.nc.f32 \t%f2, [%rd5+4];\n"),
        ("\tadd.s64 \t%rd5, %rd3, %rd4;\n", "\tadd.s64 \t%rd5, %rd3, %rd4;\n\tadd.s64 \t%rd5, %rd5, -4;\n"),
    ),
)


def test_register_names_without_percent() -> None:
    _refused_or_assembles(NO_PERCENT)


# --- local memory the compute part writes, read by the staging part S - 1 trips early ---------------------------
# _producer_inputs checks the staging part's reads against the kernel's global writes only; a staging read of
# `.local` memory is never a hazard there, and loaded_source checks only staging *addresses*. Here each thread keeps
# a `live` flag in local memory: the compute part clears it once its sum passes 100, and the staging part reads it
# as the zero-fill predicate (`live ? a[i] : 0`). The input's trip k + 1 reads the flag compute k wrote; the
# pipeline's ahead copy reads it S - 1 trips earlier, before compute k (and the S - 2 before it) wrote it. With
# a[] all 1.0 and n = 210 trips the input adds 0.5 for 201 trips (out = 100.5 everywhere); the pipeline at S adds
# it for 200 + S trips (S = 2: 101.0, S = 4: 102.0).
LOCAL_FLAG = _planted(
    ("\t.shared .align 4 .b8 tile[512];\n", "\t.shared .align 4 .b8 tile[512];\n\t.local .align 4 .b8 \tlive[4];\n"),
    (
        "\tmov.u32 \t%r12, 0;\n",
        "\tmov.u32 \t%r12, 0;\n\tmov.u64 \t%rd9, live;\n\tmov.u32 \t%r13, 1;\n\tst.local.u32 \t[%rd9], %r13;\n",
    ),
    (
        LOAD,
        "\tld.local.u32 \t%r15, [%rd9];\n\tsetp.ne.s32 \t%p3, %r15, 0;\n\tmov.f32 \t%f2, 0f00000000;\n"
        "\t@%p3 ld.global.nc.f32 \t%f2, [%rd5];\n",
    ),
    (
        "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n",
        "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n\tsetp.gt.f32 \t%p3, %f1, 0f42C80000;\n"
        "\tselp.u32 \t%r14, 0, 1, %p3;\n\tst.local.u32 \t[%rd9], %r14;\n",
    ),
)


def test_staging_reads_local_memory_the_compute_part_writes() -> None:
    _refused(LOCAL_FLAG)


LIVE_SUM = Path(__file__).parent / "data" / "breakpipe" / "live_sum.cu"  # the same, as CUDA C++ (nvcc's PTX)


def _live_sum_ptx() -> str:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        return cuda_to_ptx(str(LIVE_SUM), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")


def test_nvccs_local_liveness_flag() -> None:
    """nvcc keeps `int live[8]` (indexed by k % rows) in local memory: the staging part's `live[k % rows] ? a[..] : 0`
    reads it with ld.local, the compute part's `if (acc > 100) live[(k + 1) % rows] = 0` writes it."""
    _refused(_live_sum_ptx())


def test_split_staging_reads_local_memory_the_compute_part_writes() -> None:
    """The same rule breaks the split (not the pipeline's code, the same _producer_inputs): the producers replay
    the staging part in their own threads, whose `live` flag only the replayed code before the loop wrote (1), so
    they stage a[] on every trip (out = 105.0) where the consumers' input stopped after 201 (100.5)."""
    compile_ptx(LOCAL_FLAG, "input.ptx", "sm_90")
    _, report = warp_roles(parse(LOCAL_FLAG), RoleSettings())
    assert not report.rewrites, "split a kernel whose producers read a flag only the consumers write"


# --- a staging store in an irreducible cycle runs twice per trip --------------------------------------------------
# "runs more than once per trip" is decided from find_loops' natural loops (copies._Converter.in_inner_loop); a cycle
# entered at two blocks (here $L__a by falling in and $L__b by a branch: PTX lets a hand-written kernel jump into a
# loop's middle) is no natural loop, so its store counts as once per trip. It runs twice: first storing a[i], then 0
# (the zero-fill form `mov 0; @first ld`), and the input's tile word is 0 after every trip (out[] all 0.0). The
# pipeline issues both as cp.asyncs to one word, one copying a[i] and one zero-filling, landing in either order.
IRREDUCIBLE = _planted(
    (
        LOAD + STORE + "\tbar.sync \t0;\n",
        "\tmov.u32 \t%r13, 0;\n\tsetp.eq.u32 \t%p3, %r1, 7;\n\t@%p3 bra \t$L__b;\n$L__a:\n"
        "\tmov.f32 \t%f2, 0f00000000;\n\tsetp.eq.u32 \t%p3, %r13, 0;\n\t@%p3 ld.global.nc.f32 \t%f2, [%rd5];\n"
        + STORE
        + "\tadd.s32 \t%r13, %r13, 1;\n\tsetp.ge.u32 \t%p3, %r13, 2;\n\t@%p3 bra \t$L__filled;\n$L__b:\n"
        "\tbra.uni \t$L__a;\n$L__filled:\n\tbar.sync \t0;\n",
    ),
)


def test_store_in_an_irreducible_cycle() -> None:
    _refused(IRREDUCIBLE)


def test_irreducible_cycle_on_the_simulated_cta() -> None:
    """The input's out[] is all zeros on the simulator; the pipeline's must be too, whatever order its copies land."""
    out, _ = _pipeline(IRREDUCIBLE, 2)
    if out is None:
        return  # refused: nothing to compare
    expected = _simulated(IRREDUCIBLE)
    assert expected == bytes(len(expected))
    assert all(_simulated(out, seed) == expected for seed in range(4))


# --- ld.global.cv: memory another agent changes, read S - 1 trips early and cached ---------------------------------
# `.cv` ("don't cache and fetch again: consider cached system memory lines stale", PTX ISA, cache operators) is how
# PTX reads memory another agent (the host through mapped memory, a peer GPU) rewrites while the kernel runs; the
# kernel here writes global memory after the loop only, so no rule refuses it, and the pipeline turns the load into
# a `cp.async.ca` (cached in L1) issued S - 1 trips before the input read it: the bytes the host wrote in between
# are not the ones staged. The standards say to assume the worst for other agents; the pass should refuse `.cv`
# as it refuses `.volatile`.
CACHE_VOLATILE = _planted((LOAD, "\tld.global.cv.f32 \t%f2, [%rd5];\n"))


def test_cache_volatile_load() -> None:
    _refused(CACHE_VOLATILE)


# --- the address evaluator reads add.sat as a wrapping add ------------------------------------------------------
# copies._arith computes `add` on two's complement words and ignores `.sat`, which clamps to the s32 range instead.
# Here min(%tid.x, 15) is computed the way a saturating clamp does (t + 0x7FFFFFF0, saturated, minus 0x7FFFFFF0),
# so %r22 = t - min(t, 15) is 0 for t < 16 and t - 15 for t >= 16, and the second store's address is
# tile + 4t + 512 (t < 16) or tile + 4t (t >= 16): the first store's word. The evaluator sees %r22 = 0 for every
# thread and the second store at tile + 512 + 4t, disjoint from the first; the block is `.reqntid 128, 1, 1`. As
# above, threads 16..127 then issue two cp.asyncs to one word (the input keeps a[t], the second store's value).
SATURATING_CLAMP = _planted(
    ("%r<16>", "%r<24>"),
    ("%rd<10>", "%rd<12>"),
    ("tile[512]", "tile[1024]"),
    (
        "\tadd.s32 \t%r8, %r6, %r7;\n",
        "\tadd.s32 \t%r8, %r6, %r7;\n\tadd.sat.s32 \t%r20, %r2, 2147483632;\n\tsub.s32 \t%r21, %r20, 2147483632;\n"
        "\tsub.s32 \t%r22, %r2, %r21;\n\tmin.u32 \t%r23, %r22, 1;\n\txor.b32 \t%r15, %r23, 1;\n"
        "\tmad.lo.s32 \t%r16, %r15, 512, %r8;\n\tmul.wide.u32 \t%rd10, %r2, 4;\n\tadd.s64 \t%rd11, %rd3, %rd10;\n",
    ),
    (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd11];\n\tst.shared.f32 \t[%r16], %f4;\n"),
)


def test_saturating_add_in_a_staging_address() -> None:
    _refused(SATURATING_CLAMP)


# --- ptxas rejects what the pass writes ------------------------------------------------------------------------
# The ahead copy's entry copies are `mov.<register type>` (pipeline.py, `entry`): for a `.reg .f16` or `.f16x2`
# register that the tail (or staging) reads from before the loop that is `mov.f16` / `mov.f16x2`, which are not mov
# types (ptxas: "Unexpected instruction types specified for 'mov'"). A loop-carried half (a decay factor squared
# after the second barrier, LLVM's `.reg .f16 %h<N>` / `.reg .f16x2 %hh<N>`) is enough. optimize catches it with its
# ptxas check and exits 1 ("a bug in ptxtool").
def _half_in_the_tail(kind: str) -> str:
    init = "mov.b16 \t%h1, 0x3C00;" if kind == "f16" else "mov.b32 \t%h1, 0x3C003C00;"
    return _planted(
        ("\t.reg .f32 \t%f<6>;\n", f"\t.reg .f32 \t%f<6>;\n\t.reg .{kind} \t%h<4>;\n"),
        ("\tmov.u32 \t%r12, 0;\n", f"\tmov.u32 \t%r12, 0;\n\t{init}\n"),
        ("\tadd.s32 \t%r12, %r12, 1;\n", f"\tmul.rn.{kind} \t%h1, %h1, %h1;\n\tadd.s32 \t%r12, %r12, 1;\n"),
    )


@pytest.mark.parametrize("kind", ["f16", "f16x2"])
def test_half_register_read_by_the_ahead_copy(kind: str) -> None:
    _refused_or_assembles(_half_in_the_tail(kind))


# A `brx.idx` jump table (`$L__tbl: .branchtargets $L__c0, $L__c1;`, LLVM's lowering of a dense switch) anywhere in
# the kernel: the pipeline rebuilds the body from instructions, labels and `{ }` scopes only (producers.body_units), so
# the `.branchtargets` directive is dropped and `brx.idx %r13, $L__tbl` names a plain label ("Label with
# '.branchtargets' directive expected"). Here the switch is after the loop (the split keeps the directive).
JUMP_TABLE = _planted(
    (
        "\tld.param.u64 \t%rd1, [staged_a];\n",
        "$L__tbl: .branchtargets $L__c0, $L__c1;\n\tld.param.u64 \t%rd1, [staged_a];\n",
    ),
    (
        "\tst.global.f32 \t[%rd8], %f1;\n\tret;\n",
        "\tand.b32 \t%r13, %r1, 1;\n\tbrx.idx \t%r13, $L__tbl;\n$L__c0:\n\tst.global.f32 \t[%rd8], %f1;\n\tret;\n"
        "$L__c1:\n\tneg.f32 \t%f1, %f1;\n\tst.global.f32 \t[%rd8], %f1;\n\tret;\n",
    ),
)


def test_jump_table_directive_is_kept() -> None:
    _refused_or_assembles(JUMP_TABLE)


# The ahead copy renames staging labels `$__wr_q{j}_` + the name with every leading `$` stripped (pipeline.py,
# `label`): `$st` and `st` are two PTX labels, both become `$__wr_q0_st` ("Duplicate definition of label").
LABELS_DIFFERING_BY_DOLLAR = _planted(
    (
        LOAD,
        "\tmov.f32 \t%f2, 0f00000000;\n\tsetp.ge.u32 \t%p3, %r5, 1000;\n\t@%p3 bra \t$st;\n" + LOAD + "$st:\n"
        "\tbra.uni \tst;\nst:\n",
    ),
)


def test_labels_differing_by_a_dollar() -> None:
    _refused_or_assembles(LABELS_DIFFERING_BY_DOLLAR)


# --- on the GPU -------------------------------------------------------------------------------------------------


def _launch_bytes(
    text: str, kernel: str, grid: int, block: int, n: int, a: np.ndarray, out_words: int, *more: int
) -> bytes:
    """Bytes of `out` after one launch of `kernel(a, out, n, *more)` (the planted kernel's parameters, 32-bit more)."""
    from ptxtool.toolchain.gpu import Gpu

    cubin = compile_ptx(text, f"{kernel}.ptx", "sm_90").cubin
    with Gpu() as gpu:
        function = gpu.function(gpu.load(cubin, kernel, ptx=False), kernel)
        source, out = gpu.alloc(a.nbytes), gpu.alloc(4 * out_words)
        gpu.upload(source, a)
        gpu.fill_bytes(out, 0xFF, 4 * out_words)
        args = [np.uint64(source).tobytes(), np.uint64(out).tobytes(), *(np.uint32(v).tobytes() for v in (n, *more))]
        gpu.launch(function, (grid, 1, 1), (block, 1, 1), args)
        return gpu.download(out, 4 * out_words, timeout=10.0).tobytes()


@pytest.mark.gpu
@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("case", ["maxntid", "saturating", "irreducible"])
def test_one_word_twice_on_the_gpu(case: str) -> None:
    """The input and its pipeline (S = 2, 4), launched (128, 1, 1) (as `.maxntid 16, 8, 1` allows), 20 times each
    on random a[]: every output must be the input's bytes."""
    from ptxtool.toolchain.gpu import probe

    if (reason := probe()) is not None:
        pytest.skip(f"no GPU: {reason}")
    grid, n = 132, 64
    a = np.random.default_rng(0).standard_normal((grid * n + 1) * 128).astype(np.float32)
    text = {"maxntid": MAXNTID_BY_PRODUCT, "saturating": SATURATING_CLAMP, "irreducible": IRREDUCIBLE}[case]
    expected = _launch_bytes(text, "staged", grid, 128, n, a, grid * 128)
    for stages in (2, 4):
        out, _ = _pipeline(text, stages)
        if out is None:
            continue  # refused: nothing to compare
        for _ in range(20):
            assert _launch_bytes(out, "staged", grid, 128, n, a, grid * 128) == expected, stages


@pytest.mark.gpu
@pytest.mark.usefixtures("ptxas")
def test_local_flag_break_on_the_gpu() -> None:
    """a[] all 1.0, n = 210: the input writes 100.5 to every out[]; each pipeline must write the same bytes."""
    from ptxtool.toolchain.gpu import probe

    if (reason := probe()) is not None:
        pytest.skip(f"no GPU: {reason}")
    grid, n = 4, 210
    a = np.ones(grid * n * 128, dtype=np.float32)
    expected = _launch_bytes(LOCAL_FLAG, "staged", grid, 128, n, a, grid * 128)
    assert np.frombuffer(expected, np.float32).tolist() == [100.5] * (grid * 128)
    for stages in (2, 4):
        out, _ = _pipeline(LOCAL_FLAG, stages)
        if out is not None:
            got = np.frombuffer(_launch_bytes(out, "staged", grid, 128, n, a, grid * 128), np.float32)
            assert got.tobytes() == expected, (stages, sorted(set(got.tolist())))  # the model: 100.0 + 0.5 * S


# --- time: many staging stores in a block of undeclared size -----------------------------------------------------
# copies._Converter.addresses evaluates each store's address for every %tid.x (1,024 where the block is not
# declared, as nvcc writes kernels without __launch_bounds__) through its definitions, with a memo per store: the
# shared base register's chain is evaluated again for every store and thread. 64 stores of an unrolled tile (each
# thread stages 64 words) took 16 s here, 256 took 89 s (256 under .reqntid 128: 11 s); the pipeline's own fuzz
# test bounds one kernel at 5 s.
def _many_stores(count: int) -> str:
    stores = "".join(
        f"\tld.global.nc.f32 \t%f{10 + j}, [%rd5+{4 * j}];\n\tst.shared.f32 \t[%r8+{4 * j}], %f{10 + j};\n"
        for j in range(count)
    )
    return _planted(
        (".reqntid 128, 1, 1\n", ""),
        ("tile[512]", f"tile[{4 * (1024 + count)}]"),
        ("%f<6>", f"%f<{count + 10}>"),
        (LOAD + STORE, stores),
    )


def test_many_staging_stores_are_decided_in_time() -> None:
    import time

    text = _many_stores(64)
    start = time.monotonic()
    _pipeline(text)
    assert time.monotonic() - start < 5


# --- fuzzing: random staging shapes, with the launch's own overlap as the oracle ---------------------------------
# A fixed-seed generator of staged kernels (1-3 staging stores of 4, 8 or 16 bytes, scalar or vector, each at
# tile + c * f(%tid.x) + off for f among affine, xor, min, and, shift, negation and a "late" index that equals %tid.x
# only for %tid.x >= 2^m; plain, branch, predicated and selp zero-fill forms; .reqntid / .maxntid / no block
# declaration; S = 2, 3, 4). Each kernel ptxas takes is pipelined within a time bound, without a traceback, into PTX
# ptxas takes; and where, over the threads of the launch the declaration allows, one thread writes a byte twice in a
# trip and no other thread writes it (the input is deterministic: program order decides), the pass must refuse.

_FUZZ_KERNEL = """.version 8.0
.target sm_90
.address_size 64

.visible .entry fz(
	.param .u64 fz_a,
	.param .u64 fz_out,
	.param .u32 fz_n
)
{block}
{{
	.reg .pred 	%p<16>;
	.reg .b32 	%r<64>;
	.reg .f32 	%f<64>;
	.reg .b64 	%rd<64>;
	.shared .align 16 .b8 tile[{tile}];

	ld.param.u64 	%rd1, [fz_a];
	ld.param.u64 	%rd2, [fz_out];
	ld.param.u32 	%r1, [fz_n];
	cvta.to.global.u64 	%rd3, %rd1;
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %ctaid.x;
	mul.lo.s32 	%r4, %r3, %r1;
	shl.b32 	%r4, %r4, 7;
	add.s32 	%r5, %r4, %r2;
	mul.wide.u32 	%rd4, %r5, 64;
	add.s64 	%rd5, %rd3, %rd4;
	mov.u32 	%r6, tile;
	xor.b32 	%r9, %r2, 1;
	shl.b32 	%r10, %r9, 2;
	add.s32 	%r11, %r6, %r10;
	mov.f32 	%f1, 0f00000000;
	mov.u32 	%r12, 0;
{pre}{guard}$L__loop:
{staging}	bar.sync 	0;
	ld.shared.f32 	%f3, [%r11];
	fma.rn.f32 	%f1, %f3, 0f3F000000, %f1;
	bar.sync 	0;
	add.s64 	%rd5, %rd5, 8192;
	add.s32 	%r12, %r12, 1;
	setp.lt.u32 	%p2, %r12, %r1;
	@%p2 bra 	$L__loop;
$L__done:
	cvta.to.global.u64 	%rd6, %rd2;
	mad.lo.s32 	%r14, %r3, 128, %r2;
	mul.wide.u32 	%rd7, %r14, 4;
	add.s64 	%rd8, %rd6, %rd7;
	st.global.f32 	[%rd8], %f1;
	ret;
}}
"""

# (declaration, threads of the launch): .maxntid bounds the product, so `32, 4, 1` launches (128, 1, 1)
_FUZZ_BLOCKS = ((".reqntid 128, 1, 1", 128), (".maxntid 128, 1, 1", 128), (".maxntid 32, 4, 1", 128), ("", 128))
_FUZZ_SHAPES = ("lin", "xor", "min", "and", "shr", "neg", "late")


def _fuzz_index(shape: str, t: int, m: int) -> int:
    values = {"lin": t, "xor": t ^ m, "min": min(t, m), "and": t & m, "shr": t >> m, "neg": (m - t) & 0xFFFFFFFF}
    return values[shape] if shape in values else t + 128 * (1 - min(t >> m, 1))


def _fuzz_shape_code(shape: str, r: str, m: int) -> str:
    if shape == "late":
        return (
            f"\tshr.u32 \t{r}, %r2, {m};\n\tmin.u32 \t{r}, {r}, 1;\n\txor.b32 \t{r}, {r}, 1;\n"
            f"\tmad.lo.s32 \t{r}, {r}, 128, %r2;\n"
        )
    code = {"lin": "mov.u32 \t{r}, %r2", "xor": "xor.b32 \t{r}, %r2, {m}", "min": "min.u32 \t{r}, %r2, {m}"}
    code |= {"and": "and.b32 \t{r}, %r2, {m}", "shr": "shr.u32 \t{r}, %r2, {m}", "neg": "sub.s32 \t{r}, {m}, %r2"}
    return "\t" + code[shape].format(r=r, m=m) + ";\n"


def _fuzz_staging(rng, j: int, size: int, address: str) -> str:
    """Staging store j of `size` bytes at `address`: its load (from a[] at 16 j bytes) and a zero-fill form."""
    load = f"[%rd5+{16 * j}]"
    if size == 16 or (size == 8 and rng.random() < 0.5):
        names = ", ".join(f"%f{30 + 4 * j + k}" for k in range(size // 4))
        vector = f"v{size // 4}.f32 \t"
        return f"\tld.global.nc.{vector}{{{names}}}, {load};\n\tst.shared.{vector}[{address}], {{{names}}};\n"
    v, w, p = (
        (f"%f{10 + j}", f"%f{20 + j}", f"%p{4 + j}") if size == 4 else (f"%rd{20 + j}", f"%rd{30 + j}", f"%p{4 + j}")
    )
    kind = "f32" if size == 4 else "u64"
    zero = "mov.f32 \t{}, 0f00000000;" if size == 4 else "mov.b64 \t{}, 0;"
    st = f"\tst.shared.{kind} \t[{address}], {v};\n"
    form = rng.choice(("plain", "plain", "branch", "pred", "selp") if size == 4 else ("plain", "pred"))
    bound = rng.choice((1000, 5000, 100000))
    ld = f"ld.global.nc.{kind} \t{{}}, {load};"
    if form == "plain":
        return f"\t{ld.format(v)}\n{st}"
    if form == "branch":
        return (
            f"\t{zero.format(v)}\n\tsetp.ge.u32 \t{p}, %r5, {bound};\n\t@{p} bra \t$L__s{j};\n\t{ld.format(v)}\n"
            f"$L__s{j}:\n{st}"
        )
    if form == "pred":
        return f"\t{zero.format(v)}\n\tsetp.lt.u32 \t{p}, %r5, {bound};\n\t@{p} {ld.format(v)}\n{st}"
    return f"\tsetp.lt.u32 \t{p}, %r5, {bound};\n\t{ld.format(w)}\n\tselp.f32 \t{v}, {w}, 0f00000000, {p};\n{st}"


def _fuzz_kernel(rng) -> tuple[str, list[tuple[str, int, int, int, int]], int] | None:
    """A random staged kernel, its stores (shape, m, c, offset, size) and the threads of its launch."""
    block, launched = rng.choice(_FUZZ_BLOCKS)
    pair = rng.random() < 0.3  # the second store a "late" copy of the first: per-thread overlap from 2^m on
    pre, staging, stores = [], [], []
    for j in range(rng.randint(1, 3)):
        size = stores[0][4] if pair and stores else rng.choice((4, 8, 16))
        c = stores[0][2] if pair and stores else size * rng.choice((1, 1, 2, 4))
        shape = ("lin" if j == 0 else "late") if pair else rng.choice(_FUZZ_SHAPES)
        m = {"xor": (1, 16, 64), "min": (15, 31, 64), "and": (15, 31), "shr": (1, 2, 4), "neg": (127,)}.get(shape)
        m = rng.choice(m or ((4, 5, 6) if shape == "late" else (0,)))
        off = size * rng.randint(0, 1024 // size) if rng.random() < 0.5 or not stores else stores[0][3]
        index, address = f"%r{20 + 2 * j}", f"%r{21 + 2 * j}"
        pre.append(_fuzz_shape_code(shape, index, m) + f"\tmad.lo.s32 \t{address}, {index}, {c}, %r6;\n")
        staging.append(_fuzz_staging(rng, j, size, address + (f"+{off}" if off else "")))
        stores.append((shape, m, c, off, size))
    guard = rng.choice(("\tsetp.eq.s32 \t%p1, %r1, 0;\n\t@%p1 bra \t$L__done;\n", ""))
    top = max(c * max(_fuzz_index(s, t, m) for t in range(launched)) + off + size for s, m, c, off, size in stores)
    if top > 40000:
        return None
    tile = max(-(-top // 16) * 16, 512)
    text = _FUZZ_KERNEL.format(block=block, tile=tile, pre="".join(pre), guard=guard, staging="".join(staging))
    return text, stores, launched


def _same_thread_overlap_only(stores: list[tuple[str, int, int, int, int]], threads: int) -> bool:
    """Whether some thread writes a byte twice in one trip while no other thread writes it (program order decides)."""
    owner: dict[int, int] = {}
    twice = False
    for t in range(threads):
        mine = [
            range(c * _fuzz_index(s, t, m) + off, c * _fuzz_index(s, t, m) + off + size)
            for s, m, c, off, size in stores
        ]
        seen: set[int] = set()
        for span in mine:
            twice |= bool(seen & set(span))
            seen |= set(span)
        for byte in seen:
            if owner.setdefault(byte, t) != t:
                return False
    return twice


def test_fuzzed_staging_shapes() -> None:
    import random
    import time

    rng = random.Random(6)
    outcomes = {"pipelined": 0, "refused": 0}
    deadline = time.monotonic() + 120
    for _ in range(60):
        made = _fuzz_kernel(rng)
        stages = rng.choice((2, 3, 4))
        if made is None:
            continue
        text, stores, threads = made
        compile_ptx(text, "fuzz.ptx", "sm_90")
        start = time.monotonic()
        out, report = _pipeline(text, stages)
        assert time.monotonic() - start < 5, text
        if out is None:
            outcomes["refused"] += 1
            assert report.skipped and all(s.reason for s in report.skipped)
            continue
        outcomes["pipelined"] += 1
        compile_ptx(out, "fuzz.pipelined.ptx", "sm_90")
        assert not _same_thread_overlap_only(stores, threads), f"pipelined a byte one thread writes twice:\n{text}"
        if time.monotonic() > deadline:
            break
    assert outcomes["pipelined"] and outcomes["refused"], outcomes


@pytest.mark.gpu
@pytest.mark.usefixtures("ptxas")
def test_nvccs_local_liveness_flag_on_the_gpu() -> None:
    """nvcc's live_sum with a[] all 1.0, n = 210, rows = 8: the input writes 100.5 to every out[]; each pipeline
    must write the same bytes (the ahead copy reads each flag before the compute part that clears it)."""
    from ptxtool.toolchain.gpu import probe

    if (reason := probe()) is not None:
        pytest.skip(f"no GPU: {reason}")
    text = _live_sum_ptx()
    grid, n = 4, 210
    a = np.ones(grid * n * 128, dtype=np.float32)
    expected = _launch_bytes(text, "live_sum", grid, 128, n, a, grid * 128, 8)
    assert np.frombuffer(expected, np.float32).tolist() == [100.5] * (grid * 128)
    for stages in (2, 4):
        out, _ = _pipeline(text, stages)
        if out is not None:
            got = _launch_bytes(out, "live_sum", grid, 128, n, a, grid * 128, 8)
            assert got == expected, (stages, sorted(set(np.frombuffer(got, np.float32).tolist())))

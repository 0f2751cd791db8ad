"""Adversarial kernels for the warp-role pass's pipeline variant (issue 16): each is valid PTX that ptxas takes, and
each breaks a rule the pipeline relies on. A test asserts what a correct pass must do (refuse, or write PTX that
ptxas accepts), so it fails while the break stands and passes once it is fixed; where the break changes the bytes a
launch writes, a GPU test (marked gpu, skipped without a driver) runs the input and the pipelined output on random
inputs and compares the bytes."""

from __future__ import annotations

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


# --- .maxntid bounds the block's thread count, not %tid.x ------------------------------------------------------
# The disjointness proof (copies.py, _Converter.enumerated) evaluates each store's address for %tid.x in
# 0 .. dims[0]-1 of `.maxntid X, Y, Z`. The PTX ISA bounds only the product X*Y*Z (".maxntid ... the maximum number
# of threads is the product of the maximum extent in each dimension"; it does not bound any one dimension), so a
# kernel declaring `.maxntid 16, 8, 1` that never reads %tid.y is launched (128, 1, 1) and %tid.x reaches 127. Here
# thread t >= 16 stores a[i] and then a[i + 1] to the same word tile[t] in one trip (the input's program order keeps
# a[i + 1]); for t < 16 the second store goes to tile[128 + t]. The proof sees only t < 16 and calls the stores
# disjoint; the output issues two cp.asyncs to one word, which land in either order (cp.asyncs are not ordered with
# each other: PTX ISA, cp.async), so out[] may hold 0.5 * a[i] sums instead of 0.5 * a[i + 1] ones.
MAXNTID_BY_PRODUCT = _planted(
    (".reqntid 128, 1, 1", ".maxntid 16, 8, 1"),
    ("%r<16>", "%r<24>"),
    ("tile[512]", "tile[1024]"),
    (
        "\tadd.s32 \t%r8, %r6, %r7;\n",
        "\tadd.s32 \t%r8, %r6, %r7;\n\tshr.u32 \t%r15, %r2, 4;\n\tmin.u32 \t%r15, %r15, 1;\n"
        "\txor.b32 \t%r15, %r15, 1;\n\tmad.lo.s32 \t%r16, %r15, 512, %r8;\n",
    ),
    (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r16], %f4;\n"),
)


def test_maxntid_bounds_the_product_not_tid_x() -> None:
    _refused(MAXNTID_BY_PRODUCT)


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


def test_split_staging_reads_local_memory_the_compute_part_writes() -> None:
    """The same rule breaks the split (not the pipeline's code, the same _producer_inputs): the producers replay
    the staging part in their own threads, whose `live` flag only the replayed code before the loop wrote (1), so
    they stage a[] on every trip (out = 105.0) where the consumers' input stopped after 201 (100.5)."""
    compile_ptx(LOCAL_FLAG, "input.ptx", "sm_90")
    _, report = warp_roles(parse(LOCAL_FLAG), RoleSettings())
    assert not report.rewrites, "split a kernel whose producers read a flag only the consumers write"


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


def _launch_bytes(text: str, kernel: str, grid: int, block: int, n: int, a: np.ndarray, out_words: int) -> bytes:
    """Bytes of `out` after one launch of `kernel(a, out, n)` (the planted kernel's parameters)."""
    from ptxtool.toolchain.gpu import Gpu

    cubin = compile_ptx(text, f"{kernel}.ptx", "sm_90").cubin
    with Gpu() as gpu:
        function = gpu.function(gpu.load(cubin, kernel, ptx=False), kernel)
        source, out = gpu.alloc(a.nbytes), gpu.alloc(4 * out_words)
        gpu.upload(source, a)
        gpu.fill_bytes(out, 0xFF, 4 * out_words)
        args = [np.uint64(source).tobytes(), np.uint64(out).tobytes(), np.uint32(n).tobytes()]
        gpu.launch(function, (grid, 1, 1), (block, 1, 1), args)
        return gpu.download(out, 4 * out_words, timeout=10.0).tobytes()


@pytest.mark.gpu
@pytest.mark.usefixtures("ptxas")
def test_maxntid_break_on_the_gpu() -> None:
    """The input and its pipeline (S = 2, 4), launched (128, 1, 1) as `.maxntid 16, 8, 1` allows, 20 times each on
    random a[]: every output must be the input's bytes."""
    from ptxtool.toolchain.gpu import probe

    if (reason := probe()) is not None:
        pytest.skip(f"no GPU: {reason}")
    grid, n = 132, 64
    a = np.random.default_rng(0).standard_normal((grid * n + 1) * 128).astype(np.float32)
    expected = _launch_bytes(MAXNTID_BY_PRODUCT, "staged", grid, 128, n, a, grid * 128)
    for stages in (2, 4):
        out, report = _pipeline(MAXNTID_BY_PRODUCT, stages)
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

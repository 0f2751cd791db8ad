"""Thread-strided fill loops (`for (i = tid; i < 320; i += 128) tile[i] = in bounds ? a[base + i] : 0`) in the
cp.async forms of the warp-role pass (fills.py runs every thread's trip): the loop is cloned into the ahead copy /
the producers with its stores as copies; each rule's breaking kernel is refused in one line; the CPU simulators give
the input's bits for S = 2, 3, 4, odd trip counts and the zero path, and other bits for a broken output."""

from __future__ import annotations

import functools
import random
import re
import struct
from pathlib import Path

import pytest

from ptxtool.passes.warp_roles import RoleSettings, sass_proof, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

DATA = Path(__file__).parent / "data" / "warp_roles"
FILL = (DATA / "strided_fill.ptx").read_text()
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks" / "warp_roles"
ARRIVE = "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%wr_bar];"  # the producers' arrival on sm_90
TILE = 320  # floats per trip: threads 0..63 stage 3 of them, threads 64..127 stage 2


def _pass(text: str, variant: str = "pipeline", stages: int = 2, producers: int | None = None):
    settings = RoleSettings(variant=variant, stages=stages, producer_warps=producers)
    out, report = warp_roles(parse(text), settings)
    return (format_module(out) if report.rewrites else None), report


def _planted(*edits: tuple[str, str]) -> str:
    text = FILL
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _proof(text: str, kernel: str) -> None:
    """ptxas takes it without spills and its SASS shows what optimize requires of it (warp_roles.sass_proof)."""
    from ptxtool.toolchain.sass import disassemble, missing

    compiled = compile_ptx(text, "filled.ptx", "sm_90")
    assert compiled.functions[kernel].spill_bytes == 0
    function = next(k for k in parse(text).kernels if k.name == kernel)
    sass = disassemble(compiled.cubin)[kernel]
    assert not missing(sass_proof(function, "sm_90"), sass), [i.opcode for i in sass]


@functools.cache
def _simulated(text: str, trips: int = 5, blocks: int = 2, seed: int = 0, cut: int = 150) -> bytes:
    """The output after a simulated launch of `blocks` CTAs over `trips` tiles of random floats, elements from
    `cut` before the end out of bounds (zero-filled); split kernels run on ptx_sim_roles (mbarriers)."""
    rng = random.Random(1)
    total = blocks * max(trips, 1) * TILE
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(total))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    params = [0, len(data), trips, total - cut]
    if "__wr_full" in text:
        from ptx_sim_roles import block_threads
        from ptx_sim_roles import run_grid as run_roles

        run_roles(text, block_threads(text), blocks, params, memory, seed, limit=10**6)
    else:
        from ptx_sim import run_grid

        run_grid(text, 128, blocks, params, memory, seed)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_fill_loop_structure(stages: int) -> None:
    """The ahead copy runs the fill loop (its labels its own) with the store as a zero-filling copy into slot q mod S;
    the kernel's own trip keeps no staging store; ptxas takes it and the SASS shows LDGSTS and the group waits."""
    out, report = _pass(FILL, stages=stages)
    assert out is not None, report.skipped
    loop = out.partition("$L__loop:")[2]
    ahead = loop.partition("$__wr_stagedL:")[0]
    assert "$__wr_qL$L__fill:" in ahead and "@%wr_s1_p4 bra $__wr_qL$L__fill;" in ahead
    assert re.search(
        r"selp\.u32 %wr_n0, 4, 0, %wr_cp0;\n\tcp\.async\.ca\.shared\.global \[%wr_a0\], \[%wr_src0\], 4, %wr_n0;", ahead
    )
    assert "st.shared" not in out and "ld.global.nc" not in out
    assert out.count("$__wr_q0$L__fill:") == 1  # the entry's trips have a loop of their own
    _proof(out, "strided_fill")


@pytest.mark.parametrize("producers", [None, 1])
def test_split_async_fill_loop_structure(producers: int | None) -> None:
    """The producers run each share's fill loop with copies and arrive once per trip when they land."""
    out, report = _pass(FILL, "split-async", 3, producers)
    assert out is not None, report.skipped
    assert "st.shared" not in out.partition("$__wr_p$L__loop:")[2] and out.count(ARRIVE) == 1
    assert out.count("cp.async.ca.shared.global") == (4 if producers == 1 else 1)  # a copy per share
    _proof(out, "strided_fill")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_fill_outputs_match_on_a_simulated_cta(stages: int) -> None:
    """Bits of the input for 0..5 trips (threads staging 3 and 2 words, the zero path in the last tile); waiting for
    one group fewer, or copying 4 bytes on the zero path, gives other bits."""
    out, _ = _pass(FILL, stages=stages)
    assert out is not None
    for trips in (0, 1, 2, 5):
        assert _simulated(out, trips, seed=stages) == _simulated(FILL, trips)
    expected = _simulated(FILL)
    assert expected != _simulated(FILL, cut=0)  # the zero path is taken
    early = out.replace(f"cp.async.wait_group {stages - 1};", f"cp.async.wait_group {stages};")
    assert _simulated(early, seed=stages) != expected
    assert _simulated(out.replace("selp.u32 %wr_n0, 4, 0,", "selp.u32 %wr_n0, 4, 4,"), seed=stages) != expected


@pytest.mark.parametrize(("producers", "stages"), [(None, 2), (1, 3), (2, 4)])
def test_split_async_fill_outputs_match_on_a_simulated_cta(producers: int | None, stages: int) -> None:
    """The producers' copied fill loops give the input's bits; an ordinary arrival in place of the copies' reads
    slots before their copies land and gives other bits."""
    out, _ = _pass(FILL, "split-async", stages, producers)
    assert out is not None
    for trips in (0, 1, 5):
        assert _simulated(out, trips, seed=stages) == _simulated(FILL, trips)
    early = out.replace(ARRIVE, "mbarrier.arrive.shared::cta.b64 %wr_state, [%wr_bar];")
    assert _simulated(early, seed=stages) != _simulated(FILL)


FILL_LOOP = "\tmov.u32 \t%r14, %r2;\n$L__fill:\n"
BOUND = "\tsetp.lt.u32 \t%p4, %r14, 320;\n"
STORE = "\tst.shared.f32 \t[%r17], %f2;\n"
REFUSALS = {
    # the fill loop's bound changes with the trip (odd trips stage 192 words): the ring slot of S trips before
    # would hold the words the trip skips, the input's tile those of the trip before
    "trip_dependent_bound": (
        (
            (
                BOUND,
                "\tand.b32 \t%r19, %r12, 1;\n\tmad.lo.s32 \t%r21, %r19, -128, 320;\n\tsetp.lt.u32 \t%p4, %r14, %r21;\n",
            ),
        ),
        "on a value not fixed for the thread",
    ),
    # the words a trip writes move with the trip: not a function of %tid.x alone
    "trip_dependent_address": (
        (
            (
                "\tadd.s32 \t%r17, %r6, %r16;\n",
                "\tand.b32 \t%r19, %r12, 1;\n\tadd.s32 \t%r17, %r6, %r16;\n\tmad.lo.s32 \t%r17, %r19, 4, %r17;\n",
            ),
        ),
        "writes an address that is not a function of %tid.x",
    ),
    # a store of the loop skipped on odd trips
    "store_on_some_trips": (
        (
            (
                STORE,
                "\tand.b32 \t%r19, %r12, 1;\n\tsetp.ne.u32 \t%p5, %r19, 0;\n\t@%p5 bra \t$L__skip;\n"
                + STORE
                + "$L__skip:\n",
            ),
        ),
        "is skipped on some paths of a trip",
    ),
    # a step of 0 (two trips counted apart): each thread copies into one word twice, and the copies land in any order
    "same_word_twice": (
        (
            ("\tadd.s32 \t%r14, %r14, 128;\n", "\tadd.s32 \t%r14, %r14, 0;\n\tadd.s32 \t%r22, %r22, 1;\n"),
            ("\tmov.u32 \t%r14, %r2;\n", "\tmov.u32 \t%r14, %r2;\n\tmov.u32 \t%r22, 0;\n"),
            (BOUND, "\tsetp.lt.u32 \t%p4, %r22, 2;\n"),
        ),
        "writes the same bytes of tile twice in thread 0 of one trip",
    ),
    # a second fill loop over the words 128 on: thread t's second word is its first word of the first loop
    "two_loops_overlap": (
        (
            ("tile[1280]", "tile[2048]"),
            (
                "\tbar.sync \t0;\n\tld.shared",
                "\tmov.u32 \t%r14, %r2;\n$L__again:\n\tshl.b32 \t%r16, %r14, 2;\n"
                "\tadd.s32 \t%r17, %r6, %r16;\n\tld.global.nc.f32 \t%f6, [%rd5];\n\tst.shared.f32 \t[%r17+512], %f6;\n"
                "\tadd.s32 \t%r14, %r14, 128;\n\tsetp.lt.u32 \t%p5, %r14, 320;\n\t@%p5 bra \t$L__again;\n"
                "\tbar.sync \t0;\n\tld.shared",
            ),
        ),
        "write the same bytes of tile twice in thread 0 of one trip",
    ),
    # a bound not known when the block is only bounded (.maxntid): %ntid.x is the launch's
    "ntid_step_under_maxntid": (
        (
            (".reqntid 128, 1, 1", ".maxntid 128, 1, 1"),
            ("\tadd.s32 \t%r14, %r14, 128;\n", "\tmov.u32 \t%r19, %ntid.x;\n\tadd.s32 \t%r14, %r14, %r19;\n"),
        ),
        "on a value not fixed for the thread",
    ),
}


ORDERED = ("same_word_twice", "two_loops_overlap")  # the ld+st split's stores land in program order: no break


@pytest.mark.parametrize("case", sorted(REFUSALS))
@pytest.mark.parametrize("variant", ["pipeline", "split-async", "split"])
def test_fill_loop_refusal(case: str, variant: str) -> None:
    """Each rule's breaking kernel (ptxas takes it) is refused in one line saying why, by both cp.async forms; the
    ld+st split refuses the fills whose bytes may change from trip to trip (its ring slots are S trips apart too)."""
    edits, reason = REFUSALS[case]
    text = _planted(*edits)
    compile_ptx(text, f"{case}.ptx", "sm_90")
    if variant != "pipeline" and case == "ntid_step_under_maxntid":
        return  # the split refuses %ntid.x before any copy (the grown block changes it)
    if variant == "split" and case in ORDERED:
        out, report = _pass(text, variant)
        assert out is not None, report.skipped
        assert _simulated(out, seed=2) == _simulated(text)
        return
    out, report = _pass(text, variant)
    assert out is None and report.skipped, out
    assert reason in report.skipped[0].reason, report.skipped[0].reason
    assert "\n" not in report.skipped[0].reason


def test_ntid_step_under_reqntid_is_pipelined() -> None:
    """`i += blockDim.x` under `.reqntid 128`: %ntid.x is 128, the fill is the same as a constant step."""
    text = _planted(("\tadd.s32 \t%r14, %r14, 128;\n", "\tmov.u32 \t%r19, %ntid.x;\n\tadd.s32 \t%r14, %r14, %r19;\n"))
    out, report = _pass(text, stages=3)
    assert out is not None, report.skipped
    assert _simulated(out, seed=3) == _simulated(FILL)


def test_an_endless_fill_is_refused_in_time() -> None:
    """A fill loop of 2^24 trips per thread (its bound known) gives up after fills.STEPS steps, in one line."""
    import time

    from ptxtool.passes.warp_roles.fills import STEPS

    text = _planted((BOUND, "\tsetp.lt.u32 \t%p4, %r14, 16777216;\n"))
    start = time.perf_counter()
    out, report = _pass(text)
    assert out is None and f"more than {STEPS} steps" in report.skipped[0].reason, report.skipped
    assert time.perf_counter() - start < 60


@functools.cache
def _stencil() -> str:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        return cuda_to_ptx(str(BENCHMARKS / "stencil.cu"), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")


@functools.cache
def _stencil_run(text: str, seed: int = 0) -> bytes:
    """y after a simulated launch of nvcc's stencil (2 blocks of 2 tiles; the first tile's halo before x[0] and the
    last 300 outputs out of bounds: the zero path)."""
    blocks, tiles = 2, 2
    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * tiles * 1024 + 64))
    memory = bytearray(data) + bytearray(blocks * tiles * 1024 * 4)
    params = [0, len(data), blocks * tiles * 1024 - 300, tiles]
    if "__wr_full" in text:
        from ptx_sim_roles import block_threads
        from ptx_sim_roles import run_grid as run_roles

        run_roles(text, block_threads(text), blocks, params, memory, seed, limit=10**7)
    else:
        from ptx_sim import run_grid

        run_grid(text, 256, blocks, params, memory, seed, limit=10**7)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize(
    ("variant", "stages", "producers"),
    [("pipeline", 2, None), ("pipeline", 3, None), ("pipeline", 4, None), ("split-async", 3, 2)],
)
def test_nvccs_stencil_on_a_simulated_cta(variant: str, stages: int, producers: int | None) -> None:
    """nvcc's stencil (its fill loop peeled and unrolled 4 times, bounds-checked both ways) pipelined or split with
    copying producers gives the input's bits on the CPU simulators; one group fewer waited gives other bits."""
    out, report = _pass(_stencil(), variant, stages, producers)
    assert out is not None, report.skipped
    expected = _stencil_run(_stencil())
    assert _stencil_run(out, stages) == expected
    if variant == "pipeline" and stages == 3:
        early = out.replace("cp.async.wait_group 2;", "cp.async.wait_group 3;")
        assert _stencil_run(early, stages) != expected


def _fuzz_fill(rng: random.Random) -> tuple[str, bool]:
    """A random fill loop over a 512-word tile (start %tid.x, step, bound, word = A i + B + C_k for one or two
    stores, each word w holding a[base + w] or zero past the limit, so threads that share a word write equal
    bytes) and whether a correct pass must refuse it: a bound that changes with the trip, or a thread writing one
    word twice in a trip."""
    while True:
        step, bound = rng.choice((128, 256)), rng.choice((100, 200, 320, 384, 512))
        scale, shift = rng.choice((1, 2)), rng.choice((0, 3))
        offsets = rng.choice(((0,), (0, 1), (0, 128), (0, 256), (0, 0), (0, 64)))
        if scale * (bound - 1) + shift + max(offsets) < 512:
            break
    moving = rng.random() < 0.2  # odd trips fill 64 words fewer
    limit = "%r21" if moving else str(bound)
    stores = ""
    for k, offset in enumerate(offsets):
        stores += (
            f"\tadd.s32 \t%r16, %r15, {offset};\n\tadd.s32 \t%r17, %r13, %r16;\n\tmul.wide.u32 \t%rd4, %r17, 4;\n"
            f"\tadd.s64 \t%rd5, %rd3, %rd4;\n\tmov.f32 \t%f{6 + k}, 0f00000000;\n\tsetp.ge.u32 \t%p3, %r17, %r20;\n"
            f"\t@%p3 bra \t$L__st{k};\n\tld.global.nc.f32 \t%f{6 + k}, [%rd5];\n$L__st{k}:\n"
            f"\tshl.b32 \t%r18, %r16, 2;\n\tadd.s32 \t%r18, %r6, %r18;\n\tst.shared.f32 \t[%r18], %f{6 + k};\n"
        )
    fill = (
        "\tmad.lo.s32 \t%r13, %r12, 512, %r4;\n\tmov.u32 \t%r14, %r2;\n"
        + (f"\tand.b32 \t%r19, %r12, 1;\n\tmad.lo.s32 \t%r21, %r19, -64, {bound};\n" if moving else "")
        + f"$L__fill:\n\tmad.lo.s32 \t%r15, %r14, {scale}, {shift};\n"
        + stores
        + f"\tadd.s32 \t%r14, %r14, {step};\n\tsetp.lt.u32 \t%p4, %r14, {limit};\n\t@%p4 bra \t$L__fill;\n"
    )
    compute = "".join(
        f"\tld.shared.f32 \t%f3, [%r8+{512 * k}];\n\tfma.rn.f32 \t%f1, %f3, 0f3F{k}00000, %f1;\n" for k in range(4)
    )
    head, rest = FILL.split("$L__loop:\n", 1)
    rest = rest[rest.index("\tbar.sync \t0;\n") :]
    rest = rest.replace(rest[rest.index("\tld.shared") : rest.index("\tbar.sync \t0;\n\tadd.s32 \t%r12")], compute, 1)
    text = (
        (head + "$L__loop:\n" + fill + rest)
        .replace("tile[1280]", "tile[2048]")
        .replace("mul.lo.s32 \t%r4, %r4, 320;", "shl.b32 \t%r4, %r4, 9;")
    )
    twice = any(
        len(words) != len(set(words))
        for tid in range(128)
        for words in ([scale * i + shift + c for i in range(tid, bound, step) for c in offsets],)
    )
    return text, moving or twice


def test_fuzzed_fill_loops() -> None:
    """Fixed-seed random fill loops: each one a correct pass must refuse (a trip-dependent bound, a word written
    twice by a thread) is refused; each other one is pipelined (no false refusal of an affine fill) into what gives
    the input's bits on the simulator, zero path included."""
    rng = random.Random(16)
    for want in ("safe", "moving", "twice") * 6:
        while True:
            text, unsafe = _fuzz_fill(rng)
            kind = "moving" if "%r21" in text else "twice" if unsafe else "safe"
            if kind == want:
                break
        out, report = _pass(text, stages=rng.choice((2, 3)))
        if kind == "moving":
            assert out is None and "is skipped on some paths of a trip" in report.skipped[0].reason, text
        elif kind == "twice":
            assert out is None and "the same bytes of tile twice" in report.skipped[0].reason, text
        else:
            assert out is not None, (report.skipped, text)
            expected = _simulated(text, trips=3, blocks=1, cut=700)
            assert _simulated(out, trips=3, blocks=1, cut=700) == expected, text

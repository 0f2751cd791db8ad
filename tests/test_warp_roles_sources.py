"""sources.py's exact polynomials and footprint.py's static proof of runs (split-bulk): arithmetic modulo 2^bits,
bounded; widenings as atoms whose no-wrap is a run's recorded assumption; each run's source address; and the
simulator (tests/ptx_sim_bulk.py) giving the input's bits where a 16-bit index wraps in the middle of a run, and
not without the per-run check's assumption compare."""

from __future__ import annotations

import random
import struct

import pytest
from test_pass_warp_roles import STAGED
from test_pass_warp_roles_bulk import _split

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.staging import StagedLoop, find_staged_loop
from ptxtool.passes.warp_roles.async_producers import producer_copies
from ptxtool.passes.warp_roles.footprint import Assumption, Footprint, footprint
from ptxtool.passes.warp_roles.sources import MAX_DEGREE, atom, constant, offset_of, plus, times
from ptxtool.syntax import parse

POINTER = "\tadd.s64 \t%rd5, %rd3, %rd4;\n"


def _footprint(text: str) -> Footprint | tuple[int, str]:
    module = parse(text)
    kernel = module.kernels[0]
    found = find_staged_loop(module, kernel, stages=2, extra_threads=32)
    assert isinstance(found, StagedLoop), found
    cfg = build_cfg(kernel)
    return footprint(cfg, found, producer_copies(cfg, found))


def _planted(*edits: tuple[str, str], text: str = STAGED) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_arithmetic_wraps_at_the_width_and_is_bounded() -> None:
    """Coefficients modulo 2^bits (a 32-bit 2^31 + 2^31 is 0; a 64-bit difference of -4 reads back -4), and past
    MAX_DEGREE factors a product is not followed (None), not a blow-up."""
    x = atom("x")
    assert plus(times(x, constant(1 << 31, 32), 32), times(x, constant(1 << 31, 32), 32), 32) == ()
    assert offset_of(plus(x, constant(-4)), x) == -4
    assert offset_of(plus(x, constant(4), 32), x, 32) == 4
    power = x
    for _ in range(MAX_DEGREE - 1):
        power = times(power, x)
    assert power is not None and times(power, x) is None


def test_the_staged_kernel_is_one_run_with_its_source_and_one_assumption() -> None:
    """STAGED reads a[(ctaid * n * 128 + tid) * 4] through mul.wide.u32: the run's source is cvta(a) + the trip's
    step + 4 * zext32(128 * ctaid * n), valid while 128 * ctaid * n + tid does not wrap for tid in [0, 127]."""
    laid = _footprint(STAGED)
    assert isinstance(laid, Footprint), laid
    (run,) = laid.runs
    assert (run.start, run.size) == (0, 512)
    inner = ((("%ctaid.x", "param:staged_n+0"), 128),)
    assert run.assumptions == (Assumption("zext", 32, inner, 0, 127),)
    assert dict(run.source) == {
        ("cvta(1*param:staged_a+0)",): 1,
        ("trip:%rd5",): 1,
        ("zext32(128*%ctaid.x*param:staged_n+0)",): 4,
    }


def test_a_64_bit_index_needs_no_assumption() -> None:
    """The same index widened first, then scaled in 64 bits (tid's part exact): no widening of a varying c."""
    text = _planted(
        (
            "\tadd.s32 \t%r5, %r4, %r2;\n\tmul.wide.u32 \t%rd4, %r5, 4;\n",
            "\tmul.wide.u32 \t%rd4, %r4, 4;\n\tmul.wide.u32 \t%rd9, %r2, 4;\n\tadd.s64 \t%rd4, %rd4, %rd9;\n",
        ),
    )
    laid = _footprint(text)
    assert isinstance(laid, Footprint), laid
    assert [(r.size, r.assumptions) for r in laid.runs] == [(512, ())]


def test_shifts_are_exact_at_the_width() -> None:
    """shl.b64 by 64 gives 0 (the run stays); by 63 of %tid.x it adds 2^63 to every odd thread's address: no two
    neighbouring words are contiguous, so there is no run (refused with the reason)."""

    def shifted(amount: int) -> str:
        return _planted(
            (
                POINTER,
                f"\tcvt.u64.u32 \t%rd9, %r2;\n\tshl.b64 \t%rd9, %rd9, {amount};\n{POINTER}"
                "\tadd.s64 \t%rd5, %rd5, %rd9;\n",
            )
        )

    laid = _footprint(shifted(64))
    assert isinstance(laid, Footprint) and [r.size for r in laid.runs] == [512]
    refused = _footprint(shifted(63))
    assert isinstance(refused, tuple) and "no run" in refused[1]


# a 16-bit index: (ctaid * k + tid) mod 2^16, four bytes a word; block 1 with k = 65472 wraps at tid 64
WRAPPING = _planted(
    ("\t.param .u32 staged_n\n", "\t.param .u32 staged_n,\n\t.param .u32 staged_k\n"),
    ("\t.reg .pred \t%p<4>;", "\t.reg .pred \t%p<4>;\n\t.reg .b16 \t%rs<4>;"),
    (
        "\tmul.lo.s32 \t%r4, %r3, %r1;\n\tshl.b32 \t%r4, %r4, 7;\n\tadd.s32 \t%r5, %r4, %r2;\n"
        "\tmul.wide.u32 \t%rd4, %r5, 4;\n",
        "\tld.param.u32 \t%r13, [staged_k];\n\tmul.lo.s32 \t%r4, %r3, %r13;\n\tcvt.u16.u32 \t%rs1, %r4;\n"
        "\tcvt.u16.u32 \t%rs2, %r2;\n\tadd.s16 \t%rs3, %rs1, %rs2;\n\tmul.wide.u16 \t%r5, %rs3, 4;\n"
        "\tcvt.u64.u32 \t%rd4, %r5;\n",
    ),
)


def test_a_16_bit_index_is_a_run_under_its_no_wrap_assumption() -> None:
    """The 16-bit index widened twice (mul.wide.u16, then cvt.u64.u32): one run whose assumptions are the 16-bit
    sum not wrapping for tid in [0, 127] and the 32-bit product of its widening not wrapping for 4 * tid."""
    laid = _footprint(WRAPPING)
    assert isinstance(laid, Footprint), laid
    (run,) = laid.runs
    assert run.size == 512
    assert {(a.kind, a.bits, a.low, a.high) for a in run.assumptions} == {("zext", 16, 0, 127), ("zext", 32, 0, 508)}


def _simulated(text: str, k: int, trips: int = 2, blocks: int = 2) -> tuple[bytes, int]:
    """(out, bulk copies issued) of a simulated launch of WRAPPING-like kernels over 2^16 + 1024 floats of `a`."""
    from ptx_sim_bulk import run_grid
    from ptx_sim_roles import block_threads

    rng = random.Random(11)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range((1 << 16) + 128 * trips + 1024))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    issued = run_grid(text, block_threads(text), blocks, [0, len(data), trips, k], memory, seed=k)
    return bytes(memory[len(data) :]), issued


def test_a_16_bit_index_that_wraps_mid_run_takes_the_fallback() -> None:
    """k = 128: no block wraps, every trip of both blocks is a bulk copy. k = 65472: block 1's index wraps at tid
    64 (its words are not contiguous), so its trips fall back to cp.async. Both give the input's bits."""
    out, report = _split(WRAPPING)
    assert out is not None, report.skipped
    for k, bulk in ((128, 4), (65472, 2)):
        expected, _ = _simulated(WRAPPING, k)
        got, issued = _simulated(out, k)
        assert got == expected and issued == bulk, (k, issued)


def test_without_the_assumption_check_the_wrapping_block_copies_the_wrong_bytes() -> None:
    """The per-run check's 16-bit assumption compare made never true: block 1 (k = 65472) then takes the bulk path
    from a + 4 * 65472, where the input's threads 64..127 read a + 4 * (tid - 64): the bits differ. So the compare
    is what keeps the wrapping block on the fallback."""
    out, _ = _split(WRAPPING)
    assert out is not None
    broken = out.replace("setp.ge.s64 %wr_q, %wr_mul, 65536;", "setp.ge.s64 %wr_q, %wr_mul, 1099511627776;")
    assert broken != out
    expected, _ = _simulated(WRAPPING, 65472)
    got, issued = _simulated(broken, 65472)
    assert issued == 4 and got != expected


# the loop carries a 32-bit element index (+128 a trip) and the staging part widens it: the trip offset is a 32-bit
# atom inside the widening, as in nvcc's stencil and attention kernels
INDEXED = _planted(
    (
        "\tld.global.nc.f32 \t%f2, [%rd5];\n",
        "\tmul.wide.u32 \t%rd4, %r5, 4;\n\tadd.s64 \t%rd9, %rd3, %rd4;\n\tld.global.nc.f32 \t%f2, [%rd9];\n",
    ),
    ("\tadd.s64 \t%rd5, %rd5, 512;\n", "\tadd.s32 \t%r5, %r5, 128;\n"),
)


@pytest.mark.parametrize("kind", ["zext", "sext"])
def test_a_32_bit_index_carried_by_the_loop(kind: str) -> None:
    """INDEXED (mul.wide.u32, or .s32: sign-extended by shl/shr.s in the producer): one run whose widening holds the
    32-bit trip offset (sub.s32 from the index captured on trip 0); on the simulator every trip of both blocks is a
    bulk copy, 16-byte aligned, 4 bytes off: none, and the bits are the input's either way."""
    from test_pass_warp_roles_bulk import _simulated as simulated

    text = (
        INDEXED if kind == "zext" else INDEXED.replace("mul.wide.u32 \t%rd4, %r5, 4;", "mul.wide.s32 \t%rd4, %r5, 4;")
    )
    assert kind == "zext" or text != INDEXED
    laid = _footprint(text)
    assert isinstance(laid, Footprint), laid
    (run,) = laid.runs
    assert [a.kind for a in laid.atoms or ()].count("trip") == 1 and any("trip:%r5" in str(a.inner) for a in laid.atoms)
    assert [a.kind for a in run.assumptions] == [kind]
    out, report = _split(text)
    assert out is not None, report.skipped
    assert "sub.s32 %wr_h32, %r5, %wr_init0;" in out and ("shr.s64" in out) == (kind == "sext")
    for shift, bulk in ((0, 6), (4, 0)):
        expected, _ = simulated(text, 3, shift)
        got, issued = simulated(out, 3, shift)
        assert got == expected and issued == bulk, (shift, issued)


# the 16-bit index is ctaid * k + 1000, the same in every thread (tid added in 64 bits): one c for the whole run,
# so the words cancel whatever wraps, but the source the producers evaluate is zext16(ctaid * k) + 1000
ONE_C = _planted(
    ("\t.param .u32 staged_n\n", "\t.param .u32 staged_n,\n\t.param .u32 staged_k\n"),
    ("\t.reg .pred \t%p<4>;", "\t.reg .pred \t%p<4>;\n\t.reg .b16 \t%rs<4>;"),
    (
        "\tmul.lo.s32 \t%r4, %r3, %r1;\n\tshl.b32 \t%r4, %r4, 7;\n\tadd.s32 \t%r5, %r4, %r2;\n"
        "\tmul.wide.u32 \t%rd4, %r5, 4;\n",
        "\tld.param.u32 \t%r13, [staged_k];\n\tmul.lo.s32 \t%r4, %r3, %r13;\n\tcvt.u16.u32 \t%rs1, %r4;\n"
        "\tadd.s16 \t%rs3, %rs1, 1000;\n\tmul.wide.u16 \t%r5, %rs3, 4;\n\tcvt.u64.u32 \t%rd4, %r5;\n"
        "\tmul.wide.u32 \t%rd9, %r2, 4;\n\tadd.s64 \t%rd4, %rd4, %rd9;\n",
    ),
)


def test_one_c_for_the_whole_run_is_still_checked() -> None:
    """ONE_C: the run's 16-bit widening is used with c = 1000 alone, still an assumption; block 1 with k = 65000
    wraps (66000 mod 2^16), so its trips fall back and the bits are the input's (a + 4 * 464, not a + 4 * 66000)."""
    laid = _footprint(ONE_C)
    assert isinstance(laid, Footprint), laid
    (run,) = laid.runs
    assert ("zext", 16, 1000, 1000) in {(a.kind, a.bits, a.low, a.high) for a in run.assumptions}
    out, report = _split(ONE_C)
    assert out is not None, report.skipped
    for k, bulk in ((128, 4), (65000, 2)):
        expected, _ = _simulated(ONE_C, k)
        got, issued = _simulated(out, k)
        assert got == expected and issued == bulk, (k, issued)


def test_load_conditions_and_their_proof_per_run() -> None:
    """conditions.py: a negated compare is a compare, a join of two paths `c ? first : second`; zero_fill.py: a
    compare monotone in the word's constant with a bound the same in every word is proven at the run's two ends,
    one not monotone (ne), a bound that varies with the index, or a 64-bit index that varies is not."""
    from ptxtool.passes.warp_roles.conditions import FALSE, TRUE, choose, compare, negate
    from ptxtool.passes.warp_roles.zero_fill import Bound, run_proof

    g, n = ((("trip",), 1024),), ((("n",), 1),)
    index = lambda k: plus(g, constant(k, 32), 32)  # noqa: E731
    outside = compare("lt", True, 32, index(0), ()), compare("ge", True, 32, index(0), n)
    assert negate(outside[0]) == ("cmp", "ge", True, 32, index(0), ())
    assert (
        compare("lt", True, 32, constant(-1, 32), ()) == TRUE
        and compare("lt", False, 32, constant(-1, 32), ()) == FALSE
    )
    assert choose(outside[0], FALSE, TRUE) == negate(outside[0])  # the load on the branch's fall-through
    loaded = [
        choose(("or", compare("lt", True, 32, index(k), ()), compare("ge", True, 32, index(k), n)), FALSE, TRUE)
        for k in range(-4, 12)
    ]
    assert run_proof(loaded) == (
        "and",
        Bound("ge", True, 32, g, -4, 11, ()),
        Bound("lt", True, 32, g, -4, 11, n),
    )
    assert run_proof([compare("ne", False, 32, index(k), n) for k in range(4)]) is None
    assert run_proof([compare("ne", False, 32, index(0), n)] * 4) == Bound("ne", False, 32, g, 0, 0, n)
    both = [compare("lt", False, 32, index(k), plus(n, constant(-k, 32), 32)) for k in range(4)]
    assert run_proof(both) is None  # the bound varies with the word as the index does
    wide = [compare("lt", False, 64, plus(g, constant(k)), n) for k in range(4)]
    assert run_proof(wide) is None  # a 64-bit index: its wrap is not checked
    assert run_proof([TRUE, FALSE]) is None and run_proof([TRUE, None]) is None and run_proof([TRUE]) == TRUE

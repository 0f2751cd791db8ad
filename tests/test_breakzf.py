"""Adversarial probes of split-bulk's per-run zero-fill proof (issue 16; conditions.py, zero_fill.py, per_run.py,
sources.py): nvcc's bounds check `i < m ? a[i] : 0` is proven for a whole run once per trip, at the run's two ends
with a no-wrap check, instead of by every consumer thread's flag. A wrong proof copies in bulk bytes the input
would have zero-filled (or kept): silent wrong results. Each probe plants a bounds check into the staged kernel
(tests/data/warp_roles/staged.ptx, a bound parameter `m` added) and demands one of: the pass refuses (with a
reason), or its output is what ptxas accepts and gives the input's bits on the CPU simulator, with the tiles 16-byte
aligned and 4 bytes off, for a bound that zero-fills some words of some trips and none of others. A probe that
broke the pass is marked xfail(strict) with its exact cause: the test of what a correct pass must do. The simulator
(tests/ptx_sim_bulk.py) is extended here with the predicate forms the probes plant (setp p|q, combining setp, lo/hi,
xor.pred, `!%p` operands, cvt's sign extension); each probe runs the pass under a time bound."""

from __future__ import annotations

import contextlib
import functools
import random
import signal
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from ptx_sim import _signed
from ptx_sim_bulk import BulkCta
from ptx_sim_roles import block_threads
from test_pass_warp_roles_bulk import _split, _trip
from test_pass_warp_roles_pipeline import LOAD, _planted

from ptxtool.syntax import ast, parse
from ptxtool.toolchain.compile import compile_ptx

TIME_BOUND = 60  # seconds the pass may take on one probe
_UNSIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_COMPARE = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}
_COMBINE = {"and": lambda a, b: a and b, "or": lambda a, b: a or b, "xor": lambda a, b: a != b}


class _Cta(BulkCta):
    """tests/ptx_sim_bulk.py's CTA with the predicate forms the probes plant and the simulator does not model (PTX ISA,
    setp): the second destination of `setp p|q` (q = !p), the combining `setp.CMP.BOOL p, a, b, c`, the unsigned
    lo/ls/hi/hs, `xor.pred`, a predicate operand negated (`!%p`), and cvt's sign extension."""

    def value(self, t, operand: ast.Operand, bits: int, params: dict[str, int]) -> int | bool:
        if isinstance(operand, ast.Not):  # `!%p`, a predicate operand negated
            return not self.value(t, operand.name, 1, params)
        return super().value(t, operand, bits, params)

    def step(self, t, params: dict[str, int], memory: bytearray) -> str | None:
        i = self.linear.ops[t.pc].instruction
        if i.opcode not in ("setp", "xor", "cvt"):
            return super().step(t, params, memory)
        if i.guard is not None and bool(t.regs.get(i.guard.predicate.text, False)) == i.guard.negated:
            t.pc += 1
            return None
        ops = i.operands
        if i.opcode == "xor" and "pred" not in i.modifiers:
            return super().step(t, params, memory)
        t.pc += 1
        if i.opcode == "xor":
            t.regs[ops[0].text] = bool(self.value(t, ops[1], 1, params)) != bool(self.value(t, ops[2], 1, params))
            return None
        if i.opcode == "cvt":
            to, source = (int(m[1:]) for m in i.modifiers[-2:])
            value = int(self.value(t, ops[1], source, params)) & ((1 << source) - 1)
            if i.modifiers[-1][0] == "s":
                value = _signed(value, source)
            t.regs[ops[0].text] = value & ((1 << to) - 1)
            return None
        compare, word = i.modifiers[0], i.modifiers[-1]
        bits = int(word[1:])
        a, b = (int(self.value(t, ops[k], bits, params)) & ((1 << bits) - 1) for k in (1, 2))
        if word[0] == "s":
            a, b = _signed(a, bits), _signed(b, bits)
        result = _COMPARE[_UNSIGNED.get(compare, compare)](a, b)
        if len(i.modifiers) == 3:  # setp.CMP.BOOL: combined with a predicate
            result = _COMBINE[i.modifiers[1]](result, bool(self.value(t, ops[3], 1, params)))
        first, second = (ops[0].first, ops[0].second) if isinstance(ops[0], ast.PredPair) else (ops[0], None)
        for name, value in ((first, result), (second, not result)):
            if name is not None and name.text != "_":
                t.regs[name.text] = value
        return None


def _run_grid(text: str, threads: int, blocks: int, params: list[int], memory: bytearray, seed: int) -> int:
    """ptx_sim_bulk.run_grid with _Cta: every CTA of a 1-D grid; the bulk copies issued."""
    names = [p.name for p in parse(text).kernels[0].params]
    given = dict(zip(names, params, strict=True))
    issued = 0
    for ctaid in range(blocks):
        cta = _Cta(text, threads, ctaid, seed + ctaid)
        cta.run(given, memory, 600_000)
        assert not any(cta.arrivals.values()), "asynchronous arrivals pending after the CTA finished"
        assert not cta.bulk, "bulk copies in flight after the CTA finished"
        issued += cta.issued
    return issued


TRIPS = 4


@functools.lru_cache(maxsize=128)
def _simulated(text: str, bound: int, shift: int, blocks: int, floats: int, seed: int = 0) -> tuple[bytes, int]:
    """(the output, bulk copies issued) of `blocks` blocks over TRIPS tiles of `floats` random floats each, placed
    `shift` bytes past address 0, with the bound parameter `m` = `bound`."""
    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * TRIPS * floats))
    memory = bytearray(shift) + bytearray(data) + bytearray(blocks * 128 * 4)
    issued = _run_grid(text, block_threads(text), blocks, [shift, shift + len(data), TRIPS, bound], memory, seed)
    return bytes(memory[shift + len(data) :]), issued


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """The pass must not hang: SIGALRM past `seconds`."""

    def expired(*_) -> None:
        raise TimeoutError(f"the pass took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# the staged kernel with room for the probes' registers and a bound parameter `m` in %r19
_ROOM = (
    ("\t.reg .pred \t%p<4>;", "\t.reg .pred \t%p<16>;"),
    ("\t.reg .b32 \t%r<16>;", "\t.reg .b32 \t%r<40>;\n\t.reg .b16 \t%rs<8>;"),
    ("\t.reg .f32 \t%f<6>;", "\t.reg .f32 \t%f<12>;"),
    ("\t.reg .b64 \t%rd<10>;", "\t.reg .b64 \t%rd<24>;"),
    ("\t.param .u32 staged_n\n", "\t.param .u32 staged_n,\n\t.param .u32 staged_m\n"),
    ("\tld.param.u32 \t%r1, [staged_n];\n", "\tld.param.u32 \t%r1, [staged_n];\n\tld.param.u32 \t%r19, [staged_m];\n"),
)
INDEX = "\tshl.b32 \t%r13, %r12, 7;\n\tadd.s32 \t%r13, %r13, %r5;\n"  # i = 128 (b n + t) + tid: the float %rd5 reads
LOAD4 = LOAD.replace("%f2", "%f4")  # the load into %f4, for a selp
ZERO = "\tmov.f32 \t%f2, 0f00000000;\n"
STORE = "\tst.shared.f32 \t[%r8], %f2;\n"
BEFORE_LOOP = "\tmov.u32 \t%r12, 0;\n"
TAIL = "\tadd.s32 \t%r12, %r12, 1;\n"  # the trip counter stepped: what follows is the trip's tail
READ_BOTH_HALVES = (  # the compute part reads a 1 KB tile's two halves
    "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n",
    "\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n\tld.shared.f32 \t%f4, [%r11+512];\n"
    "\tfma.rn.f32 \t%f1, %f4, 0f3F800000, %f1;\n",
)


def _branch(compare: str, index: str = INDEX, guard: str = "@%p3") -> str:
    """nvcc's form: the zero, then a branch around the load where `compare` (setting %p3) says zero-fill."""
    return f"{index}{ZERO}{compare}\t{guard} bra \t$L__st;\n{LOAD}$L__st:\n"


@dataclass(frozen=True)
class Probe:
    """The staged kernel with its load replaced by `staging` (None: left) and `edits`, run with the bound `m` =
    `bound` (where the input zero-fills some words of some trips and none of others) over `blocks` blocks of
    `floats` floats a trip; `never`: a bound that zero-fills nothing (None: compared with the kernel without the
    check instead)."""

    staging: str | None
    bound: int = 300
    edits: tuple[tuple[str, str], ...] = ()
    blocks: int = 1
    floats: int = 128
    never: int | None = None

    @property
    def source(self) -> str:
        return _planted(*_ROOM, *(((LOAD, self.staging),) if self.staging is not None else ()), *self.edits)

    def simulated(self, text: str, shift: int, seed: int = 0, bound: int | None = None) -> tuple[bytes, int]:
        return _simulated(text, self.bound if bound is None else bound, shift, self.blocks, self.floats, seed)

    def meaningful(self) -> bool:
        """With `bound` the input zero-fills (or keeps) some word: its bits differ from those with every word loaded."""
        if self.never is not None:
            return self.simulated(self.source, 0)[0] != self.simulated(self.source, 0, bound=self.never)[0]
        plain = replace(self, staging=LOAD if self.staging is not None else None)
        return self.simulated(self.source, 0)[0] != plain.simulated(plain.source, 0)[0]


def _outcome(probe: Probe) -> tuple[str, int]:
    """Split the probe under the time bound: ("refused: why", 0), or the output checked (ptxas takes it; the input's
    bits on the simulator, the tiles aligned and 4 bytes off) with how it proves zero-fill ("per run": the proof once
    per run; "flags": the check pass ANDs every word's flag) and the bulk copies issued with aligned tiles."""
    source = probe.source
    with _deadline(TIME_BOUND):
        out, report = _split(source)
    if out is None:
        assert report.skipped and report.skipped[0].reason
        return f"refused: {report.skipped[0].reason}", 0
    compile_ptx(out, "probe.ptx", "sm_90")  # InputError where ptxas rejects it
    bulk = 0
    for shift in (0, 4):
        expected = probe.simulated(source, shift)[0]
        got, issued = probe.simulated(out, shift, seed=3)
        assert got == expected, f"the input's bits differ with the tiles {shift} bytes off ({issued} bulk copies)"
        bulk += issued if shift == 0 else 0
    trip = _trip(out)
    mode = "per run" if "%wr_g0" in trip else "flags" if "and.pred %wr_ok, %wr_ok, %wr_cp" in trip else "none"
    return mode, bulk


def _checked(probe: Probe) -> str:
    """The probe means something, and the pass refuses it or its output gives the input's bits with some trips
    copied in bulk; what it did."""
    assert probe.meaningful(), "the input loads every word: the probe tests nothing"
    mode, bulk = _outcome(probe)
    assert mode.startswith("refused") or bulk > 0, (mode, bulk)
    return mode


# ---------------------------------------------------------------------------------------------------------------
# Probes that held: each kernel is refused, or keeps the check pass, or its per-run proof gives the input's bits.
# m = 300 unless said: trips 0 and 1 of block 0 (i < 256) load, trip 2 zero-fills i >= 300, trip 3 all.

# a fill loop: each thread stages two floats a trip, i and i + 128 (a 1 KB tile of 256 floats), the zero once before
# it: a word whose load is skipped keeps the float of the iteration before (or the zero)
FILL_LOOP = (
    ("tile[512]", "tile[1024]"),
    ("\tshl.b32 \t%r4, %r4, 7;", "\tshl.b32 \t%r4, %r4, 8;"),
    (
        LOAD + STORE,
        f"{ZERO}\tshl.b32 \t%r13, %r12, 8;\n\tadd.s32 \t%r13, %r13, %r5;\n\tmov.u64 \t%rd10, %rd5;\n"
        "\tmov.u32 \t%r17, %r8;\n\tmov.u32 \t%r16, 0;\n$L__fill:\n\tsetp.ge.u32 \t%p3, %r13, %r19;\n"
        "\t@%p3 bra \t$L__st;\n\tld.global.nc.f32 \t%f2, [%rd10];\n$L__st:\n\tst.shared.f32 \t[%r17], %f2;\n"
        "\tadd.s64 \t%rd10, %rd10, 512;\n\tadd.s32 \t%r17, %r17, 512;\n\tadd.s32 \t%r13, %r13, 128;\n"
        "\tadd.s32 \t%r16, %r16, 1;\n\tsetp.lt.u32 \t%p4, %r16, 2;\n\t@%p4 bra \t$L__fill;\n",
    ),
    READ_BOTH_HALVES,
    ("\tadd.s64 \t%rd5, %rd5, 512;", "\tadd.s64 \t%rd5, %rd5, 1024;"),
)
# the fill loop with its load predicated (iteration 0 always, then where i < m) instead of branched around
FILL_LOOP_PREDICATED = tuple(
    (
        old,
        new.replace(
            "\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@%p3 bra \t$L__st;\n\tld.global.nc.f32 \t%f2, [%rd10];\n$L__st:\n",
            "\tsetp.eq.u32 \t%p6, %r16, 0;\n\tsetp.lt.u32 \t%p7, %r13, %r19;\n\tor.pred \t%p6, %p6, %p7;\n"
            "\t@%p6 ld.global.nc.f32 \t%f2, [%rd10];\n",
        ),
    )
    for old, new in FILL_LOOP
)
# the fill loop with the zero inside it (nvcc's `s[j] = i < m ? a[i] : 0` for j = tid, tid + 128): no word kept
FILL_LOOP_ZEROED = tuple(
    (old, new.replace(ZERO, "").replace("$L__fill:\n", f"$L__fill:\n{ZERO}")) for old, new in FILL_LOOP
)
# runs of one 16-byte granule: thread t reads float 8 (t / 4) + t % 4 of its block's 256 (known per thread): 32 runs
GRANULES = (
    ("\tshl.b32 \t%r4, %r4, 7;", "\tshl.b32 \t%r4, %r4, 8;"),
    (
        "\tadd.s32 \t%r5, %r4, %r2;",
        "\tshr.u32 \t%r20, %r2, 2;\n\tand.b32 \t%r21, %r2, 3;\n\tshl.b32 \t%r20, %r20, 3;\n"
        "\tadd.s32 \t%r20, %r20, %r21;\n\tadd.s32 \t%r5, %r4, %r20;",
    ),
)
# two runs with conditions of their own: tile[t] = i < m ? a[i] : 0, tile[128 + t] = i >= 100 ? a[i + 512] : 0
TWO_RUNS = (
    ("tile[512]", "tile[1024]"),
    (
        LOAD + STORE,
        f"{INDEX}{ZERO}\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@%p3 bra \t$L__s1;\n{LOAD}$L__s1:\n{STORE}"
        "\tmov.f32 \t%f6, 0f00000000;\n\tsetp.lt.u32 \t%p4, %r13, 100;\n\t@%p4 bra \t$L__s2;\n"
        "\tld.global.nc.f32 \t%f6, [%rd5+2048];\n$L__s2:\n\tst.shared.f32 \t[%r8+512], %f6;\n",
    ),
    READ_BOTH_HALVES,
)

OWN_WORD = (  # %rd15: the thread's output word, before the loop
    f"{BEFORE_LOOP}\tcvta.to.global.u64 \t%rd13, %rd2;\n\tmad.lo.s32 \t%r24, %r3, 128, %r2;\n"
    "\tmul.wide.u32 \t%rd14, %r24, 4;\n\tadd.s64 \t%rd15, %rd13, %rd14;\n"
)
BOUND_FROM_OWN_WORD = (
    "\tld.global.u32 \t%r15, [%rd15];\n\tadd.s32 \t%r15, %r15, %r19;\n\tsetp.ge.u32 \t%p3, %r13, %r15;\n"
)
NEXT_BOUND = "\tshl.b32 \t%r25, %r12, 6;\n\tadd.s32 \t%r25, %r25, 64;\n"  # 64 (t + 1)
FMA = READ_BOTH_HALVES[0]
FROM_M = "\tsetp.ge.u32 \t%p5, %r13, %r19;\n\tand.pred \t%p3, %p4, %p5;\n"  # %p4 where i >= m

# 64 runs of one granule (a fill loop of two iterations over GRANULES' spacing, 512 floats a trip): lane r proves
# runs r and r + 32
SIXTY_FOUR_RUNS = (
    ("tile[512]", "tile[1024]"),
    ("\tshl.b32 \t%r4, %r4, 7;", "\tshl.b32 \t%r4, %r4, 9;"),
    GRANULES[1],
    (
        LOAD + STORE,
        "\tshl.b32 \t%r13, %r12, 9;\n\tadd.s32 \t%r13, %r13, %r5;\n\tmov.u64 \t%rd10, %rd5;\n"
        f"\tmov.u32 \t%r17, %r8;\n\tmov.u32 \t%r16, 0;\n$L__fill:\n{ZERO}\tsetp.ge.u32 \t%p3, %r13, %r19;\n"
        "\t@%p3 bra \t$L__st;\n\tld.global.nc.f32 \t%f2, [%rd10];\n$L__st:\n\tst.shared.f32 \t[%r17], %f2;\n"
        "\tadd.s64 \t%rd10, %rd10, 1024;\n\tadd.s32 \t%r17, %r17, 512;\n\tadd.s32 \t%r13, %r13, 256;\n"
        "\tadd.s32 \t%r16, %r16, 1;\n\tsetp.lt.u32 \t%p4, %r16, 2;\n\t@%p4 bra \t$L__fill;\n",
    ),
    READ_BOTH_HALVES,
    ("\tadd.s64 \t%rd5, %rd5, 512;", "\tadd.s64 \t%rd5, %rd5, 2048;"),
)
# one store whose words are both run and loose words: threads 0..63 read floats 0..63 of the tile's 128, threads
# 64..127 floats 127..64 (t ^ 63 (t >> 6), known per thread)
MIXED_STORE = (
    (
        "\tadd.s32 \t%r5, %r4, %r2;",
        "\tshr.u32 \t%r20, %r2, 6;\n\tmul.lo.u32 \t%r20, %r20, 63;\n\txor.b32 \t%r21, %r2, %r20;\n"
        "\tadd.s32 \t%r5, %r4, %r21;",
    ),
)
# 16 branches in a row, each joining a condition twice the size of the one before: zero where i >= m and, for each
# k, i < 1000 + k or i >= m + k (the conditions past conditions.MAX_NODES are not followed)
JOINS = (
    f"{INDEX}{ZERO}\tsetp.ge.u32 \t%p3, %r13, %r19;\n"
    + "".join(
        f"\tsetp.lt.u32 \t%p4, %r13, {1000 + k};\n\t@%p4 bra \t$L__j{k};\n\tadd.s32 \t%r15, %r19, {k};\n"
        f"\tsetp.ge.u32 \t%p5, %r13, %r15;\n\tand.pred \t%p3, %p3, %p5;\n$L__j{k}:\n"
        for k in range(16)
    )
    + f"\t@%p3 bra \t$L__st;\n{LOAD}$L__st:\n"
)
GE_M = "\tsetp.ge.u32 \t%p3, %r13, %r19;\n"  # zero where i >= m

HELD = {
    # i >= m zero-filled: monotone, the bound a parameter: the proof per run (the sanity case)
    "monotone_ge_param": Probe(_branch("\tsetp.ge.u32 \t%p3, %r13, %r19;\n")),
    # the same as a predicated load (`@!p ld`) and with the guard negated on the branch
    "predicated_negated_load": Probe(f"{INDEX}{ZERO}\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@!%p3 {LOAD[1:]}"),
    "negated_branch_guard": Probe(_branch("\tsetp.lt.u32 \t%p3, %r13, %r19;\n", guard="@!%p3")),
    # the load on the taken way, the zero on the other: `@p bra LD; mov 0; bra ST; LD: ld; ST:`
    "load_on_the_taken_way": Probe(
        f"{INDEX}\tsetp.lt.u32 \t%p3, %r13, %r19;\n\t@%p3 bra \t$L__ld;\n{ZERO}\tbra.uni \t$L__st;\n$L__ld:\n{LOAD}"
        "$L__st:\n"
    ),
    # the zero after the load, guarded: `ld; @p mov 0`
    "zero_after_the_load": Probe(f"{INDEX}{LOAD}\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@%p3 mov.f32 \t%f2, 0f00000000;\n"),
    # zero-fill by selp, the load first or second
    "selp_load_first": Probe(
        f"{INDEX}\tsetp.lt.u32 \t%p3, %r13, %r19;\n{LOAD4}\tselp.f32 \t%f2, %f4, 0f00000000, %p3;\n"
    ),
    "selp_load_second": Probe(
        f"{INDEX}\tsetp.ge.u32 \t%p3, %r13, %r19;\n{LOAD4}\tselp.f32 \t%f2, 0f00000000, %f4, %p3;\n"
    ),
    # the zero through a register: `mov %f5, 0; mov %f2, %f5`
    "zero_through_a_register": Probe(
        _branch("\tsetp.ge.u32 \t%p3, %r13, %r19;\n").replace(ZERO, "\tmov.b32 \t%f5, 0;\n\tmov.f32 \t%f2, %f5;\n")
    ),
    # the bound first (`m <= i`) and an immediate first (`200 <= i`): the compare mirrored
    "bound_first": Probe(_branch("\tsetp.le.u32 \t%p3, %r19, %r13;\n")),
    "immediate_first": Probe(_branch("\tsetp.le.u32 \t%p3, 300, %r13;\n")),
    # setp p|q with the first destination used: p is the compare
    "predicate_pair_first": Probe(_branch("\tsetp.ge.u32 \t%p3|%p4, %r13, %r19;\n")),
    # not.pred; and or.pred for the halo on both sides, g = i - 100: zero where g < 0 or g >= m - 100
    "not_pred": Probe(_branch("\tsetp.lt.u32 \t%p4, %r13, %r19;\n\tnot.pred \t%p3, %p4;\n")),
    "halo_both_sides_or": Probe(
        _branch(
            "\tadd.s32 \t%r14, %r13, -100;\n\tadd.s32 \t%r15, %r19, -100;\n\tsetp.lt.s32 \t%p4, %r14, 0;\n"
            "\tsetp.ge.s32 \t%p5, %r14, %r15;\n\tor.pred \t%p3, %p4, %p5;\n"
        )
    ),
    # nvcc's nested form of the halo: two branches to one zero block, the load between
    "halo_nested_branches": Probe(
        f"{INDEX}\tadd.s32 \t%r14, %r13, -100;\n\tadd.s32 \t%r15, %r19, -100;\n\tsetp.lt.s32 \t%p4, %r14, 0;\n"
        "\t@%p4 bra \t$L__z;\n\tsetp.ge.s32 \t%p5, %r14, %r15;\n\t@%p5 bra \t$L__z;\n"
        f"{LOAD}\tbra.uni \t$L__st;\n$L__z:\n{ZERO}$L__st:\n"
    ),
    # zero where 280 <= i < m: both ends of trip 2's run (256..383) load, its middle does not (an or is proven by
    # one of its sides for every word)
    "holds_at_both_ends_not_in_the_middle": Probe(
        _branch("\tsetp.ge.u32 \t%p4, %r13, 280;\n\tsetp.lt.u32 \t%p5, %r13, %r19;\n\tand.pred \t%p3, %p4, %p5;\n")
    ),
    # not monotone over a run: i % 7 < 3, i & 1 (both from i >= m on), i == m: not followed or not proven
    "remainder": Probe(_branch(f"\trem.u32 \t%r14, %r13, 7;\n\tsetp.lt.u32 \t%p4, %r14, 3;\n{FROM_M}")),
    "low_bit": Probe(_branch(f"\tand.b32 \t%r14, %r13, 1;\n\tsetp.ne.u32 \t%p4, %r14, 0;\n{FROM_M}")),
    "equal": Probe(_branch("\tsetp.eq.u32 \t%p3, %r13, %r19;\n")),
    # i * i >= m * m: degree 2, each word a compare of its own
    "square": Probe(
        _branch(
            "\tmul.lo.s32 \t%r14, %r13, %r13;\n\tmul.lo.s32 \t%r15, %r19, %r19;\n\tsetp.ge.u32 \t%p3, %r14, %r15;\n"
        )
    ),
    # a compare chosen by a uniform branch (m > 200): (m > 200 and i >= m) or (m <= 200 and i >= m - 100)
    "select_between_two_compares": Probe(
        f"{INDEX}{ZERO}\tsetp.gt.u32 \t%p5, %r19, 200;\n\t@%p5 bra \t$L__a;\n\tadd.s32 \t%r15, %r19, -100;\n"
        "\tsetp.ge.u32 \t%p3, %r13, %r15;\n\tbra.uni \t$L__b;\n$L__a:\n\tsetp.ge.u32 \t%p3, %r13, %r19;\n$L__b:\n"
        f"\t@%p3 bra \t$L__st;\n{LOAD}$L__st:\n"
    ),
    # a compare chosen by the thread (tid < 64): i >= m or i >= m - 50, a bound that differs per word
    "select_by_thread": Probe(
        f"{INDEX}{ZERO}\tsetp.lt.u32 \t%p5, %r2, 64;\n\t@%p5 bra \t$L__a;\n\tadd.s32 \t%r15, %r19, -50;\n"
        "\tsetp.ge.u32 \t%p3, %r13, %r15;\n\tbra.uni \t$L__b;\n$L__a:\n\tsetp.ge.u32 \t%p3, %r13, %r19;\n$L__b:\n"
        f"\t@%p3 bra \t$L__st;\n{LOAD}$L__st:\n"
    ),
    # signed: j = i + 2^31 - 320 crosses 2^31 inside trip 2 (i = 256..383); zero where j < -2^31 + m - 880
    # (m = 900: i in [320, 340)): both ends of trip 2's run load, its middle does not; only the no-wrap check
    # keeps it off the bulk path
    "signed_crossing_2_31": Probe(
        _branch(
            "\tadd.s32 \t%r14, %r13, 2147483328;\n\tadd.s32 \t%r15, %r19, 2147482768;\n"
            "\tsetp.lt.s32 \t%p3, %r14, %r15;\n"
        ),
        bound=900,
        never=1200,
    ),
    # unsigned with a negative index: x = i - m; zero where x >u 2^32 - 32 (i in [m - 31, m)): both ends of trip 2's
    # run (x = -44 and 83) load, its middle does not
    "unsigned_negative_index": Probe(
        _branch("\tsub.s32 \t%r14, %r13, %r19;\n\tsetp.hi.u32 \t%p3, %r14, -32;\n"), never=100000
    ),
    # 16 bits: h = (i - m - 6) mod 2^16; zero where h < 4 (i in [m + 6, m + 10)): h wraps inside trip 2's run
    "sixteen_bit_wrap": Probe(
        _branch(
            "\tsub.s32 \t%r14, %r13, %r19;\n\tcvt.u16.u32 \t%rs1, %r14;\n\tadd.s16 \t%rs1, %rs1, -6;\n"
            "\tsetp.lt.u16 \t%p3, %rs1, 4;\n"
        ),
        never=100000,
    ),
    # a bound that changes per trip: zero where i >= m - 32 t (the trip counter on both sides)
    "bound_per_trip": Probe(
        _branch("\tshl.b32 \t%r15, %r12, 5;\n\tsub.s32 \t%r15, %r19, %r15;\n\tsetp.ge.u32 \t%p3, %r13, %r15;\n")
    ),
    # 64-bit: the index widened and compared with the widened bound
    "sixty_four_bit_compare": Probe(
        _branch("\tcvt.u64.u32 \t%rd11, %r13;\n\tcvt.u64.u32 \t%rd12, %r19;\n\tsetp.ge.u64 \t%p3, %rd11, %rd12;\n")
    ),
    # the 64-bit index compared on its low 32 bits (a truncation of a widening)
    "truncated_sixty_four_bit": Probe(
        _branch("\tcvt.u64.u32 \t%rd11, %r13;\n\tcvt.u32.u64 \t%r14, %rd11;\n\tsetp.ge.u32 \t%p3, %r14, %r19;\n")
    ),
    # 32-bit values sign-extended: zero where sext(i - 512) >= sext(m - 512), both negative
    "sign_extended_sixty_four_bit": Probe(
        _branch(
            "\tadd.s32 \t%r14, %r13, -512;\n\tcvt.s64.s32 \t%rd11, %r14;\n\tadd.s32 \t%r15, %r19, -512;\n"
            "\tcvt.s64.s32 \t%rd12, %r15;\n\tsetp.ge.s64 \t%p3, %rd11, %rd12;\n"
        )
    ),
    # a predicate operand negated (`!%p`, which ptxas takes): in selp, and.pred, mov.pred, a combining setp
    "selp_negated_predicate": Probe(
        f"{INDEX}\tsetp.ge.u32 \t%p3, %r13, %r19;\n{LOAD4}\tselp.f32 \t%f2, %f4, 0f00000000, !%p3;\n"
    ),
    "and_pred_negated_operand": Probe(
        _branch("\tsetp.ge.u32 \t%p4, %r13, 280;\n\tsetp.ge.u32 \t%p5, %r13, %r19;\n\tand.pred \t%p3, %p4, !%p5;\n")
    ),
    "mov_pred_negated_operand": Probe(_branch("\tsetp.lt.u32 \t%p4, %r13, %r19;\n\tmov.pred \t%p3, !%p4;\n")),
    "setp_and_negated_operand": Probe(
        _branch("\tsetp.lt.u32 \t%p4, %r13, 280;\n\tsetp.ge.and.u32 \t%p3, %r13, %r19, !%p4;\n")
    ),
    # a compare of 64-bit values the same in every word: the trip zero-filled where 128 (t + 1) > m
    "uniform_sixty_four_bit_compare": Probe(
        _branch(
            "\tcvt.u64.u32 \t%rd11, %r12;\n\tshl.b64 \t%rd11, %rd11, 7;\n\tadd.s64 \t%rd11, %rd11, 128;\n"
            "\tcvt.u64.u32 \t%rd12, %r19;\n\tsetp.gt.u64 \t%p3, %rd11, %rd12;\n"
        )
    ),
    # the bound read as 16 bits of the parameter, the index truncated to 16 bits
    "sixteen_bit_parameter": Probe(
        _branch("\tld.param.u16 \t%rs2, [staged_m];\n\tcvt.u16.u32 \t%rs1, %r13;\n\tsetp.ge.u16 \t%p3, %rs1, %rs2;\n")
    ),
    # a combining setp (.and, .or, .xor with a predicate), xor.pred
    "setp_and": Probe(_branch("\tsetp.ge.u32 \t%p4, %r13, 280;\n\tsetp.lt.and.u32 \t%p3, %r13, %r19, %p4;\n")),
    "setp_or": Probe(_branch("\tsetp.lt.u32 \t%p4, %r13, 20;\n\tsetp.ge.or.u32 \t%p3, %r13, %r19, %p4;\n")),
    "setp_xor": Probe(_branch("\tsetp.lt.u32 \t%p4, %r13, 20;\n\tsetp.ge.xor.u32 \t%p3, %r13, %r19, %p4;\n")),
    "xor_pred": Probe(
        _branch("\tsetp.lt.u32 \t%p4, %r13, 20;\n\tsetp.ge.u32 \t%p5, %r13, %r19;\n\txor.pred \t%p3, %p4, %p5;\n")
    ),
    # the bound loaded from memory each trip (a[0]'s low bits + m - 512)
    "loaded_bound": Probe(
        _branch(
            "\tld.global.nc.u32 \t%r15, [%rd3];\n\tand.b32 \t%r15, %r15, 255;\n\tadd.s32 \t%r15, %r15, %r19;\n"
            "\tadd.s32 \t%r15, %r15, -128;\n\tsetp.ge.u32 \t%p3, %r13, %r15;\n"
        )
    ),
    # zero-fill of block 1 only (a compare of %ctaid alone: one compare per run, no word's constant)
    "block_only": Probe(_branch("\tsetp.eq.u32 \t%p3, %r3, %r19;\n"), bound=1, blocks=2, never=7),
    # a predicate set before the loop (the first trip's i >= m) and in the tail (the next trip's): the staging part
    # reads it as the trip before left it
    "predicate_redefined_in_the_loop": Probe(
        _branch("", index=""),
        edits=(
            (BEFORE_LOOP, f"{BEFORE_LOOP}\tsetp.ge.u32 \t%p3, %r5, %r19;\n"),
            (
                TAIL,
                f"{TAIL}\tshl.b32 \t%r16, %r12, 7;\n\tadd.s32 \t%r16, %r16, %r5;\n\tsetp.ge.u32 \t%p3, %r16, %r19;\n",
            ),
        ),
    ),
    # one predicate for the zero-fill, redefined and used again before the load (tid < 200: always)
    "predicate_reused_after_redefinition": Probe(
        f"{INDEX}{ZERO}\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@%p3 bra \t$L__st;\n\tsetp.lt.u32 \t%p3, %r2, 200;\n"
        f"\t@%p3 bra \t$L__ld;\n\tbra.uni \t$L__st;\n$L__ld:\n{LOAD}$L__st:\n"
    ),
    # the bound m + %ntid.x: the grown block would change it (refused)
    "ntid_bound": Probe(
        _branch("\tmov.u32 \t%r15, %ntid.x;\n\tadd.s32 \t%r15, %r15, %r19;\n\tsetp.ge.u32 \t%p3, %r13, %r15;\n"),
        bound=200,
    ),
    # the bound m + 64 t read from memory the loop writes (the thread's own output word): by the tail, by the
    # compute part, or a shared word the compute part writes; the producers would read it trips ahead (refused)
    "bound_written_in_the_tail": Probe(
        _branch(BOUND_FROM_OWN_WORD),
        edits=((BEFORE_LOOP, OWN_WORD), (TAIL, f"{TAIL}{NEXT_BOUND}\tst.global.u32 \t[%rd15], %r25;\n")),
        bound=200,
    ),
    "bound_written_in_the_compute_part": Probe(
        _branch(BOUND_FROM_OWN_WORD),
        edits=((BEFORE_LOOP, OWN_WORD), (FMA, f"{FMA}{NEXT_BOUND}\tst.global.u32 \t[%rd15], %r25;\n")),
        bound=200,
    ),
    "shared_bound_written_in_the_compute_part": Probe(
        _branch(BOUND_FROM_OWN_WORD.replace("ld.global.u32 \t%r15, [%rd15]", "ld.shared.u32 \t%r15, [bound]")),
        edits=(
            (
                "\t.shared .align 4 .b8 tile[512];",
                "\t.shared .align 4 .b8 tile[512];\n\t.shared .align 4 .u32 bound[1];",
            ),
            (BEFORE_LOOP, f"{BEFORE_LOOP}\tst.shared.u32 \t[bound], 0;\n\tbar.sync \t0;\n"),
            (FMA, f"{FMA}{NEXT_BOUND}\tst.shared.u32 \t[bound], %r25;\n"),
        ),
        bound=200,
    ),
    # the trip counter the index reads stepped at the top of the trip or in the compute part (refused), an index
    # stepped in the tail by a register set before the loop to m - m + 128
    "counter_stepped_at_the_top": Probe(_branch(GE_M), edits=((TAIL, ""), ("$L__loop:\n", f"$L__loop:\n{TAIL}"))),
    "counter_stepped_in_the_compute_part": Probe(_branch(GE_M), edits=((TAIL, ""), (FMA, FMA + TAIL))),
    "index_stepped_by_a_uniform_register": Probe(
        _branch(GE_M, index="\tadd.s32 \t%r13, %r30, %r5;\n"),
        edits=(
            (
                BEFORE_LOOP,
                f"{BEFORE_LOOP}\tmov.u32 \t%r30, 0;\n\tsub.s32 \t%r31, %r19, %r19;\n\tadd.s32 \t%r31, %r31, 128;\n",
            ),
            (TAIL, f"{TAIL}\tadd.s32 \t%r30, %r30, %r31;\n"),
        ),
    ),
    "sixty_four_runs_of_one_granule": Probe(None, bound=1100, edits=SIXTY_FOUR_RUNS, floats=512, never=100000),
    # the load predicated first, the zero after under the opposite guard: `@!p ld; @p mov 0`
    "zero_after_a_predicated_load": Probe(
        f"{INDEX}\tsetp.ge.u32 \t%p3, %r13, %r19;\n\t@!%p3 {LOAD[1:]}\t@%p3 mov.f32 \t%f2, 0f00000000;\n"
    ),
    # a predicate built through selp: `selp.u32 r, 1, 0, p; setp.ne r, 0`
    "selp_built_predicate": Probe(
        _branch("\tsetp.ge.u32 \t%p4, %r13, %r19;\n\tselp.u32 \t%r14, 1, 0, %p4;\n\tsetp.ne.u32 \t%p3, %r14, 0;\n")
    ),
    # a bound per thread: zero where i >= m - tid (both sides vary from word to word)
    "bound_per_thread": Probe(_branch("\tsub.s32 \t%r15, %r19, %r2;\n\tsetp.ge.u32 \t%p3, %r13, %r15;\n")),
    # unsigned `lo` with a negative index: x = i - m; zero where x <u 200 (i in [m, m + 200))
    "unsigned_lo_negative_index": Probe(_branch("\tsub.s32 \t%r14, %r13, %r19;\n\tsetp.lo.u32 \t%p3, %r14, 200;\n")),
    # a store of run and loose words (m = 340: trip 2 zero-fills loose words only), and with i & 1 from i >= m on
    "mixed_store_monotone": Probe(_branch(GE_M), edits=MIXED_STORE),
    "mixed_store_zero_fills_loose_words_only": Probe(_branch(GE_M), edits=MIXED_STORE, bound=340),
    "mixed_store_low_bit": Probe(
        _branch(f"\tand.b32 \t%r14, %r13, 1;\n\tsetp.ne.u32 \t%p4, %r14, 0;\n{FROM_M}"), edits=MIXED_STORE
    ),
    # the zero set in the compute part of the trip before (after the store), the staging part's branch around the
    # load: the stored register's zero comes from outside the staging part
    "zero_from_the_trip_before": Probe(
        f"{INDEX}{GE_M}\t@%p3 bra \t$L__st;\n{LOAD}$L__st:\n",
        edits=((BEFORE_LOOP, f"{BEFORE_LOOP}{ZERO}"), (FMA, f"{FMA}{ZERO}")),
    ),
    "sixteen_joins_in_a_row": Probe(JOINS),
    # the guard on the st.shared instead of the load: a byte some trips skip (refused)
    "guarded_store": Probe(
        None,
        edits=((LOAD + STORE, f"{INDEX}{LOAD}\tsetp.lt.u32 \t%p3, %r13, %r19;\n\t@%p3 st.shared.f32 \t[%r8], %f2;\n"),),
        never=100000,
    ),
    # runs of one 16-byte granule each (32 runs), each proven at its two ends
    "runs_of_one_granule": Probe(_branch("\tsetp.ge.u32 \t%p3, %r13, %r19;\n"), edits=GRANULES, floats=256),
    # two runs, two conditions (i >= m, i < 100)
    "two_runs_two_conditions": Probe(None, edits=TWO_RUNS, floats=256, never=100000),
    # nvcc's fill loop, the zero in each iteration
    "fill_loop": Probe(None, bound=384, edits=FILL_LOOP_ZEROED, floats=256, never=100000),
}


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", sorted(HELD))
def test_held(name: str) -> None:
    """Refused, or the input's bits with bulk copies on some trips (the per-run proof or the check pass)."""
    _checked(HELD[name])


# ---------------------------------------------------------------------------------------------------------------
# Breaks that were: the pass copied in bulk bytes the input zero-fills or keeps. Each is what a correct pass must do.

BROKEN = {
    # `setp.lt p4|p3, i, m`: p3 is i >= m (the second destination is the negation, PTX ISA setp); sources.py gives
    # both destinations the compare: the proof checks i >= m where the input loads i < m
    "predicate_pair_second": Probe(_branch("\tsetp.lt.u32 \t%p4|%p3, %r13, %r19;\n")),
    "predicate_pair_sink": Probe(_branch("\tsetp.lt.u32 \t_|%p3, %r13, %r19;\n")),
    # the fill loop with the zero once per trip: on block 0's trip 1 (m = 384) iteration 0 loads i = 256..383 and
    # iteration 1 skips its loads (i = 384..511): tile[128 + t] keeps a[256 + t]; sources.py follows the skipped
    # load's address as the word's source (SourceTrace.last is set on both ways of the branch) and its condition
    # as `(skipped and loaded before) or loaded`: the proof holds and the bulk copy reads a[384 + t]
    "fill_loop_keeps_the_word_before": Probe(None, bound=384, edits=FILL_LOOP, floats=256, never=100000),
    # the fill loop's load predicated instead: loaded where it is iteration 0 or i < m, no zero in the loop: every
    # word's flag is on (iteration 1's `on or loaded`), so no compare is checked at all and every aligned trip is
    # copied in bulk from iteration 1's addresses, where the input keeps iteration 0's floats for i >= m
    "fill_loop_predicated_load_keeps_the_word_before": Probe(
        None, bound=384, edits=FILL_LOOP_PREDICATED, floats=256, never=100000
    ),
}


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken(name: str) -> None:
    """Once broken (sources.py: the pair's second destination given the compare itself; a load skipped on a fill
    iteration taken as the word's source): refused, or the input's bits with bulk copies on some trips."""
    _checked(BROKEN[name])


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("name", ["predicate_pair_second", "predicate_pair_sink"])
def test_predicate_pair_proven_per_run(name: str) -> None:
    """q of `setp p|q` is followed as the compare's negation, not given up: the zero-fill is proven once per run."""
    assert _checked(BROKEN[name]) == "per run"


@pytest.mark.usefixtures("ptxas")
def test_predicated_load_then_zero_is_not_stale() -> None:
    """`@!p ld; @p mov 0`: where the load is skipped the zero overwrites the register (p and not p folds to false),
    so its words keep their source and are copied in bulk, not left loose."""
    assert not _checked(HELD["zero_after_a_predicated_load"]).startswith("refused")

"""Loads in flight per SASS loop (`ptxtool.analysis.batching`): on hand-written SASS, where every rule of the
definition has its case, and on ptxas's own output for PTX whose batching is known (8 independent loads then their
sums: 8; a chain where each load's address needs the previous load: 1)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from ptxtool.analysis.batching import in_flight, listing_of, named, sass_loops, written
from ptxtool.toolchain.sass import CLASSES, ListingLine, parse_op


def loops(text: str, counted_lines=None):
    return sass_loops(listing_of(text), counted_lines)


EIGHT_THEN_SUMS = """
        /*0000*/  MOV R2, c[0x0][0x210] ;
.L_x_0:
        /*0010*/  LDG.E R4, desc[UR4][R2.64] ;
        /*0020*/  LDG.E R5, desc[UR4][R2.64+0x4] ;
        /*0030*/  LDG.E R6, desc[UR4][R2.64+0x8] ;
        /*0040*/  LDG.E R7, desc[UR4][R2.64+0xc] ;
        /*0050*/  LDS R8, [R9] ;
        /*0060*/  LDS R10, [R9+0x4] ;
        /*0070*/  LDSM.16.M88.2 R12, [R9+0x10] ;
        /*0080*/  LDG.E.128 R16, desc[UR4][R2.64+0x10] ;
        /*0090*/  FADD R0, R0, R4 ;
        /*00a0*/  FADD R0, R0, R5 ;
        /*00b0*/  FADD R0, R0, R6 ;
        /*00c0*/  FADD R0, R0, R7 ;
        /*00d0*/  FADD R0, R0, R8 ;
        /*00e0*/  FADD R0, R0, R10 ;
        /*00f0*/  HADD2 R0, R0, R13 ;
        /*0100*/  FADD R0, R0, R19 ;
        /*0110*/  IADD3 R2, P0, R2, 0x20, RZ ;
        /*0120*/  @P1 BRA `(.L_x_0) ;
        /*0130*/  EXIT ;
"""


def test_eight_independent_loads_then_their_sums():
    (loop,) = loops(EIGHT_THEN_SUMS)
    assert (loop.loads, loop.in_flight, loop.inner) == (8, 8, True)


def test_each_load_consumed_at_once():
    text = """
.L_x_0:
    LDG.E R4, desc[UR4][R2.64] ;
    FADD R0, R0, R4 ;
    LDS R5, [R9] ;
    FADD R0, R0, R5 ;
    LDG.E R4, desc[UR4][R2.64+0x4] ;
    FADD R0, R0, R4 ;
    @P0 BRA `(.L_x_0) ;
"""
    (loop,) = loops(text)
    assert (loop.loads, loop.in_flight) == (3, 1)


def test_wide_loads_cover_their_registers():
    # LDG.E.128 R4 writes R4..R7: reading R7 waits for it; LDS.64 R8 writes R8, R9: reading R9 waits
    assert written(parse_op("LDG.E.128.CONSTANT R4, desc[UR6][R2.64]")) == {4, 5, 6, 7}
    assert written(parse_op("LDS.64 R8, [R3+0x10]")) == {8, 9}
    assert written(parse_op("LDSM.16.MT88.4 R12, [R3]")) == {12, 13, 14, 15}
    assert written(parse_op("@P0 LDG.E R5, desc[UR6][R4.64]")) == {5}
    text = """
    LDG.E.128 R4, desc[UR4][R2.64] ;
    FADD R0, R0, R7 ;
    LDS.64 R8, [R3] ;
    FADD R0, R0, R9 ;
    LDS R10, [R3+0x8] ;
    LDS R11, [R3+0xc] ;
    FADD R0, R10, R11 ;
"""
    ops = [parse_op(x.text) for x in listing_of(text)]
    assert in_flight(ops) == 2  # R7 landed the 128-bit load, R9 the 64-bit one
    assert in_flight([op for op in ops if "R7" not in op.operands]) == 3
    assert in_flight([op for op in ops if "R9" not in op.operands]) == 3


def test_pairs_and_uniform_registers_are_named_at_their_width():
    assert named(parse_op("IMAD.WIDE.U32 R4, R7, 0x4, R8")) == {4, 5, 7, 8, 9}
    assert named(parse_op("DFMA R4, R6, R8, R10")) == {4, 5, 6, 7, 8, 9, 10, 11}
    assert named(parse_op("STG.E.64 desc[UR6][R2.64], R4")) == {2, 3, 4, 5}
    assert named(parse_op("ISETP.GE.U32.AND P0, PT, R7.reuse, UR8, PT")) == {7}  # UR8 is no general register
    assert named(parse_op("S2R R3, SR_TID.X")) == {3}
    assert named(parse_op("LDG.E.SYS R4, [R2+0x10]")) == {2, 3, 4}  # `.E`: a 64-bit address without `.64`
    assert named(parse_op("LDGSTS.E [R7], desc[UR6][R2.64]")) == {7, 2, 3}  # the shared address is 32-bit
    assert named(parse_op("F2F.F64.F32 R4, R2")) == {4, 5, 2}  # destination type, then source type
    assert named(parse_op("F2I.F64.TRUNC R2, R6")) == {2, 6, 7}  # a lone float type is F2I's source
    assert named(parse_op("I2F.F64 R6, R3")) == {6, 7, 3}  # and I2F's destination
    assert named(parse_op("ISETP.GE.U64.AND P0, PT, R8, R6, PT")) == {6, 7, 8, 9}
    assert named(parse_op("SHF.L.U64.HI R4, R4, 0x8, R5")) == {4, 5}  # a funnel shift of two 32-bit halves
    assert named(parse_op("IMAD.WIDE.U32 R6, P0, R13, 0x4, R4")) == {6, 7, 13, 4, 5}  # carry out: addend 4th
    assert named(parse_op("IMAD.WIDE R2, R2, R3, c[0x0][0x160]")) == {2, 3}
    hmma = named(parse_op("HMMA.16816.F32.BF16 R4, R8, R12, R16"))  # m16n8k16: D 4, A 4, B 2, C 4 registers
    assert hmma == {*range(4, 8), *range(8, 12), 12, 13, *range(16, 20)}
    assert named(parse_op("HMMA.1684.F32.TF32 R4, R8, R6, RZ")) == {*range(4, 8), 8, 9, 6}
    assert named(parse_op("HGMMA.64x64x16.F32 R24, gdesc[UR4], R24")) == set(range(24, 56))
    assert named(parse_op("CALL.REL.NOINC `(f)")) == set(range(255))  # the callee may read any register
    # a pair read through `Rn.64` waits for a load of its upper half
    text = """
.L_x_0:
    LDG.E R5, desc[UR4][R8.64] ;
    LDG.E R6, desc[UR4][R4.64] ;
    FADD R0, R0, R6 ;
    @P0 BRA `(.L_x_0) ;
"""
    assert loops(text)[0].in_flight == 1
    assert loops(text.replace("desc[UR4][R4.64]", "[R4]"))[0].in_flight == 1  # `.E`: 64-bit addresses
    assert loops(text.replace("LDG.E R6, desc[UR4][R4.64]", "LDS R6, [R4]"))[0].in_flight == 2


def test_writing_a_register_in_flight_waits_for_the_load():
    text = """
.L_x_0:
    LDG.E R4, desc[UR4][R2.64] ;
    LDG.E R5, desc[UR4][R2.64+0x4] ;
    MOV R4, RZ ;
    LDG.E R6, desc[UR4][R2.64+0x8] ;
    FADD R0, R0, R6 ;
    @P0 BRA `(.L_x_0) ;
"""
    assert loops(text)[0].in_flight == 2
    assert loops(text.replace("MOV R4, RZ", "MOV R7, RZ"))[0].in_flight == 3


def test_a_cta_barrier_completes_shared_loads_not_global_ones():
    # ptxas gives a shared load read only after a BAR.SYNC no scoreboard: the barrier completes it
    text = """
.L_x_0:
    LDG.E R4, desc[UR4][R2.64] ;
    LDS R5, [R9] ;
    LDSM.16.M88.2 R6, [R9+0x10] ;
    BAR.SYNC.DEFER_BLOCKING 0x0 ;
    LDS R8, [R9+0x4] ;
    FADD R0, R4, R5 ;
    FADD R0, R0, R6 ;
    FADD R0, R0, R8 ;
    @P0 BRA `(.L_x_0) ;
"""
    assert loops(text)[0].in_flight == 3  # before the barrier; after it, the global load and one shared load
    assert loops(text.replace("BAR.SYNC.DEFER_BLOCKING 0x0", "BAR.ARV 0x1, 0x40"))[0].in_flight == 4


def test_loads_for_the_next_trip_count():
    # software pipelined: the loads at the end of a trip are read at the start of the next one
    text = """
.L_x_0:
    FADD R0, R0, R4 ;
    FADD R0, R0, R5 ;
    FADD R0, R0, R6 ;
    LDG.E R4, desc[UR4][R2.64] ;
    LDG.E R5, desc[UR4][R2.64+0x4] ;
    LDG.E R6, desc[UR4][R2.64+0x8] ;
    @P0 BRA `(.L_x_0) ;
"""
    assert loops(text)[0].in_flight == 3


def test_constant_and_async_loads_are_not_counted():
    text = """
.L_x_0:
    LDC R4, c[0x0][0x210] ;
    ULDC UR4, c[0x0][0x214] ;
    LDGSTS.E [R8], desc[UR4][R2.64] ;
    LDG.E R5, desc[UR4][R2.64] ;
    FADD R0, R4, R5 ;
    @P0 BRA `(.L_x_0) ;
"""
    (loop,) = loops(text)
    assert (loop.loads, loop.in_flight) == (1, 1)


def test_nested_loops_each_count_their_own_body():
    text = """
.L_x_0:
    LDG.E R4, desc[UR4][R2.64] ;
    LDG.E R5, desc[UR4][R2.64+0x4] ;
.L_x_1:
    LDS R6, [R9] ;
    FADD R0, R0, R6 ;
    @P1 BRA `(.L_x_1) ;
    FADD R0, R0, R4 ;
    FADD R0, R0, R5 ;
    @P0 BRA `(.L_x_0) ;
    EXIT ;
"""
    outer, inner = loops(text)
    assert (outer.loads, outer.in_flight, outer.inner) == (2, 2, False)
    assert (inner.loads, inner.in_flight, inner.inner) == (1, 1, True)


SPIN_OUT_OF_LINE = """
    MOV R0, RZ ;
.L_x_5:
    LDS R4, [R9] ;
    LDS R5, [R9+0x4] ;
    SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R8+URZ], R6 ;
    @!P0 BRA `(.L_x_4) ;
.L_x_8:
    LDS R10, [R9+0x8] ;
    FADD R0, R4, R5 ;
    FADD R0, R0, R10 ;
    @P1 BRA `(.L_x_5) ;
    EXIT ;
.L_x_4:
    SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R8+URZ], R6 ;
    @!P0 BRA `(.L_x_4) ;
    BRA `(.L_x_8) ;
.L_x_9:
    BRA `(.L_x_9) ;
"""


def test_an_out_of_line_wait_is_part_of_its_loop_not_a_loop_of_its_own():
    # ptxas moves a try_wait's retry out of line; its jump back into the loop is no back edge (its target does
    # not dominate it), the retry spin is a loop nested in the loop, and the trap loop after EXIT is unreachable
    outer, spin = loops(SPIN_OUT_OF_LINE)
    assert (outer.head, outer.loads, outer.in_flight, outer.inner) == (1, 3, 3, False)
    assert (spin.loads, spin.inner) == (0, True)
    assert 12 in outer.body and 9 not in outer.body  # the retry's jump back belongs to the loop; EXIT does not


def test_only_loads_of_the_given_lines_count():
    lines = [
        ListingLine(".L_x_0:"),
        ListingLine("LDG.E R4, desc[UR4][R2.64]", ptx_line=10),
        ListingLine("LDS R5, [R9]", ptx_line=20),
        ListingLine("LDS R6, [R9+0x4]", ptx_line=20),
        ListingLine("FADD R0, R5, R6", ptx_line=21),
        ListingLine("FADD R0, R0, R4", ptx_line=22),
        ListingLine("@P0 BRA `(.L_x_0)", ptx_line=23),
    ]
    assert sass_loops(lines)[0].in_flight == 3
    (loop,) = sass_loops(lines, {20})
    assert (loop.loads, loop.in_flight, loop.lines) == (2, 2, frozenset({10, 20, 21, 22, 23}))


def test_no_loop_no_instructions():
    assert loops("EXIT ;") == ()
    assert loops("") == ()
    assert loops(".L_x_0:\n BRA `(.L_x_0) ;")[0].in_flight == 0  # reachable self-loop: a loop without loads


# ---------------------------------------------------------------- on ptxas's output


def _sums(batched: bool) -> str:
    """A loop of 8 loads per trip (`nounroll`): all of them, then their sum; or a chain, each load's address
    computed from the value the previous one loaded."""
    body = []
    if batched:
        body += [f"\tld.global.nc.f32 \t%f{k + 1}, [%rd4+{4 * k}];" for k in range(8)]
        body += [f"\tadd.f32 \t%f0, %f0, %f{k + 1};" for k in range(8)]
    else:
        for k in range(8):
            body += [f"\tld.global.u32 \t%r{k + 10}, [%rd4+{4 * k}];", f"\tmul.wide.u32 \t%rd5, %r{k + 10}, 4;"]
            body += ["\tadd.s64 \t%rd4, %rd4, %rd5;", f"\tcvt.rn.f32.u32 \t%f{k + 1}, %r{k + 10};"]
            body += [f"\tadd.f32 \t%f0, %f0, %f{k + 1};"]
    lines = "\n".join(body)
    return f""".version 8.0
.target sm_90
.address_size 64

.visible .entry sums(.param .u64 sums_a, .param .u64 sums_out, .param .u32 sums_n)
{{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<20>;
\t.reg .f32 \t%f<10>;
\t.reg .b64 \t%rd<8>;

\tld.param.u64 \t%rd1, [sums_a];
\tld.param.u64 \t%rd2, [sums_out];
\tld.param.u32 \t%r1, [sums_n];
\tcvta.to.global.u64 \t%rd4, %rd1;
\tmov.f32 \t%f0, 0f00000000;
\tmov.u32 \t%r2, 0;
$L__loop:
\t.pragma "nounroll";
{lines}
\tadd.s64 \t%rd4, %rd4, 32;
\tadd.s32 \t%r2, %r2, 1;
\tsetp.lt.u32 \t%p1, %r2, %r1;
\t@%p1 bra \t$L__loop;
\tcvta.to.global.u64 \t%rd6, %rd2;
\tst.global.f32 \t[%rd6], %f0;
\tret;
}}
"""


@pytest.mark.parametrize(("batched", "expected", "first_four"), [(True, 8, 4), (False, 1, 1)])
def test_on_ptxas_output(ptxas, batched, expected, first_four):
    from ptxtool.toolchain.compile import compile_ptx
    from ptxtool.toolchain.sass import listing

    text = _sums(batched)
    sass = listing(compile_ptx(text, "sums.ptx", "sm_90", lineinfo=True).cubin, with_ptx_lines=True)["sums"]
    (loop,) = [loop for loop in sass_loops(sass) if loop.loads]
    assert (loop.loads, loop.in_flight) == (8, expected)
    loads = [n for n, line in enumerate(text.splitlines(), 1) if "ld.global" in line]
    (four,) = [loop for loop in sass_loops(sass, loads[:4]) if loop.loads]  # the PTX lines of the first 4 loads
    assert (four.loads, four.in_flight) == (4, first_four)


# ---------------------------------------------------------------- the operand widths against nvdisasm's own

_ROW = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;\s*//\s*\|(.*)\|\s*$")
ORACLE_PTX = [
    "ptx/gemm_smem.sm90.ptx",
    "ptx/tensorcore.sm80.ptx",
    "ptx/control.sm80.debug.ptx",
    "ptx/texture.sm80.ptx",
    "triton/matmul.sm80.ptx",
    "triton36/flash_fwd.sm90a.ptx",
    "triton36/matmul_fp8.sm90a.ptx",
    "triton36/atomic_cas_lock.sm90a.ptx",
    "triton36ws/attn_tma_ws.sm90a.ptx",
    "fresh/clang.k.sm75.O1g.ptx",
    "fresh/nvcc.k07_wmma.sm80.ptx",
]


def life_range_registers(cubin: bytes) -> list[tuple[str, set[int]]]:
    """Each instruction's text and the general registers `nvdisasm -plr -lrm narrow` marks it using or defining
    (`v`, `^`, `x` in the GPR columns, numbered by the header's rows of digits)."""
    from ptxtool.toolchain.discover import find_tool, run_tool

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "code.cubin"
        path.write_bytes(cubin)
        text = run_tool(find_tool("nvdisasm"), ["-c", "-plr", "-lrm", "narrow", str(path)]).stdout
    out, digits, columns = [], [], {}
    for raw in text.splitlines():
        if row := _ROW.match(raw):
            cell = row.group(2).split("|")[0]
            out.append((row.group(1), {columns[c] for c, mark in enumerate(cell) if mark in "v^x" and c in columns}))
        elif "//" in raw and len(cells := raw.split("//", 1)[1].split("|")) > 2 and re.search(r"\d", cells[1]):
            if re.fullmatch(r"[\s#\d]*", cells[1]):
                digits.append(cells[1].replace("#", " "))
            if "#" in cells[1]:  # the units row ends the header: column -> register number
                columns = {
                    c: int("".join(row[c] if c < len(row) and row[c].isdigit() else "0" for row in digits))
                    for c in range(len(cells[1]))
                    if cells[1][c].isdigit()
                }
                digits = []
    return out


@pytest.mark.parametrize("name", ORACLE_PTX)
def test_named_registers_cover_what_nvdisasm_marks(ptxas, name: str) -> None:
    """On ptxas's SASS of real kernels (GEMMs with LDSM/HMMA/HGMMA, FP64 and 64-bit integer code, atomics, calls,
    old-style `.E` addresses), every register nvdisasm's life ranges mark an instruction using or defining is one
    `named` gives it: a register it missed would keep a load in flight past the instruction that waits for it.
    Texture fetches are left out (their 3-D coordinates are not modelled)."""
    from conftest import CORPUS, target_arch

    from ptxtool.toolchain.compile import compile_ptx

    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"no {path}")
    text = path.read_text()
    cubin = compile_ptx(text, name, target_arch(text)).cubin
    rows = life_range_registers(cubin)
    assert rows, "nvdisasm printed no life ranges"
    missed = [
        (t, sorted(marked - named(parse_op(t))))
        for t, marked in rows
        if marked - named(parse_op(t)) and parse_op(t).mnemonic not in CLASSES["texture"]
    ]
    assert not missed, missed[:5]

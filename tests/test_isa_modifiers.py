"""Modifiers a family does not have at all (`redux.sync.umax`): `parse --check` flags exactly the lines the wheel's
ptxas rejects, and none of the well-formed uses of the same families."""

from __future__ import annotations

from test_isa_legality import ptxas_error_lines

from ptxtool import isa
from ptxtool.analysis.legality import check_module
from ptxtool.syntax import parse

# (instruction, the modifier we must name); each is one made-up or misplaced word on a checked family
BAD = [
    ("redux.sync.umax.u32 %r1, %r2, 0xffffffff;", "umax"),
    ("redux.sync.mul.u32 %r1, %r2, 0xffffffff;", "mul"),
    ("vote.sync.none.pred %p1, %p2, 0xffffffff;", "none"),
    ("vote.sync.all.u32 %p1, %p2, 0xffffffff;", "u32"),
    ("shfl.sync.rot.b32 %r1, %r2, 1, 31, 0xffffffff;", "rot"),
    ("shfl.sync.idx.f32 %r1, %r2, 1, 31, 0xffffffff;", "f32"),
    ("setp.neq.s32 %p1, %r1, %r2;", "neq"),
    ("setp.lt.sat.f32 %p1, %f1, %f2;", "sat"),
    ("atom.global.mul.u32 %r1, [%rd1], %r2;", "mul"),
    ("atom.global.weak.add.u32 %r1, [%rd1], %r2;", "weak"),
    ("atom.local.add.u32 %r1, [%rd1], %r2;", "local"),
    ("red.global.cas.b32 [%rd1], %r1;", "cas"),
    ("red.global.exch.b32 [%rd1], %r1;", "exch"),
    ("redux.sync.add.aligned.u32 %r1, %r2, 0xffffffff;", "aligned"),
    ("bar.sync.aligned 0;", "aligned"),
    ("bar.red.aligned.and.pred %p1, 0, %p2;", "aligned"),
    ("bar.foo 0;", "foo"),
    ("barrier.sync.foo 0;", "foo"),
    ("barrier.cluster.arrive.acq_rel;", "acq_rel"),
    ("cvt.rnd.f32.s32 %f1, %r1;", "rnd"),
    ("cvt.rn.sat.f32.u33 %f1, %r1;", "u33"),
    ("ld.global.fast.u32 %r1, [%rd1];", "fast"),
    ("ld.global.wb.u32 %r1, [%rd1];", "wb"),
    ("ld.release.gpu.global.u32 %r1, [%rd1];", "release"),
    ("ld.global.L2::32B.u32 %r1, [%rd1];", "L2::32B"),
    ("st.global.lu.f32 [%rd1], %f1;", "lu"),
    ("st.global.nc.f32 [%rd1], %f1;", "nc"),
    ("st.acquire.gpu.global.u32 [%rd1], %r1;", "acquire"),
]

# Well-formed uses with many modifiers of the same families: ptxas accepts them, and so must we.
GOOD = [
    "redux.sync.max.abs.NaN.f32 %f1, %f2, 0xffffffff;",
    "redux.sync.xor.b32 %r1, %r2, 0xffffffff;",
    "vote.sync.uni.pred %p1, %p2, 0xffffffff;",
    "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, 0xffffffff;",
    "setp.gtu.and.ftz.f32 %p1|%p2, %f1, %f2, %p1;",
    "setp.hs.u64 %p1, %rd1, %rd2;",
    "atom.acquire.gpu.shared::cta.inc.u32 %r1, [%r2], %r3;",
    "atom.relaxed.sys.global.cas.b64 %rd1, [%rd2], %rd3, %rd4;",
    "atom.global.L2::cache_hint.exch.b32 %r1, [%rd1], %r2, %rd2;",
    "red.release.cluster.global.add.noftz.f16 [%rd1], %rs1;",
    "red.shared.max.s64 [%r1], %rd1;",
    "red.global.v4.f32.add [%rd1], {%f1, %f2, %f3, %f4};",
    "bar.cta.red.popc.u32 %r1, 0, %p1;",
    "bar.red.or.pred %p1, 0, %p2;",
    "barrier.cta.arrive.aligned 0, 32;",
    "barrier.red.aligned.or.pred %p1, 0, %p2;",
    "barrier.cluster.arrive.release.aligned;",
    "barrier.cluster.wait.acquire.aligned;",
    "cvt.rzi.ftz.sat.s32.f32 %r1, %f1;",
    "cvt.rn.satfinite.relu.e4m3x2.f16x2 %rs1, %r1;",
    "cvt.rs.relu.satfinite.e4m3x4.f32 %r1, {%f1, %f2, %f3, %f4}, %r2;",
    "cvt.rz.satfinite.ue8m0x2.f32 %rs1, %f1, %f2;",
    "cvt.rn.bf16x2.ue8m0x2 %r1, %rs1;",
    "ld.global.lu.f32 %f1, [%rd1];",
    "ld.weak.global.cg.v2.f32 {%f1, %f2}, [%rd1];",
    "ld.volatile.shared.v4.u32 {%r1, %r2, %r3, %r4}, [%r5];",
    "ld.acquire.sys.global.L1::no_allocate.u64 %rd1, [%rd2];",
    "st.global.wt.f32 [%rd1], %f1;",
    "st.global.L1::no_allocate.f32 [%rd1], %f1;",
    "st.global.L1::evict_first.v8.b32 [%rd1], {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8};",
    "st.release.cluster.shared::cluster.u32 [%r1], %r2;",
    "st.mmio.relaxed.sys.global.u32 [%rd1], %r1;",
]


def kernels(lines: list[str]) -> str:
    body = "\n".join(
        f".visible .entry k{n}()\n{{\n.reg .pred %p<3>; .reg .f32 %f<9>; .reg .b16 %rs<5>; .reg .b32 %r<9>; "
        f".reg .b64 %rd<9>;\n{line}\nret;\n}}"
        for n, line in enumerate(lines)
    )
    return f".version 8.8\n.target sm_100a\n.address_size 64\n{body}\n"


def test_unknown_modifiers_are_flagged_where_ptxas_rejects(tmp_path):
    text = kernels([line for line, _ in BAD])
    problems = check_module(parse(text))
    code, theirs = ptxas_error_lines(text, tmp_path)
    assert code != 0
    assert {p.location.line for p in problems} == theirs
    assert len(problems) == len(BAD)
    for problem, (line, word) in zip(problems, BAD, strict=True):
        family = isa.family(parse(kernels([line])).kernels[0].body.statements[-2])
        assert line.startswith(family) and problem.message.startswith(f"modifier '.{word}' is not one of {family}'s:")


def test_well_formed_modifiers_are_not_flagged_and_ptxas_agrees(tmp_path):
    text = kernels(GOOD)
    assert check_module(parse(text)) == []
    assert ptxas_error_lines(text, tmp_path) == (0, set())


def test_message_lists_the_family_modifiers():
    (problem,) = check_module(parse(kernels([BAD[0][0]])))
    assert problem.message == (
        "modifier '.umax' is not one of redux.sync's: .add .min .max .and .or .xor .abs .NaN .u32 .s32 .b32 .f32"
    )

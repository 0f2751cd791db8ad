"""`parse --check` agrees with the wheel's ptxas: on corpus files moved to an older .target or .version, the lines we
flag are exactly the lines ptxas rejects; on a matrix of instructions x targets, the same verdicts."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS

from ptxtool.analysis.legality import check_module
from ptxtool.cli import main
from ptxtool.syntax import ast, parse
from ptxtool.toolchain import discover

_ERROR = re.compile(r"line (\d+); error")


@cache
def ptxas() -> discover.Tool:
    return discover.find_tool("ptxas")


def ptxas_error_lines(text: str, tmp_path: Path) -> tuple[int, set[int]]:
    target = re.search(r"^\.target\s+(sm_\w+)", text, re.M)[1]
    path = tmp_path / "input.ptx"
    path.write_text(text)
    run = discover.run_tool(ptxas(), [f"-arch={target}", str(path), "-o", str(tmp_path / "out.cubin")])
    return run.returncode, {int(m) for m in _ERROR.findall(run.stderr)}


def header_lines_to_function(module: ast.Module, lines: set[int]) -> set[int]:
    """ptxas reports a function directive (`.explicitcluster`) at its own line; nodes for those carry no line, so
    we report them at the function's line: map ptxas's header lines there too."""
    out = set()
    for line in lines:
        owner = next((f for f in module.functions if f.body and f.line <= line < f.body.line), None)
        out.add(owner.line if owner else line)
    return out


def mutate(text: str, target: str | None = None, version: str | None = None) -> str:
    if target:
        text = re.sub(r"^\.target\s+sm_\w+", f".target {target}", text, count=1, flags=re.M)
    if version:
        text = re.sub(r"^\.version\s+\S+", f".version {version}", text, count=1, flags=re.M)
    return text


CASES = [
    ("ptx/hopper.sm90a.ptx", "sm_90", None, 6),  # wgmma and setmaxnreg need sm_90a exactly
    ("ptx/hopper.sm90a.ptx", "sm_80", None, 30),  # mbarrier waits, bulk copies, clusters, elect ...
    ("ptx/hopper.sm90a.ptx", "sm_100a", None, 4),  # setmaxnreg is fine on sm_100a; wgmma is not
    ("ptx/gemm_smem.sm86.O0.ptx", "sm_75", None, 1),  # cp.async
    ("ptx/tensorcore.sm80.ptx", "sm_75", None, 1),  # mma m16n8k16, ...
    ("ptx/reduce.sm80.ptx", "sm_75", None, 1),  # redux.sync
    ("ptx/comm.sm80.ptx", "sm_75", None, 1),  # createpolicy, L2::256B, cache hints
    ("ptx/elementwise.sm90.ptx", "sm_80", None, 1),  # fp8 conversions
    ("triton/matmul.sm90.ptx", "sm_75", None, 1),  # cvt.f16x2.f32
    ("handwritten/rare_syntax.ptx", "sm_80", None, 1),  # cluster directives and %cluster_* registers
    ("ptx/comm.sm80.ptx", None, "7.0", 1),  # cache hints need PTX 7.4
    ("ptx/elementwise.sm90.ptx", "sm_80", "7.0", 2),  # cvt.f32.bf16 needs PTX 7.1, fp8 sm_89
    ("ptx/comm.sm90.lineinfo.ptx", None, "7.8", 0),  # nothing newer than 7.8 there: ptxas agrees
    ("triton/dropout.sm80.ptx", "sm_75", "6.3", 10),  # labels in debug sections, .loc inlined_at
    ("handwritten/rare_syntax.ptx", None, "7.8", 0),
]


@pytest.mark.parametrize(("name", "target", "version", "at_least"), CASES)
def test_flagged_lines_equal_ptxas_error_lines(name, target, version, at_least, tmp_path):
    text = mutate((CORPUS / name).read_text(), target, version)
    module = parse(text)
    ours = {p.location.line for p in check_module(module)}
    code, theirs = ptxas_error_lines(text, tmp_path)
    assert ours == header_lines_to_function(module, theirs)
    assert len(ours) >= at_least
    assert (code == 0) is (not ours)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_every_corpus_file_moved_to_sm75_agrees_with_ptxas(path, tmp_path):
    text = mutate(path.read_text(), target="sm_75", version="9.0")
    module = parse(text)
    ours = {p.location.line for p in check_module(module)}
    assert ours == header_lines_to_function(module, ptxas_error_lines(text, tmp_path)[1])


def test_target_too_new_for_version_is_reported_and_rejected(tmp_path):
    text = mutate((CORPUS / "ptx/elementwise.sm120.ptx").read_text(), version="8.6")
    problems = check_module(parse(text))
    assert problems[0].message.startswith(".target sm_120 requires PTX ISA 8.7")
    assert ptxas_error_lines(text, tmp_path)[0] != 0


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_corpus_as_written_is_legal(path):
    assert check_module(parse(path.read_text())) == []


# Well-formed instructions (each accepted by ptxas on some target) checked on every target at once: one file per
# target holds one kernel per instruction, and ptxas's error lines say which it rejects.
SNIPPETS = (
    """
setmaxnreg.inc.sync.aligned.u32 232;
tcgen05.fence::before_thread_sync;
redux.sync.min.f32 %f1, %f2, 0xffffffff;
redux.sync.add.u32 %r1, %r2, 0xffffffff;
cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f2;
wgmma.fence.sync.aligned;
elect.sync %r1|%p1, 0xffffffff;
mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], %r1;
mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [bar], %r1;
mbarrier.init.shared::cta.b64 [bar], %r1;
cp.async.ca.shared.global [smem], [%rd1], 4;
cp.async.bulk.commit_group;
createpolicy.fractional.L2::evict_first.b64 %rd1, 1.0;
ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%r1, %r2, %r3, %r4}, [%rd1];
ld.global.L2::64B.f32 %f1, [%rd1];
mapa.u64 %rd1, %rd2, %r1;
fence.proxy.async.shared::cta;
barrier.cluster.arrive.relaxed;
stmatrix.sync.aligned.m8n8.x1.shared.b16 [smem], {%r1};
movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;
griddepcontrol.wait;
nanosleep.u32 %r1;
add.bf16 %rs1, %rs2, %rs3;
fma.rn.bf16 %rs1, %rs2, %rs3, %rs4;
max.xorsign.abs.f32 %f1, %f2, %f3;
tanh.approx.f32 %f1, %f2;
atom.global.add.noftz.bf16 %rs1, [%rd1], %rs2;
atom.global.v2.f32.add {%f1, %f2}, [%rd1], {%f3, %f4};
ld.global.v8.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd1];
mov.u32 %r1, %cluster_ctarank;
mov.u32 %r1, %aggr_smem_size;
mov.u32 %r1, %reserved_smem_offset_begin;
min.relu.s32 %r1, %r2, %r3;
cvt.rn.relu.f16.f32 %rs1, %f1;
cvt.rna.tf32.f32 %r1, %f1;
multimem.ld_reduce.relaxed.sys.global.add.f32 %f1, [%rd1];
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem], 32;
discard.global.L2 [%rd1], 128;
applypriority.global.L2::evict_normal [%rd1], 128;
ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [smem];
mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};
mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};
cp.async.bulk.prefetch.L2.global [%rd1], 128;
fence.proxy.tensormap::generic.release.gpu;
activemask.b32 %r1;
match.any.sync.b32 %r1, %r2, 0xffffffff;
szext.clamp.s32 %r1, %r2, %r3;
bmsk.clamp.b32 %r1, %r2, %r3;
ld.relaxed.cluster.global.u32 %r1, [%rd1];
ld.mmio.relaxed.sys.global.u32 %r1, [%rd1];
prefetch.global.L2::evict_last [%rd1];
shfl.idx.b32 %r1, %r2, 0, 31;
vote.all.pred %p1, %p2;
shfl.sync.idx.b32 %r1|%p1, %r2, 0, 31, 0xffffffff;
vote.sync.ballot.b32 %r1, %p1, 0xffffffff;
mapa.shared::cluster.u32 %r1, %r2, %r3;
st.global.L2::cache_hint.f32 [%rd1], %f1, %rd2;
ld.global.nc.L2::128B.f32 %f1, [%rd1];
atom.global.add.noftz.f16x2 %r1, [%rd1], %r2;
atom.global.add.noftz.f16 %rs1, [%rd1], %rs2;
atom.global.add.f64 %rd1, [%rd2], %rd3;
cvt.rn.bf16x2.f32 %r1, %f1, %f2;
cvt.rn.f16x2.e4m3x2 %r1, %rs1;
cvt.rn.satfinite.e5m2x2.f32 %rs1, %f1, %f2;
cvt.rn.tf32.f32 %r1, %f1;
mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}, {%r1,%r2}, {%r3,%r4},
 {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8};
mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2}, {%r3}, {%f5,%f6,%f7,%f8};
mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};
mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%r1,%r2}, {%r3}, {%r4}, {%r5,%r6};
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
mbarrier.test_wait.shared.b64 %p1, [bar], %rd1;
mbarrier.test_wait.parity.shared.b64 %p1, [bar], %r1;
mbarrier.arrive.shared.b64 %rd1, [bar];
mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r1];
mbarrier.expect_tx.relaxed.cluster.shared::cta.b64 [bar], %r1;
mbarrier.try_wait.relaxed.cluster.shared::cta.b64 %p1, [bar], %rd1;
multimem.st.relaxed.sys.global.f32 [%rd1], %f1;
multimem.red.relaxed.sys.global.add.u32 [%rd1], %r1;
st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3];
red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r1], %r2, [%r3];
griddepcontrol.launch_dependents;
fence.sc.cluster;
fence.acq_rel.gpu;
membar.gl;
fence.proxy.alias;
cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [smem], [%rd1], 64, [bar];
cp.async.bulk.global.shared::cta.bulk_group [%rd1], [smem], 64;
cp.async.bulk.wait_group 0;
cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [smem], 64;
cp.async.mbarrier.arrive.shared.b64 [bar];
cp.async.wait_all;
ldu.global.f32 %f1, [%rd1];
prefetchu.L1 [%rd1];
isspacep.global %p1, %rd1;
cvta.to.shared.u64 %rd1, %rd2;
ld.shared::cluster.u32 %r1, [%r2];
ld.acquire.cluster.shared::cluster.u32 %r1, [%r2];
st.relaxed.cluster.global.u32 [%rd1], %r1;
atom.acq_rel.cluster.global.add.u32 %r1, [%rd1], %r2;
red.relaxed.gpu.global.add.u32 [%rd1], %r1;
atom.global.cas.b16 %rs1, [%rd1], %rs2, %rs3;
min.NaN.f32 %f1, %f2, %f3;
fma.rn.relu.f16 %rs1, %rs2, %rs3, %rs4;
max.bf16 %rs1, %rs2, %rs3;
neg.bf16 %rs1, %rs2;
ex2.approx.ftz.bf16 %rs1, %rs2;
tanh.approx.f16 %rs1, %rs2;
cvt.pack.sat.u8.s32.b32 %r1, %r2, %r3, %r4;
dp2a.lo.u32.u32 %r1, %r2, %r3, %r4;
lop3.b32 %r1, %r2, %r3, %r4, 0x96;
shf.l.wrap.b32 %r1, %r2, %r3, %r4;
prmt.b32.f4e %r1, %r2, %r3, %r4;
bfind.u32 %r1, %r2;
copysign.f32 %f1, %f2, %f3;
testp.finite.f32 %p1, %f1;
mul24.lo.s32 %r1, %r2, %r3;
sad.u32 %r1, %r2, %r3, %r4;
vadd.s32.s32.s32.sat %r1, %r2, %r3;
vadd2.s32.s32.s32 %r1, %r2, %r3, %r4;
bar.red.popc.u32 %r1, 0, %p1;
bar.arrive 1, 64;
barrier.sync.aligned 0;
bar.warp.sync 0xffffffff;
stacksave.u64 %rd1;
stackrestore.u64 %rd1;
pmevent 1;
exit;
wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1, 0, 0;
tcgen05.wait::ld.sync.aligned;
tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 32;
clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [smem], [bar];
st.bulk.weak.shared::cta [%rd1], 64, 0;
clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p1, %q1;
tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r1}, [%r2];
tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [bar];
tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;
atom.global.cas.b128 %q1, [%rd1], %q2, %q1;
atom.global.exch.b128 %q1, [%rd1], %q2;
getctarank.shared::cluster.u32 %r1, %r2;
cvt.rn.satfinite.e2m1x2.f32 %b1, %f1, %f2;
redux.sync.min.abs.NaN.f32 %f1, %f2, 0xffffffff;
ld.global.nc.L2::cache_hint.v8.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd1], %rd2;
mov.u32 %r1, %globaltimer_lo;
mov.pred %p1, %is_explicit_cluster;
mov.u32 %r1, %clusterid.x;
mov.u64 %rd1, %current_graph_exec;
cvt.rs.satfinite.e4m3x4.f32 %r1, {%f1, %f2, %f3, %f4}, %r2;
""".strip()
    .replace(",\n", ", ")
    .splitlines()
)

TARGETS = ["sm_75", "sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103f", "sm_110f", "sm_120a"]


def snippet_file(target: str) -> str:
    def declarations(line: str) -> str:
        wide = ".reg .b128 %q<3>; " if "%q" in line else ""  # .b128 registers need PTX 8.3 of their own
        return wide + (".reg .b8 %b<3>; " if "%b" in line else "")

    kernels = "\n".join(
        f".visible .entry k{n}(.param .u64 p)\n{{\n.reg .pred %p<3>; .reg .f32 %f<9>; .reg .b16 %rs<5>; "
        f".reg .b32 %r<9>; .reg .b64 %rd<9>; {declarations(line)}\n"
        f".shared .align 8 .b64 bar; .shared .align 16 .b8 smem[1024];\n"
        f"{line}\nret;\n}}"
        for n, line in enumerate(SNIPPETS)
    )
    return f".version 9.0\n.target {target}\n.address_size 64\n{kernels}\n"


@pytest.mark.parametrize("target", TARGETS)
def test_instruction_matrix_agrees_with_ptxas(target, tmp_path):
    text = snippet_file(target)
    lines = text.splitlines()
    ours = {p.location.line for p in check_module(parse(text))}
    _, theirs = ptxas_error_lines(text, tmp_path)
    assert {lines[n - 1] for n in ours} == {lines[n - 1] for n in theirs}


# The same matrix at each PTX ISA version a target allows (sm_80 from 7.1: at 7.0 one snippet makes ptxas abort).
VERSIONS = [("sm_80", f"7.{m}") for m in range(1, 9)] + [("sm_90a", f"8.{m}") for m in range(8)]
VERSIONS += [("sm_100a", "8.6"), ("sm_100a", "8.7"), ("sm_100a", "8.8"), ("sm_120a", "8.7"), ("sm_120a", "8.8")]


@pytest.mark.parametrize(("target", "version"), VERSIONS)
def test_instruction_matrix_across_versions_agrees_with_ptxas(target, version, tmp_path):
    text = snippet_file(target).replace(".version 9.0", f".version {version}", 1)
    lines = text.splitlines()
    ours = {p.location.line for p in check_module(parse(text))}
    _, theirs = ptxas_error_lines(text, tmp_path)
    assert {lines[n - 1] for n in ours} == {lines[n - 1] for n in theirs}


def test_cli_parse_check_reports_and_exits_1(tmp_path):
    bad = tmp_path / "hopper.sm90.ptx"
    bad.write_text(mutate((CORPUS / "ptx/hopper.sm90a.ptx").read_text(), target="sm_90"))
    result = CliRunner().invoke(main, ["parse", "--check", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:434:2: error: instruction 'wgmma.fence' is not available on .target sm_90 (needs sm_90a)" in (
        result.stderr
    )
    good = CliRunner().invoke(main, ["parse", "--check", str(CORPUS / "ptx/hopper.sm90a.ptx")])
    assert good.exit_code == 0 and "error" not in good.stderr
    document = json.loads(CliRunner().invoke(main, ["parse", "--check", "--json", str(bad)]).stdout)
    said = {(p["path"], p["line"], p["column"], p["severity"], p["message"]) for p in document["problems"]}
    assert (
        str(bad),
        434,
        2,
        "error",
        "instruction 'wgmma.fence' is not available on .target sm_90 (needs sm_90a)",
    ) in said


def test_alike_instructions_are_each_reported_at_their_own_line(tmp_path):
    """Instructions spelled alike are checked once per module: each still gets its problem at its own line, and the
    same opcode naming another special register is checked apart (here it is legal)."""
    text = (
        ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n.reg .b64 %rd<3>;\n"
        "mov.u64 %rd1, %current_graph_exec;\nmov.u64 %rd2, %clock64;\n  mov.u64 %rd2, %current_graph_exec;\nret;\n}\n"
    )
    found = [(p.location.line, p.location.column, p.message) for p in check_module(parse(text))]
    message = "special register '%current_graph_exec' requires PTX ISA 8.0 or later (.version is 7.8)"
    assert found == [(7, 1, message), (9, 3, message)]
    assert {n for n, _, _ in found} == ptxas_error_lines(text, tmp_path)[1]

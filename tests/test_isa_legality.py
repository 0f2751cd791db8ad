"""`parse --check` agrees with the wheel's ptxas: on corpus files moved to an older .target or .version, the lines we
flag are exactly the lines ptxas rejects; on a matrix of instructions x targets, the same verdicts."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.legality import check_module
from ptxtool.syntax import ast, parse
from ptxtool.toolchain import discover

CORPUS = Path("/work/shared/corpus")
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
    ours = {p.line for p in check_module(module)}
    code, theirs = ptxas_error_lines(text, tmp_path)
    assert ours == header_lines_to_function(module, theirs)
    assert len(ours) >= at_least
    assert (code == 0) is (not ours)


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
SNIPPETS = """
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
""".strip().splitlines()

TARGETS = ["sm_75", "sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103f", "sm_110f", "sm_120a"]


def snippet_file(target: str) -> str:
    kernels = "\n".join(
        f".visible .entry k{n}(.param .u64 p)\n{{\n.reg .pred %p<3>; .reg .f32 %f<9>; .reg .b16 %rs<5>; "
        f".reg .b32 %r<9>; .reg .b64 %rd<9>; .shared .align 8 .b64 bar; .shared .align 16 .b8 smem[1024];\n"
        f"{line}\nret;\n}}"
        for n, line in enumerate(SNIPPETS)
    )
    return f".version 9.0\n.target {target}\n.address_size 64\n{kernels}\n"


@pytest.mark.parametrize("target", TARGETS)
def test_instruction_matrix_agrees_with_ptxas(target, tmp_path):
    text = snippet_file(target)
    lines = text.splitlines()
    ours = {p.line for p in check_module(parse(text))}
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

"""Adversarial kernels against `ptxtool optimize`'s promises (issue 10): each shape is one someone hunting
miscompiles would write — pointers swapped around a loop, polls the CFG does not show as loops, splices of odd
layouts — run with default settings and with `--noalias '*'` (tests/data/adversarial/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import nc_added

from ptxtool.passes.cache_operators import Settings, cache_operators
from ptxtool.syntax import ast, format_module, parse

DATA = Path(__file__).parent / "data" / "adversarial"
DEFAULT, NOALIAS = Settings(), Settings(noalias=("*",))
BOTH = pytest.mark.parametrize("settings", [DEFAULT, NOALIAS], ids=["default", "noalias"])


def _line(text: str, needle: str) -> int:
    """The 1-based line of the only line holding needle."""
    (line,) = [n for n, t in enumerate(text.splitlines(), 1) if needle in t]
    return line


# ---------------------------------------------------------------- what the kernel may write


@BOTH
def test_pointers_swapped_around_a_loop(settings: Settings) -> None:
    """Ping-pong buffers: the loop reads one pointer and writes the other, then swaps them, so both buffers are
    written; the load's base is not the parameter it started from (with `--noalias` it used to become `.nc`)."""
    assert nc_added((DATA / "swap.ptx").read_text(), settings, "line") == {}


def test_pointer_moved_in_a_loop_keeps_its_base() -> None:
    """The near miss: a pointer bumped by a loaded amount each trip stays in its buffer, and `.nc` stays."""
    text = (DATA / "swap.ptx").read_text()
    text = text.replace("\tmov.u64 \t%rd3, %rd4;\n", "\tadd.s64 \t%rd3, %rd3, %rd5;\n")
    text = text.replace("\tmov.u64 \t%rd4, %rd8;\n", "\tadd.s64 \t%rd4, %rd4, %rd5;\n")
    assert nc_added(text, NOALIAS, "line") == {"pingpong": [_line(text, "ld.global.f32")]}


@BOTH
def test_register_shadowed_by_an_inner_block(settings: Settings) -> None:
    """An inner `{ .reg .b64 %rd4; ... }` does not make the outer %rd4 (the written param_1) look like param_0."""
    assert nc_added((DATA / "shadow.ptx").read_text(), settings, "line") == {}


# ---------------------------------------------------------------- polls the CFG does not show as a loop


@BOTH
@pytest.mark.parametrize(
    "name",
    [
        "recpoll",  # wait() { if (!flag[0]) wait(); }: tail recursion, no loop in any CFG
        "brxpoll",  # the spin's exit is brx.idx on the flag: no guarded branch depends on it
        "smempoll",  # if (tid == 0) s = flag[0]; __syncthreads(); while (s == 0): through shared memory
        "callpoll",  # while (read_flag(flag) == 0): the load is in a non-inlined callee, the loop in the kernel
    ],
)
def test_polls_block_nc(name: str, settings: Settings) -> None:
    """Each kernel spins on a flag another grid sets, then reads data that grid wrote: no `.nc` anywhere in it
    (the flag load itself became `.nc` in brxpoll and smempoll: the spin would never end)."""
    assert nc_added((DATA / f"{name}.ptx").read_text(), settings, "line") == {}


def test_recursion_without_loads_is_no_poll() -> None:
    """The near miss of recpoll: a recursive callee that reads no memory cannot wait for anyone."""
    text = (DATA / "recpoll.ptx").read_text().replace("\tld.global.u32 \t%r1, [%rd2];\n", "\tmov.u32 \t%r1, 0;\n")
    assert nc_added(text, NOALIAS, "line") == {"consumer": [_line(text, "ld.global.f32")]}


# ---------------------------------------------------------------- streaming hints: touched once by the whole grid


def _hinted(text: str) -> list[str]:
    _, report = cache_operators(parse(text), NOALIAS)
    return [r.after for r in report.rewrites if "L1::no_allocate" in r.after and r.after.startswith("ld")]


def test_lane_index_repeated_by_every_warp() -> None:
    """`a[blockIdx.x * 4096 + j * 32 + (threadIdx.x & 31)]`: every warp of the block reads the same elements, so
    the load gets no `.L1::no_allocate` (`%tid.x & 31` involves `%tid.x` but does not tell the threads apart);
    with `threadIdx.x` itself it does."""
    text = (DATA / "loop_and31.ptx").read_text()
    assert _hinted(text) == []
    assert _hinted(text.replace("and.b32 %r6, %r1, 31;", "mov.u32 %r6, %r1;")) == ["ld.global.nc.L1::no_allocate.f32"]


def test_callee_reads_another_grid_dimension() -> None:
    """The kernel indexes with `%ctaid.x` only, but calls a function that reads `%ctaid.y`: a launch wider in y
    does different work, and each blockIdx.y reads the kernel's elements again: no streaming hint."""
    text = (DATA / "callee_ctaid_y.ptx").read_text()
    assert _hinted(text) == []
    assert _hinted(text.replace("%ctaid.y", "%ctaid.x")) == ["ld.global.nc.L1::no_allocate.f32"]


def test_blocks_that_overlap() -> None:
    """`a[blockIdx.x * 32 + threadIdx.x]` with 256-thread blocks: each element is read by up to 8 blocks."""
    base = (DATA / "callee_ctaid_y.ptx").read_text().replace("\tcall.uni f;\n", "")
    assert "mad.lo.s32 \t%r4, %r2, %r3, %r1;" in base
    assert _hinted(base.replace("mad.lo.s32 \t%r4, %r2, %r3, %r1;", "mad.lo.s32 \t%r4, %r2, 32, %r1;")) == []


# ---------------------------------------------------------------- legal qualifiers, exact splices


def test_weak_load_made_nc_drops_weak() -> None:
    """`ld.weak.global` + `.nc` is illegal (ptxas: "'.weak' cannot be combined with '.nc'"); a non-coherent load is
    weak by definition, so `.weak` goes (it used to be proposed, rejected by ptxas and dropped with its hints)."""
    _, report = cache_operators(parse((DATA / "layout.ptx").read_text()), NOALIAS)
    assert [r.after for r in report.rewrites if r.after.startswith("ld")] == ["ld.global.nc.L1::no_allocate.f32"]


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_splice_is_exact_on_odd_layouts(newline: str, tmp_path: Path) -> None:
    """A label, comments and Unicode on the rewritten line, tabs, a store split over two lines, CRLF: the output is
    the input byte for byte except the two opcode words, and ptxas accepted it (exit 0, verified)."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    source = tmp_path / "layout.ptx"
    data = (DATA / "layout.ptx").read_bytes().replace(b"\n", newline.encode())
    source.write_bytes(data)
    out = tmp_path / "out.ptx"
    result = CliRunner().invoke(main, ["optimize", str(source), "--noalias", "*", "-o", str(out)])
    assert result.exit_code == 0, result.output
    before, after = data.split(newline.encode()), out.read_bytes().split(newline.encode())
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [
        (
            "$L_a: /* é→ü */ @%p1 ld.weak.global.f32 \t%f1, /* ñ */ [%rd6]; // ∀x".encode(),
            "$L_a: /* é→ü */ @%p1 ld.global.nc.L1::no_allocate.f32 \t%f1, /* ñ */ [%rd6]; // ∀x".encode(),
        ),
        (b"\tst.global.f32\t[%rd7],", b"\tst.global.cs.f32\t[%rd7],"),
    ]


def test_comment_inside_the_opcode_parses() -> None:
    """ptxas takes a comment between an opcode's words: the same instructions as without it, the comment kept."""
    text = (DATA / "swap.ptx").read_text()
    commented = text.replace("ld.global.f32", "ld.global /* c */ .f32")

    def code(source: str) -> list[tuple]:
        return [(i.mnemonic, i.operands) for f in parse(source).functions for i in ast.instructions(f.body)]

    assert commented != text and code(commented) == code(text)
    assert "ld.global.f32 %f1, [%rd" in format_module(parse(commented)).split("/* c */")[0]


@BOTH
def test_a_malloc_of_the_modules_own(settings: Settings) -> None:
    """Only the CUDA runtime's bodiless `malloc` returns fresh memory; a `malloc` defined in the module may hand out
    a module array the host also passes as a parameter, so the stores through it are writes of unknown origin."""
    assert nc_added((DATA / "mymalloc.ptx").read_text(), settings, "line") == {}
    text = (DATA / "mymalloc.ptx").read_text()
    extern = (
        text.split(".func")[0]
        + ".extern .func  (.param .b64 func_retval0) malloc\n(\n\t.param .b64 malloc_param_0\n)\n;\n"
    )
    extern += ".visible .entry" + text.split(".visible .entry")[1]
    assert nc_added(extern, settings, "line") == {"pool_user": [_line(extern, "ld.global.f32")]}


def test_policy_register_name_taken_by_the_author() -> None:
    """A kernel that already declares `%ptxtool_evict_first` (here: a pointer) gets no `.L2::cache_hint` with it as
    the policy (ptxas accepts any .b64 register, so nothing downstream would notice); the other hints stay."""
    from ptxtool.passes.cache_operators import Policy

    settings = Settings(l2_evict_first=Policy(True))
    _, report = cache_operators(parse((DATA / "policy_name.ptx").read_text()), settings)
    assert [r.after for r in report.rewrites] == ["ld.global.L1::no_allocate.f32", "st.global.cs.f32"]
    assert any("already has a register named %ptxtool_evict_first" in s.reason for s in report.skipped)


def _rotation(n: int) -> str:
    """n pointers into two buffers that rotate by one each trip of a loop (`p[k] = p[k + 1]`), each loaded."""
    lines = [".version 8.0", ".target sm_90", ".address_size 64", ".visible .entry rot(.param .u64 p0, .param .u64 p1)"]
    lines += ["{", f"\t.reg .b64 %rd<{n + 1}>;", f"\t.reg .f32 %f<{n}>;", "\t.reg .pred %p<2>;", "\t.reg .b32 %r<2>;"]
    lines += ["\tld.param.u64 %rd0, [p0];", "\tld.param.u64 %rd1, [p1];"]
    lines += [f"\tadd.s64 %rd{k}, %rd{k % 2}, {4096 * k};" for k in range(2, n)]
    lines += ["\tmov.u32 %r1, 0;", "$L:", *(f"\tld.global.f32 %f{k}, [%rd{k}];" for k in range(n))]
    lines += ["\tst.global.f32 [%rd1], %f0;", f"\tmov.u64 %rd{n}, %rd0;"]
    lines += [*(f"\tmov.u64 %rd{k}, %rd{k + 1};" for k in range(n - 1)), f"\tmov.u64 %rd{n - 1}, %rd{n};"]
    lines += ["\tadd.s32 %r1, %r1, 1;", "\tsetp.lt.s32 %p1, %r1, 10;", "\t@%p1 bra $L;", "\tret;", "}"]
    return "\n".join(lines) + "\n"


def test_long_rotation_of_pointers_is_bounded() -> None:
    """300 pointers rotating around a loop (each is every other one in turn, p1 among them, which is written):
    no `.nc`, no RecursionError (the analysis used to recurse once per register), in bounded time."""
    import time

    start = time.perf_counter()
    assert nc_added(_rotation(300), NOALIAS, "line") == {}
    assert time.perf_counter() - start < 10


def test_lane_mask_covering_the_declared_block_is_the_thread_index() -> None:
    """With `.reqntid 32` (Triton declares its block), `threadIdx.x & 31` is `threadIdx.x`: the hint comes back."""
    text = (DATA / "loop_and31.ptx").read_text().replace("\n{\n", "\n.reqntid 32\n{\n", 1)
    assert _hinted(text) == ["ld.global.nc.L1::no_allocate.f32"]
    assert _hinted(text.replace(".reqntid 32", ".reqntid 64")) == []


WEAK_CALLEE = """.version 8.0
.target sm_80
.address_size 64

.weak .func helper()
{
	ret;
}

.visible .entry k(.param .u64 src, .param .u64 dst)
{
	.reg .b32 %r<4>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [src];
	ld.param.u64 %rd2, [dst];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd3, %rd5;
	call.uni helper;
	ld.global.f32 %f1, [%rd6];
	add.s64 %rd7, %rd4, %rd5;
	st.global.f32 [%rd7], %f1;
	ret;
}
"""


@BOTH
def test_a_weak_callee_may_be_replaced_by_the_linker(settings: Settings) -> None:
    """`.weak .func`: another module's definition may win at link time, so its body here says nothing about what
    the call does: every effect, no `.nc`. The same callee without `.weak` is seen through (near miss)."""
    assert nc_added(WEAK_CALLEE, settings, "line") == {}
    assert nc_added(WEAK_CALLEE.replace(".weak .func", ".func"), NOALIAS, "line") == {"k": [23]}

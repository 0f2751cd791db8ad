"""Rematerialization (issue 15): what is recomputed inside a loop and what never is, ptxas accepts every output,
and on nvcc's many-stream loops ptxas's registers drop by at least a third."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CORPUS

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.loops import find_loops
from ptxtool.analysis.remat import MAX_DEPTH, readonly_loads
from ptxtool.passes.registers.remat import Remat, rematerialize
from ptxtool.syntax import ast, format_module, parse

DATA = Path(__file__).parent / "data" / "registers"
MANY_STREAMS = DATA / "many_streams.sm90.ptx"


def remat_module(text: str, *, vouch: bool = True, pure: bool = True) -> tuple[str, dict[str, tuple[Remat, ...]]]:
    """Every kernel of a module rematerialized (global loads vouched for by the memory analysis when `vouch`; pure
    arithmetic too when `pure`: the rules below hold for every recomputation, not only the ones kept by default)."""
    module = parse(text)
    items, done = list(module.items), {}
    for k, item in enumerate(items):
        if isinstance(item, ast.Function) and item.body is not None:
            cfg = build_cfg(item)
            readonly = readonly_loads(module, item, cfg) if vouch else None
            items[k], done[item.name] = rematerialize(item, cfg, find_loops(cfg), readonly=readonly, pure=pure)
    return format_module(replace(module, items=tuple(items))), done


def registers(ptxas: str, text: str, tmp_path: Path) -> dict[str, int]:
    """ptxas -v's registers per kernel; fails the test when ptxas rejects the PTX."""
    source = tmp_path / "k.ptx"
    source.write_text(text)
    arch = re.search(r"^\.target\s+(sm_\w+)", text, re.M)[1]
    done = subprocess.run(
        [ptxas, "-v", f"-arch={arch}", str(source), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", done.stderr, re.S))


def rewritten(done: tuple[Remat, ...]) -> set[str]:
    return {r.register for r in done}


# A loop over i < n reading in[i] through a pointer loaded from a table, writing out[i]; the body around it is
# filled in per case. %rd4 (the loaded pointer) is live across the loop and read in it.
TEMPLATE = """.version 8.0
.target sm_90
.address_size 64
{globals}
.visible .entry k(.param .u64 tab, .param .u64 out, .param .u32 n)
{{
	.reg .pred %p<4>;
	.reg .b32 %r<10>;
	.reg .f32 %f<10>;
	.reg .b64 %rd<20>;
	ld.param.u64 %rd1, [tab];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u64 %rd5, [out];
	cvta.to.global.u64 %rd6, %rd5;
	ld.param.u32 %r1, [n];
	mov.u32 %r2, 0;
{before}
$LOOP:
	mul.wide.u32 %rd7, %r2, 4;
	add.s64 %rd8, %rd4, %rd7;
	ld.global.f32 %f1, [%rd8];
{inside}
	add.s64 %rd9, %rd6, %rd7;
	st.global.f32 [%rd9], %f1;
	add.s32 %r2, %r2, 1;
	setp.lt.u32 %p1, %r2, %r1;
	@%p1 bra $LOOP;
{after}
	ret;
}}
"""


def kernel(before: str, inside: str = "", globals_: str = "", after: str = "") -> str:
    return TEMPLATE.format(before=before, inside=inside, globals=globals_, after=after)


TABLE_NC = "\tld.global.nc.u64 %rd3, [%rd2];\n\tcvta.to.global.u64 %rd4, %rd3;"


def test_pointer_loaded_from_read_only_table_is_reloaded_in_the_loop(ptxas: str, tmp_path: Path) -> None:
    text, done = remat_module(kernel(TABLE_NC))
    found = {r.register: r for r in done["k"]}
    assert found["%rd4"].recomputed == (
        "ld.param.u64 %rd1, [tab];",
        "cvta.to.global.u64 %rd2, %rd1;",
        "ld.global.nc.u64 %rd3, [%rd2];",
        "cvta.to.global.u64 %rd4, %rd3;",
    )
    assert found["%rd4"].uses == 1 and found["%rd4"].line == TEMPLATE.count("\n", 0, TEMPLATE.index("{before}")) + 2
    loop = text[text.index("$LOOP:") :]
    # recomputed in the loop, reading the table with a coherent load (ptxas would hoist a `.nc` one back out)
    assert re.search(r"ld\.global\.u64 (%remat_b64_\d+), \[%remat_b64_\d+\];", loop)
    assert "%rd4" not in loop and "ld.global.nc" not in loop
    registers(ptxas, text, tmp_path)  # ptxas accepts it


def test_a_plain_load_the_kernel_may_change_is_never_recomputed(ptxas: str, tmp_path: Path) -> None:
    """A coherent load of the table: the kernel writes out[], which may be the table."""
    text, done = remat_module(kernel("\tld.global.u64 %rd3, [%rd2];\n\tcvta.to.global.u64 %rd4, %rd3;"))
    assert "%rd4" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_table_the_kernel_writes_is_never_reread(ptxas: str, tmp_path: Path) -> None:
    """Even `.nc` gives no promise for memory the kernel itself writes through the same parameter."""
    text, done = remat_module(kernel(TABLE_NC, "\tst.global.u64 [%rd2], %rd9;"))
    assert "%rd4" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_without_a_readonly_verdict_no_global_load_is_recomputed() -> None:
    _, done = remat_module(kernel(TABLE_NC), vouch=False)
    assert "%rd4" not in rewritten(done["k"])


def test_floating_point_is_never_recomputed(ptxas: str, tmp_path: Path) -> None:
    before = TABLE_NC + "\n\tld.global.nc.f32 %f5, [%rd6];\n\tmul.f32 %f6, %f5, 0f40000000;"
    text, done = remat_module(kernel(before, "\tadd.f32 %f1, %f1, %f6;"))
    assert "%f6" not in rewritten(done["k"]) and "%rd4" in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_an_operand_redefined_in_the_loop_stops_recomputation(ptxas: str, tmp_path: Path) -> None:
    """%rd11 steps in the loop, so %rd10 = %rd6 + %rd11 computed before it cannot be recomputed from it there."""
    before = TABLE_NC + "\n\tmov.u64 %rd11, 0;\n\tadd.s64 %rd10, %rd6, %rd11;"
    inside = "\tst.global.f32 [%rd10], %f1;\n\tadd.s64 %rd11, %rd11, 4;"
    text, done = remat_module(kernel(before, inside))
    assert "%rd10" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_guarded_definition_is_never_recomputed(ptxas: str, tmp_path: Path) -> None:
    before = TABLE_NC + "\n\tsetp.eq.u32 %p2, %r1, 7;\n\t@%p2 cvta.to.global.u64 %rd10, %rd5;"
    text, done = remat_module(kernel(before, "\tst.global.f32 [%rd10], %f1;"))
    assert "%rd10" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_volatile_special_register_is_never_read_again(ptxas: str, tmp_path: Path) -> None:
    """%clock differs each time it is read; %tid.x does not."""
    before = TABLE_NC + "\n\tmov.u32 %r5, %clock;\n\tmov.u32 %r6, %tid.x;"
    text, done = remat_module(kernel(before, "\tadd.s32 %r7, %r5, %r6;\n\tcvt.rn.f32.u32 %f1, %r7;"))
    assert "%r5" not in rewritten(done["k"]) and "%r6" in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_reads_inside_a_nested_block_are_left_alone(ptxas: str, tmp_path: Path) -> None:
    """Inside `{ }` a name may be another register (here %rd2, which the recomputation of %rd4 reads): a value read
    there keeps its register."""
    inside = "\t{\n\t.reg .b64 %rd2;\n\tadd.s64 %rd2, %rd4, 8;\n\tld.global.f32 %f2, [%rd2];\n\t}"
    text, done = remat_module(kernel(TABLE_NC, inside))
    assert "%rd4" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


CALLEE = """
.global .align 8 .u64 gptr;
.func set_gptr(.param .u64 p)
{
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [p];
	st.global.u64 [gptr], %rd1;
	ret;
}
"""


def test_a_module_variable_a_callee_may_write_is_never_reread(ptxas: str, tmp_path: Path) -> None:
    """The loop calls a function that writes `gptr`: a reload in the loop could see its new value."""
    before = TABLE_NC + "\n\tld.global.u64 %rd12, [gptr];"
    inside = (
        "\tst.global.f32 [%rd12], %f1;\n\t{\n\t.param .u64 a;\n\tst.param.u64 [a], %rd6;\n"
        "\tcall.uni set_gptr, (a);\n\t}"
    )
    text, done = remat_module(kernel(before, inside, CALLEE))
    assert "%rd12" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_const_variable_is_reread() -> None:
    """`.const` memory cannot change while a kernel runs."""
    before = TABLE_NC + "\n\tld.const.u64 %rd12, [cptr];"
    _, done = remat_module(kernel(before, "\tst.global.f32 [%rd12], %f1;", ".const .align 8 .u64 cptr;"))
    assert "%rd12" in rewritten(done["k"])


def test_nothing_to_do_returns_the_function_itself() -> None:
    module = parse(kernel(TABLE_NC).replace("\t@%p1 bra $LOOP;\n", ""))
    fn = module.kernels[0]
    cfg = build_cfg(fn)
    assert rematerialize(fn, cfg, find_loops(cfg)) == (fn, ())


def test_by_default_only_values_that_reload_global_memory() -> None:
    """ptxas hoists loop-invariant arithmetic and parameter reads back out of a loop (32 pointers made by
    arithmetic: 80 registers before and after), so by default only values whose recomputation reloads memory
    are recomputed; the out pointer (cvta of a parameter) and n (a parameter) only with `pure`."""
    _, default = remat_module(kernel(TABLE_NC), pure=False)
    _, pure = remat_module(kernel(TABLE_NC), pure=True)
    assert rewritten(default["k"]) == {"%rd4"}
    assert {"%rd4", "%rd6", "%r1"} <= rewritten(pure["k"])


def test_a_second_run_changes_nothing() -> None:
    once, _ = remat_module(kernel(TABLE_NC))
    twice, done = remat_module(once)
    assert twice == once and done == {"k": ()}


# ---------------------------------------------------------------- values kept across a loop for the code after it

# %rd13: this thread's slot of out[], made from %tid.x before the loop and read only after it (Triton's epilogue
# pointers: 32 of them in attn_bwd_dkdv_w8, kept through the whole loop).
SLOT = "\tmov.u32 %r6, %tid.x;\n\tmul.wide.u32 %rd12, %r6, 4;\n\tadd.s64 %rd13, %rd6, %rd12;"
STORE_SLOT = "\tst.global.f32 [%rd13], %f1;"


def _split(text: str) -> tuple[str, str, str]:
    """The kernel's text before the loop, in it, and after it."""
    start, end = text.index("$LOOP:"), text.index("bra $LOOP;")
    return text[:start], text[start:end], text[end:]


def test_a_value_read_only_after_the_loop_is_recomputed_after_it(ptxas: str, tmp_path: Path) -> None:
    """Recomputed by default (there is no loop for ptxas to hoist it back out of), from %tid.x and the parameter."""
    text, done = remat_module(kernel(TABLE_NC + "\n" + SLOT, after=STORE_SLOT), pure=False)
    found = {r.register: r for r in done["k"]}
    assert found["%rd13"].uses == 1 and found["%rd13"].recomputed[-1] == "add.s64 %rd13, %rd6, %rd12;"
    before, loop, after = _split(text)
    assert "%rd13" not in loop and "%rd13" not in after and re.search(r"st\.global\.f32 \[%remat_b64_\d+\]", after)
    assert "mov.u32 %remat_b32_0, %tid.x;" in after and "%tid.x" not in loop  # the loop does not pay for it
    registers(ptxas, text, tmp_path)


def test_a_value_read_after_the_loop_whose_operand_the_loop_steps_is_kept(ptxas: str, tmp_path: Path) -> None:
    """%rd11 advances in the loop: %rd10 = %rd6 + %rd11 after it would read the stepped value."""
    before = TABLE_NC + "\n\tmov.u64 %rd11, 0;\n\tadd.s64 %rd10, %rd6, %rd11;"
    text, done = remat_module(kernel(before, "\tadd.s64 %rd11, %rd11, 4;", after="\tst.global.f32 [%rd10], %f1;"))
    assert "%rd10" not in rewritten(done["k"]) and "%rd11" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_floating_point_kept_for_after_the_loop_is_never_recomputed(ptxas: str, tmp_path: Path) -> None:
    before = TABLE_NC + "\n\tcvt.rn.f32.u32 %f5, %r1;\n\tmul.f32 %f6, %f5, 0f3DCCCCCD;"
    text, done = remat_module(kernel(before, after="\tst.global.f32 [%rd6], %f6;"))
    assert "%f6" not in rewritten(done["k"]) and "%f5" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_load_of_memory_the_loop_may_write_is_never_repeated_after_it(ptxas: str, tmp_path: Path) -> None:
    """The loop stores to out[]; a value loaded from out[] before it is not the value there after it."""
    before = TABLE_NC + "\n\tld.global.nc.u32 %r8, [%rd6];"
    text, done = remat_module(kernel(before, after="\tcvt.rn.f32.u32 %f2, %r8;\n\tst.global.f32 [%rd4], %f2;"))
    assert "%r8" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_bit_field_arithmetic_is_recomputed_but_not_a_selection_by_predicate(ptxas: str, tmp_path: Path) -> None:
    """`bfe` is exact integer arithmetic (Triton's shared-memory descriptors); `selp` reads a predicate, which
    the rules do not follow: never recomputed, nor the predicate."""
    before = (
        TABLE_NC + "\n\tmov.u32 %r6, %tid.x;\n\tbfe.u32 %r7, %r6, 2, 3;\n\tsetp.eq.u32 %p2, %r6, 0;"
        "\n\tselp.b32 %r8, 1, 2, %p2;"
    )
    inside = "\tadd.s32 %r9, %r7, %r8;\n\tcvt.rn.f32.u32 %f1, %r9;"
    text, done = remat_module(kernel(before, inside))
    assert "%r7" in rewritten(done["k"]) and not {"%r8", "%p2"} & rewritten(done["k"])
    assert re.search(r"bfe\.u32 %remat_b32_\d+, %remat_b32_\d+, 2, 3;", _split(text)[1])
    registers(ptxas, text, tmp_path)


def test_a_value_written_on_both_sides_of_a_branch_is_never_recomputed(ptxas: str, tmp_path: Path) -> None:
    """Two writers (a divergent definition): which one ran is not something a recomputation can know."""
    before = (
        TABLE_NC + "\n\tsetp.eq.u32 %p2, %r1, 0;\n\t@%p2 bra $ELSE;\n\tmov.u32 %r7, %tid.x;\n\tbra.uni $JOIN;"
        "\n$ELSE:\n\tmov.u32 %r7, %ctaid.x;\n$JOIN:"
    )
    text, done = remat_module(kernel(before, "\tcvt.rn.f32.u32 %f1, %r7;", after="\tst.global.u32 [%rd6], %r7;"))
    assert "%r7" not in rewritten(done["k"])
    registers(ptxas, text, tmp_path)


def test_a_long_chain_reading_each_value_three_times_takes_linear_time() -> None:
    """`mad r(k+1), rk, rk, rk` 400 times, every link read in the loop: trees share their subtrees (3^12 walks
    per candidate before), and only links within MAX_DEPTH of %tid.x are recomputed."""
    chain = "\n".join(f"\tmad.lo.s32 %r{100 + k + 1}, %r{100 + k}, %r{100 + k}, %r{100 + k};" for k in range(400))
    inside = "\n".join(f"\tadd.s32 %r9, %r9, %r{100 + k};" for k in range(1, 401))
    text = kernel(TABLE_NC + "\n\tmov.u32 %r100, %tid.x;\n" + chain, inside + "\n\tcvt.rn.f32.u32 %f1, %r9;")
    start = time.perf_counter()
    _, done = remat_module(text.replace(".reg .b32 %r<10>;", ".reg .b32 %r<600>;"))
    assert time.perf_counter() - start < 30  # 2.4 s on one shared core
    chained = {int(r.register[2:]) for r in done["k"] if re.fullmatch(r"%r1\d\d", r.register)}
    assert chained and max(chained) - 100 < MAX_DEPTH


# ---------------------------------------------------------------- random integer kernels (fixed seeds)

FUZZ_VALUES = 24  # integer values made before the loop, each stored after it
FUZZ_OPS = ("add.s32", "sub.s32", "mul.lo.s32", "xor.b32", "and.b32", "or.b32", "min.s32", "max.u32")


def fuzz_kernel(seed: int) -> str:
    """A kernel of integer values made from %tid/%ctaid/parameters before a loop (some with `bfe`, `shl`, `mad`,
    some written again inside the loop: a second writer), read in the loop into an accumulator and stored after
    it, one word each per thread; out[] needs grid * block * (FUZZ_VALUES + 1) words."""
    import random

    rng = random.Random(seed)
    lines = [
        "ld.param.u64 %rd1, [out];",
        "cvta.to.global.u64 %rd2, %rd1;",
        "ld.param.u32 %r1, [n];",
        "ld.param.u32 %r2, [s];",
        "mov.u32 %r3, %tid.x;",
        "mov.u32 %r4, %ctaid.x;",
        "mov.u32 %r5, %ntid.x;",
        "mad.lo.s32 %r6, %r4, %r5, %r3;",
        f"mul.wide.u32 %rd3, %r6, {4 * (FUZZ_VALUES + 1)};",
        "add.s64 %rd4, %rd2, %rd3;",
    ]
    values = ["%r2", "%r3", "%r4", "%r6"]
    for k in range(FUZZ_VALUES):
        a, b, c = (rng.choice(values) for _ in range(3))
        out = f"%r{20 + k}"
        form = rng.randrange(4)
        if form == 0:
            lines.append(f"{rng.choice(FUZZ_OPS)} {out}, {a}, {b};")
        elif form == 1:
            lines.append(f"mad.lo.s32 {out}, {a}, {b}, {c};")
        elif form == 2:
            lines.append(f"bfe.u32 {out}, {a}, {rng.randrange(24)}, {rng.randrange(1, 9)};")
        else:
            lines.append(f"shl.b32 {out}, {a}, {rng.randrange(8)};")
        values.append(out)
    lines += ["mov.u32 %r8, 0;", "mov.u32 %r9, 0;", "$LOOP:"]
    for _ in range(FUZZ_VALUES):
        lines.append(f"{rng.choice(FUZZ_OPS)} %r9, %r9, {rng.choice(values[4:])};")
        if rng.random() < 0.15:  # a value the loop changes: never recomputed from its old operands
            v = rng.choice(values[4:])
            lines.append(f"add.s32 {v}, {v}, %r8;")
    lines += ["add.s32 %r8, %r8, 1;", "setp.lt.u32 %p1, %r8, %r1;", "@%p1 bra $LOOP;"]
    lines += [f"st.global.u32 [%rd4+{4 * j}], {v};" for j, v in enumerate(values[4:])]
    lines += [f"st.global.u32 [%rd4+{4 * FUZZ_VALUES}], %r9;", "ret;"]
    body = "\n".join(line if line.endswith(":") else "\t" + line for line in lines)
    return (
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry fuzz(.param .u64 out, .param .u32 n, .param .u32 s)\n{\n"
        "\t.reg .pred %p<2>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<8>;\n" + body + "\n}\n"
    )


@pytest.mark.parametrize("seed", range(6))
def test_random_integer_kernels_are_accepted_and_only_values_the_loop_keeps_are_recomputed(
    seed: int, ptxas: str, tmp_path: Path
) -> None:
    text = fuzz_kernel(seed)
    out, done = remat_module(text)
    head, loop = text.split("$LOOP:")
    tainted = set(re.findall(r"add\.s32 (%r\d+), %r\d+, %r8;", loop)) - {"%r8"}  # the loop writes them again
    for line in head.splitlines():  # and every value made from one of them before the loop
        names = re.findall(r"%r\d+", line)
        if len(names) > 1 and tainted & set(names[1:]):
            tainted.add(names[0])
    assert done["fuzz"] and tainted and not tainted & rewritten(done["fuzz"])
    registers(ptxas, out, tmp_path)


# ---------------------------------------------------------------- nvcc's many-stream loops


@pytest.mark.parametrize("name", ["sum_table", "sum_offsets"])
def test_many_stream_loops_lose_a_third_of_their_registers(name: str, ptxas: str, tmp_path: Path) -> None:
    """tests/data/registers/many_streams.cu by the wheel's nvcc: 32 table pointers and 48 offsets live across the
    loop. Measured with ptxas 13: sum_table 80 -> 32 registers, sum_offsets 64 -> 32."""
    text = MANY_STREAMS.read_text()
    after, done = remat_module(text, pure=False)
    before_regs, after_regs = registers(ptxas, text, tmp_path), registers(ptxas, after, tmp_path)
    assert len(done[name]) >= 24
    assert int(after_regs[name]) * 3 <= int(before_regs[name]) * 2, (before_regs, after_regs)


def test_many_streams_ptx_is_the_cuda_source_compiled() -> None:
    """The checked-in PTX is what the wheel's nvcc makes of many_streams.cu (the kernels, not the banner)."""
    pytest.importorskip("cuda.pathfinder")
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        fresh = cuda_to_ptx(str(DATA / "many_streams.cu"), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(str(problem))
    body = lambda t: t[t.index(".version") :]  # noqa: E731
    assert body(fresh) == body(MANY_STREAMS.read_text())


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_ptxas_accepts_every_rematerialized_corpus_file(path: Path, assemble) -> None:
    """Whatever the pass recomputes in compiler output (nvcc, clang, Triton, numba), the result assembles."""
    text = path.read_text()
    after, done = remat_module(text)
    if not any(done.values()):
        assert after == format_module(parse(text))
        return
    cubin, log = assemble(after)
    assert cubin is not None, log


def test_fresh_registers_collide_with_no_name_of_the_kernel(ptxas: str, tmp_path: Path) -> None:
    text = kernel(TABLE_NC + "\n\tmov.u64 %remat_b64_0, 0;").replace(
        ".reg .b64 %rd<20>;", ".reg .b64 %rd<20>;\n\t.reg .b64 %remat_b64_0;"
    )
    after, done = remat_module(text)
    assert "%rd4" in rewritten(done["k"]) and "%remat__b64_" in after
    registers(ptxas, after, tmp_path)

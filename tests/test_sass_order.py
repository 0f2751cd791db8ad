"""The order check over real SASS: a memory instruction that ptxas moved across a barrier, fence, atomic or call
is caught (listings from nvdisasm, edited to hoist or sink the load), one that moved elsewhere is not; and
end to end, a rewrite that ptxas hoists above a `bar.sync` is dropped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.passes import PASSES, Pass
from ptxtool.passes.report import PassReport, Rewrite
from ptxtool.services.optimize import optimize
from ptxtool.sources import Source, read_source
from ptxtool.syntax import ast
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.sass import ListingLine, SassCode, crossings, listing

DATA = Path(__file__).parent / "data" / "optimize"
pytestmark = pytest.mark.usefixtures("ptxas")

# The shape of the issue's first kernel: a store, a barrier, then a load that must stay below the barrier.
STRAIGHT = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q)
{
.reg .b32 %r<4>;
.reg .b64 %rd<8>;
.reg .f32 %f<4>;
ld.param.u64 %rd1, [p];
ld.param.u64 %rd2, [q];
cvta.to.global.u64 %rd3, %rd1;
cvta.to.global.u64 %rd4, %rd2;
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd5, %r1, 4;
add.s64 %rd6, %rd3, %rd5;
add.s64 %rd7, %rd4, %rd5;
st.global.f32 [%rd7], 0f3F800000;
bar.sync 0;
ld.global.f32 %f1, [%rd6];
st.global.f32 [%rd7+4096], %f1;
ret;
}
"""
LOAD, BARRIER = 19, 18  # the PTX lines of the load and the barrier

# A loop whose body waits at a barrier and then loads: hoisting the load out of the loop crosses the barrier.
LOOP = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q, .param .u32 n)
{
.reg .pred %p<2>;
.reg .b32 %r<6>;
.reg .b64 %rd<8>;
.reg .f32 %f<4>;
ld.param.u64 %rd1, [p];
ld.param.u64 %rd2, [q];
ld.param.u32 %r2, [n];
cvta.to.global.u64 %rd3, %rd1;
cvta.to.global.u64 %rd4, %rd2;
mov.f32 %f2, 0f00000000;
mov.u32 %r1, 0;
$L_loop:
.pragma "nounroll";
bar.sync 0;
ld.global.f32 %f1, [%rd3];
add.f32 %f2, %f2, %f1;
add.s64 %rd3, %rd3, 4;
add.s32 %r1, %r1, 1;
setp.lt.u32 %p1, %r1, %r2;
@%p1 bra $L_loop;
st.global.f32 [%rd4], %f2;
ret;
}
"""
LOOP_LOAD, LOOP_BARRIER = 20, 19


def _code(text: str) -> tuple[SassCode, list[ListingLine]]:
    lines = listing(compile_ptx(text, "k.ptx", "sm_90", lineinfo=True).cubin, with_ptx_lines=True)["k"]
    return SassCode.of(lines), lines


def _find(lines: list[ListingLine], mnemonic: str, ptx_line: int) -> int:
    for n, e in enumerate(lines):
        words = e.text.split()
        opcode = words[1] if words and words[0].startswith("@") else (words[0] if words else "")
        if opcode.split(".")[0] == mnemonic and e.ptx_line == ptx_line:
            return n
    raise AssertionError(f"no {mnemonic} from PTX line {ptx_line} in the listing")


def _moved(lines: list[ListingLine], what: int, before: int) -> list[ListingLine]:
    """The listing with entry `what` moved to just before entry `before`."""
    out = list(lines)
    entry = out.pop(what)
    out.insert(before if before < what else before - 1, entry)
    return out


def test_real_listing_has_the_order_of_the_ptx() -> None:
    code, lines = _code(STRAIGHT)
    assert _find(lines, "BAR", BARRIER) < _find(lines, "LDG", LOAD)
    assert crossings(code, code, LOAD) == []


def test_a_load_hoisted_above_the_barrier_is_caught() -> None:
    code, lines = _code(STRAIGHT)
    hoisted = SassCode.of(_moved(lines, _find(lines, "LDG", LOAD), _find(lines, "BAR", BARRIER)))
    found = crossings(code, hoisted, LOAD)
    assert [(c.ordering.split(".")[0], c.ordering_line, c.above) for c in found] == [("BAR", BARRIER, True)]
    assert str(found[0]).startswith("ptxas moved LDG.E above BAR.SYNC")


def test_a_load_hoisted_to_the_top_crosses_the_barrier_not_the_store() -> None:
    """Plain stores are not ordering instructions; the barrier is."""
    code, lines = _code(STRAIGHT)
    top = SassCode.of(_moved(lines, _find(lines, "LDG", LOAD), 0))
    assert {c.ordering.split(".")[0] for c in crossings(code, top, LOAD)} == {"BAR"}


def test_a_load_sunk_below_a_barrier_is_caught() -> None:
    code, lines = _code(
        STRAIGHT.replace("bar.sync 0;\nld.global.f32 %f1, [%rd6];", "ld.global.f32 %f1, [%rd6];\nbar.sync 0;")
    )
    load, barrier = _find(lines, "LDG", BARRIER), _find(lines, "BAR", LOAD)
    assert load < barrier
    sunk = SassCode.of(_moved(lines, load, barrier + 1))
    assert [c.above for c in crossings(code, sunk, BARRIER)] == [False]


def test_moving_a_load_within_its_stretch_is_not_a_crossing() -> None:
    code, lines = _code(STRAIGHT)
    load = _find(lines, "LDG", LOAD)
    later = next(n for n in range(load + 1, len(lines)) if lines[n].text.startswith("STG"))
    moved = SassCode.of(_moved(lines, load, later + 1))
    assert crossings(code, moved, LOAD) == []


def test_a_load_hoisted_out_of_a_loop_with_a_barrier_is_caught() -> None:
    code, lines = _code(LOOP)
    load, barrier = _find(lines, "LDG", LOOP_LOAD), _find(lines, "BAR", LOOP_BARRIER)
    label = max(n for n in range(barrier + 1) if lines[n].text.endswith(":"))  # the loop head
    hoisted = SassCode.of(_moved(lines, load, label))
    found = crossings(code, hoisted, LOOP_LOAD)
    assert found and all(c.ordering.startswith("BAR") and c.above for c in found)
    assert crossings(code, code, LOOP_LOAD) == []


def test_loop_blocks_reach_themselves() -> None:
    code, lines = _code(LOOP)
    load = next(n for n, op in enumerate(code.ops) if op.mnemonic == "LDG")
    before, after = code.around(load)
    assert any(k[1] == "BAR" for k in before) and any(k[1] == "BAR" for k in after)  # the barrier of the next trip


# ---------------------------------------------------------------- end to end: a careless pass


def _careless(module: ast.Module, settings: object) -> tuple[ast.Module, PassReport]:
    """Adds `.nc` to every plain `ld.global` of every kernel, without analysis: verification must catch it where
    ptxas then moves the load above a barrier."""
    report = PassReport("careless")

    def fix(kernel: str, block: ast.Block) -> ast.Block:
        out = []
        for s in block.statements:
            if isinstance(s, ast.Block):
                s = fix(kernel, s)
            elif isinstance(s, ast.Instruction) and s.opcode == "ld" and s.modifiers[:1] == ("global",):
                new = replace(s, modifiers=("global", "nc", *s.modifiers[1:]))
                report.rewrites.append(Rewrite(kernel, s.line, s.mnemonic, new.mnemonic, (".nc",), ("CONSTANT",)))
                s = new
            out.append(s)
        return replace(block, statements=tuple(out))

    items = tuple(
        replace(f, body=fix(f.name, f.body)) if isinstance(f, ast.Function) and f.is_kernel and f.body else f
        for f in module.items
    )
    return replace(module, items=items), report


@pytest.fixture
def careless(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(
        PASSES, "careless", Pass("careless", lambda module, settings, _: _careless(module, settings), object)
    )
    return "careless"


@pytest.mark.parametrize(("name", "barrier_line"), [("symbol_alias.sm90.ptx", 36), ("callee_acquire.sm90.ptx", 61)])
def test_the_issues_kernels_hoisted_load_is_dropped(careless: str, name: str, barrier_line: int) -> None:
    """nvcc's PTX of the issue's two kernels: ptxas hoists the `.nc` load above `bar.sync`; the rewrite is
    dropped, the file is written unchanged (exit 0), and --strict fails it."""
    source = read_source(str(DATA / name))
    result = optimize(source, (careless,))
    assert result.exit_code == 0 and not result.changed and result.text == source.text
    assert len(result.dropped) == 1
    (reason,) = result.dropped[0].notes
    assert "above BAR.SYNC" in reason and f"(PTX line {barrier_line})" in reason
    strict = optimize(source, (careless,), strict=True)
    assert strict.exit_code == 1 and "above BAR.SYNC" in strict.problems[0]


def test_a_careless_rewrite_that_stays_put_is_kept(careless: str) -> None:
    """The same pass on a kernel without barriers: nothing to cross, the rewrite is verified and kept."""
    text = STRAIGHT.replace("bar.sync 0;\n", "")
    result = optimize(Source("k.ptx", text), (careless,))
    assert result.exit_code == 0 and not result.dropped and result.changed
    assert "ld.global.nc.f32 %f1, [%rd6];" in result.text


def test_cli_reports_the_drop_in_words(careless: str) -> None:
    cli = CliRunner().invoke(main, ["optimize", str(DATA / "symbol_alias.sm90.ptx"), "--passes", careless])
    assert cli.exit_code == 0
    said = "optimize/dropped warning: _Z12symbol_aliasPKf: dropped ld.global.f32 -> ld.global.nc.f32"
    assert f"symbol_alias.sm90.ptx:39:2: {said}\n" in cli.stderr  # the one diagnostic line, as docs/optimize.md shows
    assert "    note: ptxas moved LDG.E.CONSTANT above BAR.SYNC.DEFER_BLOCKING (PTX line 36)" in cli.stderr
    assert "0 rewrites kept, 1 dropped" in cli.stderr


def test_an_access_the_input_did_not_have_cannot_be_ordered() -> None:
    """Where the input's SASS has no access from the rewritten line (merged into another line's, say) but the
    output's has one, its order has no baseline: the rewrite fails rather than pass unchecked."""
    from ptxtool.services.optimize import _Unit, _verify

    first = SassCode.of([ListingLine("BAR.SYNC.DEFER_BLOCKING 0x0", 9), ListingLine("LDG.E R3, desc[UR4][R4.64]", 11)])
    second = SassCode.of(
        [
            ListingLine("LDG.E.CONSTANT R2, desc[UR4][R2.64]", 10),
            ListingLine("BAR.SYNC.DEFER_BLOCKING 0x0", 9),
            ListingLine("LDG.E R3, desc[UR4][R4.64]", 11),
        ]
    )
    unit = _Unit("k", 10, [], [Rewrite("k", 10, "ld.global.f32", "ld.global.nc.f32", (".nc",), ("CONSTANT",))])
    failures = _verify([unit], {"k": first}, {"k": second}, {})
    assert failures[unit.key] == "ptxas made LDG.E.CONSTANT for it where the input has no access: order unknown"

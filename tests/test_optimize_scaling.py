"""The cache-operator pass stays near-linear in a kernel's accesses: a generated 1,600-load kernel within a generous
time bound, and the grouped neighbour look-ups answer exactly what comparing every pair of accesses answers."""

from __future__ import annotations

import importlib.util
import random
import time
from pathlib import Path

import pytest

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.memory import MemoryAccess, memory_facts
from ptxtool.passes import Analyses, run_pipeline
from ptxtool.passes.cache_operators import NAME, _Kernel, _Neighbours, _touched_once
from ptxtool.syntax import parse

_SPEC = importlib.util.spec_from_file_location(
    "optimize_scaling", Path(__file__).resolve().parents[1] / "benchmarks" / "optimize_scaling.py"
)
assert _SPEC is not None and _SPEC.loader is not None
scaling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(scaling)


@pytest.mark.parametrize("shape", sorted(scaling.SHAPES))
def test_a_1600_load_kernel_takes_seconds_not_minutes(shape: str) -> None:
    """Comparing every access with every other took about two minutes here (issue 11); linear takes about one
    second on this machine, so 20 s leaves room for a loaded runner and fails on the quadratic."""
    module = parse(scaling.SHAPES[shape](1600))
    analyses = Analyses()
    start = time.perf_counter()
    _, (report,) = run_pipeline(module, [NAME], analyses=analyses)
    elapsed = time.perf_counter() - start
    assert elapsed < 20, f"{shape}: {elapsed:.1f} s for 1,600 loads"
    assert len(report.skipped) >= 1600  # every load was decided (pointers may alias: no .nc by default)
    assert analyses.computed["memory"] == 1


# ---------------------------------------------------------------- the look-ups against their pairwise definitions


def _touched_once_pairwise(accesses: tuple[MemoryAccess, ...], a: MemoryAccess, width: int) -> bool:
    terms, const = a.offset.terms, a.offset.const
    for other in accesses:
        if other.op == a.op or other.base != a.base:
            continue
        other_terms = other.offset.terms
        differ = {t for t in terms.keys() | other_terms.keys() if terms.get(t, 0) != other_terms.get(t, 0)}
        if differ and not all(any("%nctaid" in f for f in t.factors) for t in differ):
            return False
        if not differ and abs(other.offset.const - const) < 32 * width:
            return False
    return True


def _reach_pairwise(accesses: tuple[MemoryAccess, ...], a: MemoryAccess) -> int:
    siblings = [o.offset.const for o in accesses if o.base == a.base and o.offset.terms == a.offset.terms]
    return max(siblings) - min(siblings)


# index registers: the element, +grid, +2*grid (unrolled grid stride), a block-strided tile, a lane, %ctaid.y's row
_INDICES = (
    "    mad.lo.s32 %r5, %r1, %r2, %r3;\n    mul.lo.s32 %r6, %r4, %r2;\n    add.s32 %r7, %r5, %r6;\n"
    "    mad.lo.s32 %r8, %r6, 2, %r5;\n    shl.b32 %r9, %r1, 8;\n    add.s32 %r9, %r9, %r3;\n"
    "    shl.b32 %r10, %r1, 5;\n    add.s32 %r10, %r10, %r3;\n"
)


def _fuzzed(seed: int) -> str:
    """A kernel of random loads and stores through two pointers, at offsets of the shapes the pass tells apart."""
    rng = random.Random(seed)
    bounds = rng.choice(("", ".maxntid 256, 1, 1", ".reqntid 32, 4, 1"))
    registers = ["%r3", "%r5", "%r5", "%r7", "%r8", "%r9", "%r10"]
    lines = [
        ".version 8.0\n.target sm_90\n.address_size 64\n",
        f".visible .entry fuzzed(.param .u64 a, .param .u64 b)\n{bounds}\n{{",
        "    .reg .b32 %r<16>;\n    .reg .f32 %f<5>;\n    .reg .b64 %rd<64>;",
        "    ld.param.u64 %rd1, [a];\n    ld.param.u64 %rd2, [b];",
        "    cvta.to.global.u64 %rd1, %rd1;\n    cvta.to.global.u64 %rd2, %rd2;",
        "    mov.u32 %r1, %ctaid.x;\n    mov.u32 %r2, %ntid.x;\n    mov.u32 %r3, %tid.x;\n    mov.u32 %r4, %nctaid.x;",
        _INDICES,
    ]
    if rng.random() < 0.2:
        lines.append("    mov.u32 %r11, %ctaid.y;\n    mad.lo.s32 %r12, %r11, %r2, %r5;")
        registers.append("%r12")
    for n in range(rng.randint(1, 12)):
        width = rng.choice((4, 8, 16))
        vector, values = {4: ("f32", "%f1"), 8: ("v2.f32", "{%f1, %f2}"), 16: ("v4.f32", "{%f1, %f2, %f3, %f4}")}[width]
        lines.append(f"    mul.wide.s32 %rd{n + 3}, {rng.choice(registers)}, {width};")
        lines.append(f"    add.s64 %rd{n + 20}, {rng.choice(('%rd1', '%rd2'))}, %rd{n + 3};")
        address = f"[%rd{n + 20}+{rng.choice((0, 0, 4, 16, 64, 128, 256, 512, 1024, 4096, -128))}]"
        if rng.random() < 0.7:
            lines.append(f"    ld.global.{vector} {values}, {address};")
        else:
            lines.append(f"    st.global.{vector} {address}, {values};")
    return "\n".join([*lines, "    ret;\n}\n"])


def test_grouped_lookups_agree_with_pairwise_comparison() -> None:
    decided = streaming = 0
    for seed in range(300):
        module = parse(_fuzzed(seed))
        function = module.functions[0]
        cfg = build_cfg(function)
        facts = memory_facts(module, function, cfg)
        k = _Kernel(module, function, cfg, facts, False, _Neighbours.of(facts.accesses))
        for a in facts.accesses:
            for width in (4, 8, 16):
                once = _touched_once(k, a, width)
                assert once == _touched_once_pairwise(facts.accesses, a, width), (seed, a.line, width)
                decided += 1
                streaming += once
            least, most = k.neighbours.spans[a.base, frozenset(a.offset.terms.items())]
            assert most - least == _reach_pairwise(facts.accesses, a), (seed, a.line)
    assert decided > 2000 and 0 < streaming < decided  # both answers occur

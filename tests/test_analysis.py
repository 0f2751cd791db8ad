"""Analyses on corpus kernels, each fact checked by hand against the PTX and the CUDA source in corpus/src."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
from conftest import CORPUS

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.dataflow.liveness import ENTRY, def_use, liveness
from ptxtool.analysis.linear import linearize
from ptxtool.analysis.loops import find_loops
from ptxtool.analysis.memory import Affine, MemoryBase, Space, memory_facts
from ptxtool.analysis.pressure import pressure
from ptxtool.syntax import ast, parse


@cache
def module(name: str) -> ast.Module:
    return parse((CORPUS / name).read_text())


def kernel(name: str, kernel_name: str) -> ast.Function:
    return next(f for f in module(name).functions if f.name == kernel_name)


def op_at(cfg, line: int) -> int:
    return next(op.index for op in cfg.linear.ops if op.line == line)


# ---------------------------------------------------------------- CFG and loops


def test_sgemm_loops_and_induction():
    """sgemm_tiled: `for k0 += TK(16)` holds the partly unrolled `for i += 256` copy loop."""
    cfg = build_cfg(kernel("ptx/gemm_smem.sm80.ptx", "sgemm_tiled"))
    loops = find_loops(cfg)
    assert [(cfg.blocks[lp.header].label, lp.depth) for lp in loops] == [("$L__BB0_3", 1), ("$L__BB0_21", 2)]
    assert [(iv.register, iv.step) for iv in loops[0].induction] == [("%r295", 16)]
    assert loops[1].parent == 0 and loops[1].blocks < loops[0].blocks


def test_nbody_nested_loops_strides():
    """nbody_tile: `tile += 128` around the j loop unrolled 8 times over 16-byte float4s (128 bytes a trip)."""
    cfg = build_cfg(kernel("ptx/pressure.sm80.ptx", "nbody_tile"))
    loops = find_loops(cfg)
    assert [cfg.blocks[lp.header].label for lp in loops] == ["$L__BB1_2", "$L__BB1_3"]
    assert [(iv.register, iv.step) for iv in loops[0].induction] == [("%r38", 128)]
    assert [(iv.register, iv.step) for iv in loops[1].induction] == [("%r39", 128)]


def test_brx_idx_reaches_every_branch_target():
    cfg = build_cfg(kernel("handwritten/rare_syntax.ptx", "switcher"))
    brx = next(b for b in cfg.blocks if cfg.linear.ops[b.end - 1].instruction.opcode == "brx")
    assert sorted(cfg.blocks[s].label for s in brx.successors) == ["L0", "L1", "L2", "L3"]
    assert find_loops(cfg) == ()
    done = next(b for b in cfg.blocks if b.label == "DONE")
    assert len(done.predecessors) == 4 and cfg.dominates(brx.index, done.index)


def test_ret_exit_trap_end_blocks_and_calls_stay_inside():
    cfg = build_cfg(kernel("ptx/control.sm80.ptx", "hello"))
    trap = next(op for op in cfg.linear.ops if op.instruction.opcode == "trap")
    assert cfg.blocks[cfg.block_of[trap.index]].successors == ()
    assert sum(len(b.calls) for b in cfg.blocks) == 3  # vprintf, malloc, free
    rets = [b for b in cfg.blocks if b.end > b.start and cfg.linear.ops[b.end - 1].instruction.opcode == "ret"]
    assert rets and all(not b.successors for b in rets)


# ---------------------------------------------------------------- scopes, def-use, liveness


def test_nested_scope_registers_get_their_own_keys():
    lin = linearize(kernel("handwritten/rare_syntax.ptx", "switcher"))
    inner = [k for k in lin.registers if k.startswith("%inner")]
    assert len(inner) == 1 and "#" in inner[0]
    outer_r4 = lin.registers["%r4"]
    assert outer_r4.units == 1 and lin.registers["%rd2"].units == 2 and lin.registers["%p1"].units == 0


def test_def_use_through_guarded_definitions():
    """At DONE, %r4 comes from L0, L1, L2 and the last unguarded mov of L3; its two guarded movs are overwritten."""
    cfg = build_cfg(kernel("handwritten/rare_syntax.ptx", "switcher"))
    du = def_use(cfg)
    use = next(op for op in cfg.linear.ops if op.instruction.mnemonic == "st.param.b32")
    lines = sorted(cfg.linear.ops[d].line for d in du.defs_of[(use.index, "%r4")])
    assert lines == [56, 59, 65, 73]
    guarded = next(op for op in cfg.linear.ops if op.line == 71)  # @%p2 mov.u32 %r4, 6;
    assert du.uses_of.get((guarded.index, "%r4")) is None  # killed by line 73 before any use
    live = liveness(cfg)
    assert "%r4" not in live.live_in[op_at(cfg, 70)]  # guarded writes, then an unguarded one at 73, no read


def test_use_before_definition_reaches_from_entry():
    cfg = build_cfg(kernel("handwritten/rare_syntax.ptx", "switcher"))
    du = def_use(cfg)
    setp = next(op for op in cfg.linear.ops if op.line == 69)  # setp.lt.and.s32 %p1|%p2, %r1, 10, %p3
    assert du.defs_of[(setp.index, "%p3")] == (ENTRY,)


# ---------------------------------------------------------------- pressure


def test_pressure_peak_where_all_24_doubles_and_the_sum_are_live():
    """long_live_ranges keeps v[0..23] (48 registers) live until s is formed; the peak is the first v[k] / s."""
    cfg = build_cfg(kernel("ptx/pressure.sm80.ptx", "long_live_ranges"))
    curve = pressure(cfg)
    assert curve.peak.line == 870  # div.rn.f64 %fd49, %fd2, %fd48
    live = curve.live[curve.peak.op]
    assert sum(1 for k in live if k.startswith("%fd")) == 26  # 24 values, the sum, the quotient
    assert curve.peak.units == 60


def test_pressure_curve_is_per_instruction():
    cfg = build_cfg(kernel("ptx/elementwise.sm80.ptx", "saxpy"))
    curve = pressure(cfg)
    assert [p.op for p in curve.points] == list(range(len(cfg.linear.ops)))
    assert curve.points[-1].units == 0  # nothing is live at ret
    by_line = curve.by_line()
    assert max(by_line.values()) == curve.peak.units and by_line[curve.peak.line] == curve.peak.units


# ---------------------------------------------------------------- memory facts


def test_saxpy_x_read_only_y_written():
    fn = kernel("ptx/elementwise.sm80.ptx", "saxpy")
    facts = memory_facts(module("ptx/elementwise.sm80.ptx"), fn)
    assert facts.written_params == {"saxpy_param_3"}
    assert "saxpy_param_2" in facts.read_only_params
    by_line = {a.line: a for a in facts.accesses}
    assert by_line[49].base == MemoryBase(Space.PARAM, "saxpy_param_2") and by_line[51].param == "saxpy_param_3"
    offset = by_line[49].offset
    assert str(offset) == "4*%ctaid.x*%ntid.x + 4*%tid.x" and not by_line[49].in_loop
    assert offset.coefficient("%tid.x") == 4 and offset.specials == {"%ctaid.x", "%ntid.x", "%tid.x"}
    assert facts.indices == {"%ctaid.x", "%tid.x"} and facts.observers == ()


def test_indirect_call_blocks_read_only():
    facts = memory_facts(module("handwritten/rare_syntax.ptx"), kernel("handwritten/rare_syntax.ptx", "indirect"))
    assert facts.read_only_params == frozenset() and facts.unknown_writes


def test_malloc_pointer_writes_do_not_block_read_only():
    facts = memory_facts(module("ptx/control.sm80.ptx"), kernel("ptx/control.sm80.ptx", "hello"))
    assert facts.unknown_writes == () and facts.read_only_params == {"hello_param_0"}


def _bytes(stride: Affine | None) -> int | None:
    return stride.constant if stride is not None else None


def test_strides_of_loop_accesses():
    """copy_pipelined: the tile loop unrolled 4 times moves 4 tiles of 256 float4 per trip (16384 bytes), its
    remainder loop one tile (4096); sgemm: A moves TK=16 floats (64 bytes) per k0 trip, B 16*N floats (not a
    constant)."""
    name = "ptx/gemm_smem.sm80.ptx"
    facts = memory_facts(module(name), kernel(name, "copy_pipelined"))
    src = {(a.loop, _bytes(a.stride)) for a in facts.accesses if a.param == "copy_pipelined_param_0" and a.in_loop}
    assert src == {(0, 16384), (1, 4096)}
    sgemm = memory_facts(module(name), kernel(name, "sgemm_tiled"))
    a_loads = {(a.loop, _bytes(a.stride)) for a in sgemm.accesses if a.param == "sgemm_tiled_param_3"}
    b_loads = {(a.loop, _bytes(a.stride)) for a in sgemm.accesses if a.param == "sgemm_tiled_param_4"}
    # inside the `i` copy loop (loop 1) the index is i / 16 and i % 16: not affine, so no stride there
    assert a_loads == {(0, 64), (1, None)} and b_loads == {(0, None), (1, None)}
    assert {"sgemm_tiled_param_3", "sgemm_tiled_param_4"} <= sgemm.read_only_params
    assert sgemm.written_params == {"sgemm_tiled_param_5"}


def test_chain_induction_variables():
    """daxpy_grid_stride's loop unrolled 4 times advances %rd67 through three temporaries, each adding the
    grid stride %rd27: one induction variable with step 4*%rd27; the countdown %rd63 steps by -1."""
    cfg = build_cfg(kernel("ptx/elementwise.sm80.ptx", "daxpy_grid_stride"))
    loops = find_loops(cfg)
    steps = [{iv.register: iv.step for iv in lp.induction} for lp in loops]
    assert steps[0]["%rd63"] == -1 and steps[0]["%rd61"] == "%rd15"
    assert steps[1] == {"%rd64": "4*%rd8", "%rd66": "4*%rd27", "%rd67": "4*%rd27"}


def test_pointer_induction_through_a_chain():
    """daxpy's unrolled loop advances %rd67 through %rd51.. (not `add r, r, c`): still affine, base kept."""
    name = "ptx/elementwise.sm80.ptx"
    facts = memory_facts(module(name), kernel(name, "daxpy_grid_stride"))
    assert facts.unknown_writes == ()
    assert {a.param for a in facts.accesses} == {"daxpy_grid_stride_param_2", "daxpy_grid_stride_param_3"}
    # grid-stride loops: the step is blockDim*gridDim*8 bytes, and four of them per unrolled trip
    assert {(a.loop, str(a.stride)) for a in facts.accesses} == {
        (0, "8*%nctaid.x*%ntid.x"),
        (1, "32*%nctaid.x*%ntid.x"),
    }
    assert all(next(iter(a.stride.terms)).factors == ("%nctaid.x", "%ntid.x") for a in facts.accesses)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_analyses_never_write_onto_the_tree(path):
    mod = parse(path.read_text())
    before = [dataclasses.astuple(k) for k in mod.kernels]
    for k in mod.kernels:
        cfg = build_cfg(k)
        find_loops(cfg)
        pressure(cfg)
        memory_facts(mod, k, cfg)
    assert [dataclasses.astuple(k) for k in mod.kernels] == before


# Reads that really have no write: the handwritten `%p3`, and halves nvcc 13.5 leaves undefined when it packs a struct
# copy (`mov.b64 %rd7, {%r6, %r10};` with %r10 never written).
NEVER_WRITTEN = {"rare_syntax.ptx": [(69, "%p3")], "nvcc.k09_texture.sm103.ptx": [(94, "%r10"), (106, "%r18")]}


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_every_register_read_has_a_reaching_write(path):
    """A check of the ISA role tables on compiler output: were a defined operand listed as used (or the reverse),
    some read would find no write before it. NEVER_WRITTEN lists the real exceptions. A `.func`'s
    `.reg` parameters are written by its caller: their reads reach ENTRY by design."""
    mod = parse(path.read_text())
    unwritten = []
    for fn in mod.functions:
        if fn.body is None:
            continue
        cfg = build_cfg(fn)
        reg_params = {p.name for p in fn.params or () if any(a.word == ".reg" for a in p.attributes)}
        for (op, reg), defs in def_use(cfg).defs_of.items():
            if defs == (ENTRY,) and cfg.block_of[op] in cfg.idom and reg not in reg_params:
                unwritten.append((cfg.linear.ops[op].line, reg))
    assert unwritten == NEVER_WRITTEN.get(path.name, [])


def test_mapa_of_shared_stays_shared_through_a_nested_scope():
    """cluster_exchange reads a neighbour block's shared variable: cvta.shared in a `{ .reg .b64 %tmp; }` scope,
    then mapa, then a generic ld. That is shared memory, so it is no global access and no unknown pointer."""
    name = "ptx/hopper.sm90a.ptx"
    facts = memory_facts(module(name), kernel(name, "cluster_exchange"))
    assert [a.line for a in facts.accesses] == [569, 584, 608]
    assert {a.base for a in facts.accesses} == {MemoryBase(Space.PARAM, "cluster_exchange_param_0")}


def _reaching_by_sets(cfg) -> dict[tuple[int, str], set[int]]:
    """Reaching definitions the slow way, as sets of (op, register) updated op by op: the reference for def_use."""
    ops = cfg.linear.ops
    out: dict[int, frozenset] = {b.index: frozenset() for b in cfg.blocks}
    found: dict[tuple[int, str], set[int]] = {}
    changed = True
    while changed:
        changed = False
        for b in cfg.reverse_postorder:
            block = cfg.blocks[b]
            reach = set().union(*(out[p] for p in block.predecessors))
            for i in range(block.start, block.end):
                for u in ops[i].uses:
                    found[(i, u)] = {d for d, r in reach if r == u} or {ENTRY}
                for d in ops[i].defs:
                    reach = reach if ops[i].guarded else {s for s in reach if s[1] != d}
                    reach.add((i, d))
            if frozenset(reach) != out[b]:
                out[b], changed = frozenset(reach), True
    return found


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.ptx")), ids=lambda p: p.name)
def test_def_use_and_loops_made_once_per_graph(path):
    """The chains and loops a CFG keeps (memory facts, loops, divergence and lint share them) are def_use's and
    find_loops's, and def_use's chains (block transfers composed from each op's kill and gen) are the reaching
    definitions found op by op with sets."""
    for fn in parse(path.read_text()).functions:
        if fn.body is None:
            continue
        cfg = build_cfg(fn)
        assert cfg.chains is cfg.chains and cfg.loops is cfg.loops
        assert cfg.chains == def_use(cfg) and cfg.loops == find_loops(cfg, def_use(cfg))
        reference = _reaching_by_sets(cfg)
        assert {k: set(v) for k, v in cfg.chains.defs_of.items()} == reference, fn.name
        uses: dict[tuple[int, str], set[int]] = {}
        for (op, reg), defs in reference.items():
            for d in defs - {ENTRY}:
                uses.setdefault((d, reg), set()).add(op)
        assert {k: set(v) for k, v in cfg.chains.uses_of.items()} == uses, fn.name

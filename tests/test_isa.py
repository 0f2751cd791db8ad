"""The ISA tables: every corpus opcode known, operand roles and memory facts on real corpus instructions,
and the target rules (`a` exact, `f` family) checked against the wheel's ptxas."""

from __future__ import annotations

import glob
from functools import cache
from pathlib import Path

import pytest
from conftest import CORPUS

from ptxtool import isa
from ptxtool.isa import Effect, Mode, Role, Target
from ptxtool.isa.targets import TARGET_INTRODUCED, Need
from ptxtool.syntax import ast, parse
from ptxtool.toolchain import discover

FILES = sorted(glob.glob(str(CORPUS / "*" / "*.ptx")))


@cache
def module(name: str) -> ast.Module:
    return parse((CORPUS / name).read_text())


def corpus_instructions(name: str):
    for f in module(name).functions:
        if f.body:
            yield from ast.instructions(f.body)


def first(name: str, mnemonic: str) -> ast.Instruction:
    return next(i for i in corpus_instructions(name) if i.mnemonic.startswith(mnemonic))


def roles(i: ast.Instruction) -> list[tuple[str, str]]:
    """(register, role) pairs, flattened through vectors, pairs, addresses and call lists."""
    return [(n.text, role.value) for op, role in isa.operand_roles(i) for n in isa.operand_names(op)]


@pytest.mark.parametrize("path", FILES, ids=[Path(f).name for f in FILES])
def test_every_corpus_opcode_is_known(path):
    mod = parse(Path(path).read_text())
    unknown = {i.mnemonic for f in mod.functions if f.body for i in ast.instructions(f.body) if isa.find(i) is None}
    assert not unknown


def test_store_address_and_value_are_uses():
    i = first("ptx/gemm_smem.sm80.ptx", "st.global.f32")  # st.global.f32 [%rd], %f
    assert {r for _, r in roles(i)} == {"use"}
    assert [(m, s) for _, m, s in isa.memory_accesses(i)] == [(Mode.WRITE, "global")]


def test_vector_load_defines_each_element():
    i = first("ptx/comm.sm80.ptx", "ld.global.nc.L1::no_allocate.L2::256B.v4.s32")
    got = roles(i)
    assert [r for _, r in got[:4]] == ["def"] * 4 and got[4][1] == "use"
    assert isa.memory_accesses(i)[0][1:] == (Mode.READ, "global")


def test_atomic_result_defined_and_location_read_written():
    i = first("ptx/reduce.sm80.ptx", "atom.global.add.f32")
    assert roles(i)[0][1] == "def" and all(r == "use" for _, r in roles(i)[1:])
    assert isa.memory_accesses(i)[0][1] is Mode.READ_WRITE
    assert Effect.ATOMIC in isa.effects(i)
    cas = first("ptx/reduce.sm80.ptx", "atom.global.cas.b32")
    assert [r for _, r in roles(cas)] == ["def", "use", "use", "use"]


def test_predicate_pair_both_defined():
    i = first("handwritten/rare_syntax.ptx", "setp")
    pair = next(op for op in i.operands if isinstance(op, ast.PredPair))
    assert isa.operand_roles(i)[0] == (pair, Role.DEF)


def test_mbarrier_try_wait_defines_its_predicate():
    i = first("ptx/hopper.sm90a.ptx", "mbarrier.try_wait")
    assert isa.family(i) == "mbarrier.try_wait"
    assert roles(i)[0][1] == "def" and all(r == "use" for _, r in roles(i)[1:])
    assert Effect.BARRIER in isa.effects(i)


def test_wgmma_accumulators_are_read_and_written():
    i = first("ptx/hopper.sm90a.ptx", "wgmma.mma_async")
    accumulators = [r for name, r in roles(i) if name.startswith("%f")]
    assert len(accumulators) == 32 and set(accumulators) == {"def+use"}
    assert isa.effects(i) & (Effect.ASYNC | Effect.COLLECTIVE) == Effect.ASYNC | Effect.COLLECTIVE


def test_call_returns_defined_arguments_used():
    i = next(
        i
        for i in corpus_instructions("ptx/control.sm80.ptx")
        if i.opcode == "call" and i.operands[0:1] and isinstance(i.operands[0], ast.ParenList)
    )
    got = isa.operand_roles(i)
    assert got[0][1] is Role.DEF and got[1][1] is Role.USE and Effect.CALL in isa.effects(i)


def test_branch_targets_and_brx():
    i = first("handwritten/rare_syntax.ptx", "brx.idx")
    assert [r for _, r in isa.operand_roles(i)] == [Role.USE, Role.TARGET]
    assert Effect.BRANCH in isa.effects(i)


def test_copy_spaces_destination_first():
    i = first("ptx/gemm_smem.sm86.O0.ptx", "cp.async.ca.shared.global")
    assert [(m, s) for _, m, s in isa.memory_accesses(i)] == [(Mode.WRITE, "shared"), (Mode.READ, "global")]
    bulk = first("ptx/hopper.sm90a.ptx", "cp.async.bulk.global.shared::cta")
    assert [(m, s) for _, m, s in isa.memory_accesses(bulk)] == [(Mode.WRITE, "global"), (Mode.READ, "shared::cta")]


def test_lookup_by_mnemonic_and_unknown():
    assert isa.lookup("ld.global.nc.v4.f32").family == "ld"
    assert isa.lookup("tcgen05.fence::before_thread_sync").family == "tcgen05.fence"
    unknown = isa.lookup("frobnicate.b32")
    assert isa.find("frobnicate.b32") is None
    assert unknown.roles == (isa.Role.DEF_USE,) and unknown.effects == isa.WORST_CASE


@pytest.mark.parametrize(
    ("need", "target", "ok"),
    [
        ("sm_90a", "sm_90a", True),
        ("sm_90a", "sm_90", False),
        ("sm_90a", "sm_100a", False),  # `a` features need exactly that target
        ("sm_90", "sm_90a", True),
        ("sm_90", "sm_120", True),
        ("sm_100f", "sm_103f", True),  # same family, newer
        ("sm_100f", "sm_103a", True),  # arch-specific includes the family features
        ("sm_100f", "sm_103", False),
        ("sm_100f", "sm_120f", False),  # another family
        ("sm_120f", "sm_121a", True),
    ],
)
def test_target_suffix_rules(need, target, ok):
    assert Need((8, 0), need).target_ok(Target.parse(target)) is ok


@cache
def ptxas() -> discover.Tool:
    return discover.find_tool("ptxas")


def test_target_introduction_versions_match_ptxas(tmp_path):
    """For each target: ptxas accepts it at the table's version and rejects it one minor version lower."""
    tool = ptxas()
    _, supported = discover.ptxas_support(tool)
    for target, (major, minor) in TARGET_INTRODUCED.items():
        if target not in supported:
            continue
        for ptx, expect in (((major, minor), True), ((major, minor - 1) if minor else (major - 1, 8), False)):
            path = tmp_path / "t.ptx"
            path.write_text(f".version {ptx[0]}.{ptx[1]}\n.target {target}\n.address_size 64\n.entry k() {{ ret; }}\n")
            run = discover.run_tool(tool, [f"-arch={target}", str(path), "-o", str(tmp_path / "t.cubin")])
            assert (run.returncode == 0) is expect, (target, ptx, run.stderr)

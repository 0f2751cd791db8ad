"""Adversarial cases for rematerialization and the warp-role split: kernels written to break each pass's safety
rules. Each checks what the pass must do (refuse, or rewrite into what ptxas accepts and computes the same)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_pass_registers_remat import TABLE_NC, kernel, registers, remat_module

from ptxtool.passes.warp_roles import RoleSettings, warp_roles
from ptxtool.syntax import parse

STAGED = (Path(__file__).parent / "data" / "warp_roles" / "staged.ptx").read_text()


@pytest.mark.parametrize("special", ["%total_smem_size", "%aggr_smem_size"])
def test_split_refuses_a_kernel_that_reads_its_shared_memory_size(special: str) -> None:
    """The ring (S slots and 16 S bytes of mbarriers) replaces the kernel's 512 bytes of `.shared`: a consumer that
    stores %total_smem_size after the loop would store 1056 instead of 512."""
    store = "\tst.global.f32 \t[%rd8], %f1;"
    assert store in STAGED
    text = STAGED.replace(store, f"\tmov.u32 %r15, {special};\n\tst.global.u32 \t[%rd8], %r15;")
    _, report = warp_roles(parse(text), RoleSettings())
    assert not report.inserted
    assert [s.reason for s in report.skipped] == [f"reads {special}, which the grown block would change"]


def test_a_value_read_in_a_vector_operand_is_recomputed_there_too(ptxas: str, tmp_path: Path) -> None:
    """`st.global.v2.u64 [..], {%rd4, %rd7}` read the loaded pointer %rd4 in a brace list, which the pass left as it
    was: %rd4 stayed live across the loop (no register freed) while the report counted the read as recomputed."""
    inside = "\tst.global.v2.u64 [%rd6], {%rd4, %rd7};\n"
    text, done = remat_module(kernel(TABLE_NC, inside))
    found = {r.register: r for r in done["k"]}
    assert found["%rd4"].uses == 2
    loop = text[text.index("$LOOP:") :]
    assert "%rd4" not in loop
    assert re.search(r"st\.global\.v2\.u64 \[%remat_b64_\d+\], \{%remat_b64_\d+, %rd7\};", loop)
    registers(ptxas, text, tmp_path)


TREE = "\tmov.u32 %r3, 7;\n\tmul.wide.u32 %rd10, %r3, 8;\n\tadd.s64 %rd4, %rd2, %rd10;\n"


@pytest.mark.parametrize(
    ("before", "inside"),
    [
        (TREE + "\tld.global.nc.v2.u32 {%r3, %r4}, [%rd2];\n", ""),  # a vector load's destination
        (TREE + "\tshfl.sync.bfly.b32 %r3|%p2, %r3, 1, 31, -1;\n", ""),  # the first of a pair of destinations
        (TREE + "\tmov.b64 {%r3, %r4}, %rd2;\n", ""),  # an unpacking mov
        (TREE, "\tld.global.nc.v2.u32 {%r3, %r4}, [%rd9];\n"),  # inside the loop
    ],
)
def test_a_tree_register_written_again_is_never_recomputed(before: str, inside: str) -> None:
    """%rd4 = %rd2 + 8 * %r3, with %r3 written a second time by a vector or paired destination: recomputing %rd4
    in the loop would read the second value."""
    _, done = remat_module(kernel(before, inside))
    assert "%rd4" not in {r.register for r in done["k"]}


def test_a_shadowing_register_in_a_nested_block_is_not_the_outer_one(ptxas: str, tmp_path: Path) -> None:
    """A `{ .reg .b32 %r3; ... }` block in the loop writes its own %r3: the outer %r3 is still written once, and the
    recomputation (at the top level) reads the outer one."""
    text, done = remat_module(kernel(TREE, "\t{\n\t.reg .b32 %r3;\n\tmov.u32 %r3, 9;\n\t}\n"))
    assert "%rd4" in {r.register for r in done["k"]}
    loop = text[text.index("$LOOP:") :]
    assert re.search(r"mov\.u32 %remat_b32_\d+, 7;", loop)
    registers(ptxas, text, tmp_path)


@pytest.mark.parametrize(
    ("declaration", "use"),
    [
        ("\t.reg .f32 %wr_a<2>;", "\tmov.f32 %wr_a1, 0f3F800000;\n\tadd.f32 %f1, %f1, %wr_a1;"),  # a register
        ("\t.shared .align 4 .b8 __wr_full[4];", ""),  # a shared variable: ptxas accepts, the refusal is caution
    ],
)
def test_split_refuses_a_kernel_that_already_uses_its_names(declaration: str, use: str) -> None:
    """The split declares `%wr_a<8>` (and `__wr_full`, `$__wr_*` labels): a kernel with its own `%wr_a1` came out
    with `%wr_a<` declared twice and ptxas rejected it ("Duplicate definition of variable")."""
    store = "\tst.global.f32 \t[%rd8], %f1;"
    text = STAGED.replace("\t.reg .b64 \t%rd<10>;", "\t.reg .b64 \t%rd<10>;\n" + declaration)
    text = text.replace(store, f"{use}\n{store}")
    assert declaration in text and use in text
    _, report = warp_roles(parse(text), RoleSettings())
    assert not report.inserted
    assert "a name the split declares" in report.skipped[0].reason


def test_a_value_passed_to_a_call_is_recomputed_there_too(ptxas: str, tmp_path: Path) -> None:
    """`call g, (%rd4)` in the loop: the argument list is read like a brace list, so %rd4 is not live across it."""
    callee = ".func g(.param .u64 a)\n{\n\tret;\n}\n"
    text, done = remat_module(kernel(TABLE_NC, "\tcall g, (%rd4);\n", callee))
    assert {r.register: r.uses for r in done["k"]}["%rd4"] == 2
    loop = text[text.index("$LOOP:") :]
    assert "%rd4" not in loop and re.search(r"call g, \(%remat_b64_\d+\);", loop)
    registers(ptxas, text, tmp_path)

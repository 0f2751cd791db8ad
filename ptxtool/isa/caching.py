"""Caching, coherence and width facts of memory instructions, kept once for the optimizer, lint and inspect.

From the PTX ISA manual: the cache operators of `ld`/`st` (PTX 2.0, sm_20), the qualifiers that make an access
ordered or scoped (memory consistency model), the instructions through which a thread may observe writes of other
agents (other grids, the host, other GPUs, the async proxy), and the width of each fundamental type.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ptxtool.isa.model import Feature
from ptxtool.isa.opcodes import needs
from ptxtool.syntax import ast

# Memory-model semantics: an access with one of these must see (and be seen by) other threads' accesses in order.
ORDERING = frozenset(("volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "mmio"))
SCOPES = frozenset(("cta", "cluster", "gpu", "sys"))
# An ld/st with any of these is a synchronizing (or at least coherent) access: never recached.
COHERENT = ORDERING | SCOPES
LOAD_CACHE_OPERATORS = frozenset(("ca", "cg", "cs", "lu", "cv"))
STORE_CACHE_OPERATORS = frozenset(("wb", "cg", "cs", "wt"))
CACHE_OPERATORS = LOAD_CACHE_OPERATORS | STORE_CACHE_OPERATORS
# Every word that says how an ld/st is cached or ordered (besides `.L1::`/`.L2::` hints).
CACHE_WORDS = CACHE_OPERATORS | ORDERING | {"nc"}

# "PTX ISA version 2.0 introduced optional cache operators on load and store instructions. The cache operators
# require a target architecture of sm_20 or higher." (ptxas 13: "Feature 'cache operation' requires PTX ISA
# .version 2.0 or later".)
FEATURES: tuple[Feature, ...] = tuple(Feature(op, needs("2.0 sm_20"), ("ld", "st")) for op in sorted(CACHE_OPERATORS))

TYPE_BITS: dict[str, int] = {
    "pred": 1,
    **dict.fromkeys(("b8", "u8", "s8", "e4m3", "e5m2"), 8),
    **dict.fromkeys(("b16", "u16", "s16", "f16", "bf16", "e4m3x2", "e5m2x2"), 16),
    **dict.fromkeys(("b32", "u32", "s32", "f32", "f16x2", "bf16x2", "tf32"), 32),
    **dict.fromkeys(("b64", "u64", "s64", "f64"), 64),
    "b128": 128,
}
_VECTOR = re.compile(r"v(\d+)$")
_L2_SIZE = re.compile(r"L2::\d+B$")


def type_bits(word: str) -> int | None:
    """Bits of a fundamental type written without its dot (`f16x2` -> 32), None if it is not one."""
    return TYPE_BITS.get(word)


def access_bytes(instr: ast.Instruction) -> int:
    """Bytes one thread moves with a load or store: the vector width times the element's size (the last type)."""
    vector = next((int(m[1]) for m in map(_VECTOR.match, instr.modifiers) if m), 1)
    bits = next((TYPE_BITS[m] for m in reversed(instr.modifiers) if m in TYPE_BITS), 32)
    return vector * max(1, bits // 8)


def cache_operator(instr: ast.Instruction) -> str | None:
    """The cache operator an author wrote on an ld/st (`cg`), if any (`.nc` is a path, not an operator)."""
    return next((m for m in instr.modifiers if m in CACHE_OPERATORS), None)


def coherent(instr: ast.Instruction) -> frozenset[str]:
    """The ordering and scope qualifiers of an access (empty for a weak one)."""
    return COHERENT.intersection(instr.modifiers)


def _async_store(instr: ast.Instruction) -> bool:
    """A bulk or tensor copy whose destination is global memory (written by the async proxy)."""
    if instr.opcode == "cp" and instr.modifiers[:2] == ("reduce", "async"):
        return True
    spaces = [m for m in instr.modifiers if m in ("global", "shared::cta", "shared::cluster", "shared")]
    return instr.opcode == "cp" and instr.modifiers[:2] == ("async", "bulk") and spaces[:1] == ["global"]


def observes_other_agents(instr: ast.Instruction) -> str | None:
    """Why a thread that executes this instruction may observe memory written by another agent while it runs (None:
    it cannot). Other agents are other grids, the host, other GPUs and the async proxy: after such an instruction,
    data the kernel never writes may still change, so a non-coherent (`.nc`) load of it may read stale values."""
    op, mods = instr.opcode, instr.modifiers
    if op in ("ld", "st") and (words := coherent(instr)):
        return f"{op} with .{' .'.join(sorted(words))} (an ordered or scoped access)"
    if op in ("atom", "red"):
        return f"{instr.mnemonic} (an atomic: relaxed at least, ordered with other agents' accesses)"
    if op in ("multimem", "sured"):
        return f"{instr.mnemonic} (memory shared with other GPUs or a surface reduction)"
    if op in ("fence", "membar") or (op == "tensormap" and mods[:1] == ("cp_fenceproxy",)):
        return f"{instr.mnemonic} (a memory fence)"
    if op == "griddepcontrol" and "wait" in mods:
        return "griddepcontrol.wait (waits for the grid it depends on: its writes become visible)"
    if op == "mbarrier" and mods[:1] in (("try_wait",), ("test_wait",)):
        return f"{instr.mnemonic} (an mbarrier wait: acquire by default)"
    if op == "barrier" and mods[:2] == ("cluster", "wait"):
        return f"{instr.mnemonic} (a cluster barrier wait: acquire by default)"
    if _async_store(instr):
        return f"{instr.mnemonic} (a bulk/tensor store by the async proxy: may write any parameter's memory)"
    return None


def _rank(modifier: str) -> int:
    """Position of a modifier's class in `ld/st{.weak|.sem}{.scope}{.ss}{.nc}{.cop}{.L1::}{.L2::evict}
    {.L2::cache_hint}{.L2::size}{.vec}.type` (PTX ISA, ld and st)."""
    if modifier in COHERENT or modifier == "weak":
        return 0
    if modifier.partition("::")[0] in ("global", "shared", "local", "const", "param"):
        return 1
    if modifier == "nc":
        return 2
    if modifier in CACHE_OPERATORS:
        return 3
    if modifier.startswith("L1::"):
        return 4
    if modifier.startswith("L2::evict_"):
        return 5
    if modifier == "L2::cache_hint":
        return 6
    if _L2_SIZE.match(modifier):
        return 7
    return 8 if _VECTOR.match(modifier) else 9


# Modifiers the grammar does not allow beside an added one: `ld.global.nc` has no `{.weak}` slot (a non-coherent
# load is weak by definition; ptxas 13: "Modifier '.weak' cannot be combined with modifier '.nc'").
EXCLUDES: dict[str, frozenset[str]] = {"nc": frozenset(("weak",))}


def with_modifier(instr: ast.Instruction, modifier: str) -> ast.Instruction:
    """The instruction with one more modifier, placed where the PTX grammar wants it (dropping one it excludes:
    `ld.weak.global` -> `ld.global.nc`)."""
    mods = [m for m in instr.modifiers if m not in EXCLUDES.get(modifier, ())]
    at = next((k for k, m in enumerate(mods) if _rank(m) > _rank(modifier)), len(mods))
    mods.insert(at, modifier)
    return replace(instr, modifiers=tuple(mods))

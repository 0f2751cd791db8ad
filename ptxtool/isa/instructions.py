"""The one API over the ISA tables: what an instruction defines and uses, which memory it touches, its side
effects, and the PTX version and target it needs.

>>> from ptxtool.syntax import parse
>>> i = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.entry k() { ret; }").kernels[0].body.statements[0]
>>> lookup(i).family, [r.value for _, r in operand_roles(i)]
('ret', [])
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from ptxtool.isa import caching
from ptxtool.isa.features import CONSTRUCTS, DIRECTIVES, FEATURES, OPERAND_FORMS, REMOVED, SPECIAL_REGISTERS
from ptxtool.isa.model import Access, Effect, Feature, InstructionInfo, Mode, Role
from ptxtool.isa.modifiers import MODIFIERS, TYPES
from ptxtool.isa.modifiers import unknown as _unknown
from ptxtool.isa.opcodes import OPCODES
from ptxtool.isa.targets import Need, Target, Version, version, version_text
from ptxtool.syntax import ast

__all__ = [
    "CONSTRUCTS",
    "caching",
    "DIRECTIVES",
    "MODIFIERS",
    "Access",
    "Effect",
    "Feature",
    "InstructionInfo",
    "Mode",
    "Need",
    "REMOVED",
    "Requirement",
    "Role",
    "Target",
    "TYPES",
    "WORST_CASE",
    "Version",
    "effects",
    "family",
    "find",
    "lookup",
    "memory_accesses",
    "operand_names",
    "operand_roles",
    "requirements",
    "satisfied",
    "state_spaces",
    "unknown_modifiers",
    "unmet_added",
    "version",
    "version_text",
]

STATE_SPACES = frozenset(
    ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "param::entry", "param::func")
    + ("const", "tex", "surf", "generic")
)


Instr = ast.Instruction | str


def _split(instr: Instr) -> tuple[str, tuple[str, ...]]:
    if isinstance(instr, ast.Instruction):
        return instr.opcode, instr.modifiers
    opcode, *mods = instr.split(".")
    return opcode, tuple(mods)


def family(instr: Instr) -> str | None:
    """The table row an instruction belongs to: the longest `opcode.mod...` prefix that names one."""
    return _family(*_split(instr), len(OPCODES))


# Analyses ask about each instruction many times and a file repeats few spellings: answers are cached per spelling
# and table size (a test that removes rows for a while gets answers of that table, and the old ones back after).
@lru_cache(4096)
def _family(opcode: str, mods: tuple[str, ...], _rows: int) -> str | None:
    for n in range(len(mods), -1, -1):
        key = ".".join((opcode, *mods[:n]))
        # a last modifier with a `::` qualifier may name its row without it: tcgen05.fence::before_thread_sync
        stem = ".".join((opcode, *mods[: n - 1], mods[n - 1].partition("::")[0])) if n else key
        for candidate in (key, stem):
            if candidate in OPCODES:
                return candidate
    return None


def find(instr: Instr) -> InstructionInfo | None:
    """The facts about an instruction (an Instruction node or a mnemonic such as `ld.global.v4.f32`), or None."""
    key = family(instr)
    return OPCODES[key] if key else None


# What an instruction the tables do not know (a newer PTX, a typo) is taken to do: anything but end its block.
# Every operand is read and written, every register operand may be an address it reads and writes, and it
# orders memory, waits, and is collective, so analyses and passes stay conservative around it; `parse --check`
# names it (find() is None).
WORST_CASE = Effect.BARRIER | Effect.FENCE | Effect.ATOMIC | Effect.ASYNC | Effect.COLLECTIVE | Effect.RESOURCE


def lookup(instr: Instr) -> InstructionInfo:
    """Like find(), but an opcode the tables do not know gets worst-case facts (WORST_CASE) instead of None."""
    info = find(instr)
    if info is None:
        opcode, _ = _split(instr)
        return InstructionInfo(opcode, (Role.DEF_USE,), WORST_CASE)
    return info


def _call_roles(operands: tuple[ast.Operand, ...]) -> list[tuple[ast.Operand, Role]]:
    """`call (rets), f, (args), proto`: returns defined, callee and arguments used, a prototype/targets label."""
    out: list[tuple[ast.Operand, Role]] = []
    rest = list(operands)
    if len(rest) > 1 and isinstance(rest[0], ast.ParenList):
        out.append((rest.pop(0), Role.DEF))
    if rest:
        out.append((rest.pop(0), Role.USE))
    if rest and isinstance(rest[0], ast.ParenList):
        out.append((rest.pop(0), Role.USE))
    out.extend((op, Role.TARGET) for op in rest)
    return out


def operand_roles(instr: ast.Instruction) -> list[tuple[ast.Operand, Role]]:
    """Each operand with what the instruction does with it (the guard predicate, always a use, is not listed)."""
    info = lookup(instr)
    if info.family == "call":
        return _call_roles(instr.operands)
    roles = info.roles
    if not roles:
        return [(op, Role.USE) for op in instr.operands]
    return [(op, roles[min(i, len(roles) - 1)]) for i, op in enumerate(instr.operands)]


def operand_names(operand: ast.Operand) -> Iterator[ast.Name]:
    """The names inside an operand that may be registers (labels and symbols included; sinks `_` excluded)."""
    if isinstance(operand, ast.Name):
        if operand.text != "_":
            yield operand
    elif isinstance(operand, ast.Not):
        yield operand.name
    elif isinstance(operand, ast.PredPair):
        yield from operand_names(operand.first)
        yield from operand_names(operand.second)
    elif isinstance(operand, ast.Vector | ast.ParenList):
        for item in operand.items:
            yield from operand_names(item)
    elif isinstance(operand, ast.Address):
        if isinstance(operand.base, ast.Name):
            yield operand.base
        for item in operand.rest:
            yield from operand_names(item)


def state_spaces(instr: ast.Instruction) -> tuple[str, ...]:
    """The state-space modifiers in written order (`cp.async.ca.shared.global` -> ("shared", "global"))."""
    return tuple(m for m in instr.modifiers if m in STATE_SPACES)


def memory_accesses(instr: ast.Instruction) -> list[tuple[ast.Operand, Mode, str]]:
    """The operands through which an instruction reads or writes memory, with the mode and the state space."""
    info = find(instr)
    if info is None:  # an unknown instruction: any register may be an address
        return [(op, Mode.READ_WRITE, "generic") for op in _address_like(instr.operands)]
    spaces = state_spaces(instr)
    out = []
    for access in info.accesses:
        if access.operand < len(instr.operands):
            space = spaces[access.slot] if access.slot < len(spaces) else (info.space if access.slot == 0 else None)
            out.append((instr.operands[access.operand], access.mode, space or "generic"))
    return out


def _address_like(operands: tuple[ast.Operand, ...]) -> Iterator[ast.Address]:
    """Each address operand, and each register operand as the address it may hold."""
    for op in operands:
        if isinstance(op, ast.Address):
            yield op
        else:
            yield from (ast.Address(name) for name in operand_names(op))


def effects(instr: ast.Instruction) -> Effect:
    """The family's side effects, plus COLLECTIVE for `.aligned` forms and FENCE for ordered/volatile accesses."""
    return _effects(instr.opcode, instr.modifiers, len(OPCODES))


@lru_cache(4096)
def _effects(opcode: str, mods: tuple[str, ...], rows: int) -> Effect:
    key = _family(opcode, mods, rows)
    out = OPCODES[key].effects if key else WORST_CASE  # lookup()'s worst case for an unknown opcode
    if "aligned" in mods:
        out |= Effect.COLLECTIVE
    if caching.ORDERING.intersection(mods):
        out |= Effect.FENCE
    return out


@dataclass(frozen=True, slots=True)
class Requirement:
    """A thing an instruction uses (`instruction 'wgmma.mma_async'`) and the Need alternatives that make it legal."""

    what: str
    needs: tuple[Need, ...]


_FEATURES_BY_FIRST: dict[str, list[Feature]] = {}
for _f in (*FEATURES, *caching.FEATURES):
    _FEATURES_BY_FIRST.setdefault(_f.name.split(".")[0], []).append(_f)


def _applies(feature: Feature, key: str) -> bool:
    return not feature.families or any(key == f or key.startswith(f + ".") for f in feature.families)


def requirements(instr: ast.Instruction) -> list[Requirement]:
    """Everything in an instruction with a minimum PTX version or target: the family, modifiers, special registers."""
    info = lookup(instr)
    out = [Requirement(f"instruction '{info.family}'", info.needs)]
    written = "." + ".".join(instr.modifiers) + "."
    out.extend(
        Requirement(f"'.{f.name}' on '{info.family}'", f.needs)
        for mod in dict.fromkeys(instr.modifiers)
        for f in _FEATURES_BY_FIRST.get(mod, ())
        if f".{f.name}." in written and _applies(f, info.family)
    )
    form = OPERAND_FORMS.get((info.family, len(instr.operands)))
    if form is not None:
        out.append(Requirement(f"'{info.family}' with {form.name}", form.needs))
    for op in instr.operands:
        for name in operand_names(op):
            sreg = SPECIAL_REGISTERS.get(name.text.split(".")[0])
            if sreg:
                out.append(Requirement(f"special register '{sreg.name}'", sreg.needs))
    return out


def unknown_modifiers(instr: ast.Instruction) -> list[str]:
    """The modifiers an instruction's family does not have at all (only families listed in MODIFIERS are checked)."""
    key = family(instr)
    return _unknown(key, instr.modifiers) if key else []


def satisfied(needs: tuple[Need, ...], ptx: Version, targets: tuple[Target, ...]) -> bool:
    """Whether a file with this `.version` and `.target` list may use a feature."""
    return any(n.ptx <= ptx and all(n.target_ok(t) for t in targets) for n in needs)


def unmet_added(
    module: ast.Module, before: ast.Instruction, after: ast.Instruction, arch: str | None = None
) -> Requirement | None:
    """A requirement that rewriting `before` into `after` adds and that the file's `.version`, its `.target` list
    or the target it is assembled for (`arch`) does not meet; None when the rewrite is legal there."""
    ptx = version(module.version or "") or (0, 0)
    targets = tuple(t for t in map(Target.parse, (*module.targets, *([arch] if arch else []))) if t is not None)
    old = {r.what for r in requirements(before)}
    return next((r for r in requirements(after) if r.what not in old and not satisfied(r.needs, ptx, targets)), None)

"""The producers' code: consumer threads' code before the loop, staging and tail replayed with %tid.x as the
consumer's, each of a producer thread's shares (P < N/32) in registers and labels of its own, in turn. How a trip is
staged and announced is a `Staging`: ld+st and an mbarrier arrival by default, cp.async (async_producers.py) else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ptxtool import isa
from ptxtool.analysis.staging import StagedLoop, dropped_by_producers
from ptxtool.passes.warp_roles.emit import (
    EMPTY,
    FULL,
    Forms,
    copied_label,
    mapped,
    relocated,
    renamed,
    slot_code,
    statements,
)
from ptxtool.syntax import ast

_COPIED = ("pre", "staging", "tail")  # the parts each share runs in turn; the others run once
ARRIVE = "mbarrier.arrive.{space}.b64 %wr_state, [%wr_bar];"  # on full[slot]: this thread's stores are done


@dataclass(frozen=True)
class Staging:
    """How producers stage a trip: `edit` replaces each staging instruction (renamed already; None: its shared
    accesses moved into the slot, so st.shared stays), `arrive` announces the trip on full[slot] (`%wr_bar`), `end`
    runs before the producers return; `{space}` in `arrive` is the file's spelling of the mbarrier's (Forms)."""

    edit: Callable[[int, ast.Instruction], tuple[ast.Statement, ...]] | None = None
    arrive: str = ARRIVE
    end: str = ""
    check: Callable[[int, ast.Instruction], tuple[ast.Statement, ...]] | None = None  # a first pass (bulk_producers)
    before: str = ""  # after the empty wait, before the `check` pass
    decide: str = ""  # after the `check` pass, before the staging pass


def _part(found: StagedLoop, index: int, label: bool) -> str:
    """The part of op `index` (or, `label`, of a label before it)."""
    lo, hi = found.staging.start, found.tail.stop
    if index < lo:
        return "pre"
    if index == lo and label:
        return "header"
    if index < found.filled:
        return "staging"
    if index == found.filled:
        return "filled"
    if index < found.released:
        return "compute"
    if index == found.released:
        return "released"
    return "tail" if index < hi else "post"


def body_units(function: ast.Function, found: StagedLoop) -> list[tuple[str, int, ast.Statement]] | str:
    """The body's top-level instructions, labels and nested scopes with their part and first op index; a reason
    when a nested `{ }` scope spans two parts or holds a label (its copies could not be kept apart)."""
    out: list[tuple[str, int, ast.Statement]] = []
    index = 0
    for s in function.body.statements:
        if isinstance(s, ast.Instruction):
            out.append((_part(found, index, False), index, s))
            index += 1
        elif isinstance(s, ast.Label):
            out.append((_part(found, index, True), index, s))
        elif isinstance(s, ast.Block):
            count = sum(1 for _ in ast.instructions(s))
            parts = {_part(found, k, False) for k in range(index, index + count)}
            if len(parts) > 1 or any(isinstance(x, ast.Label) for x in ast.walk(s)):
                return f"a nested {{ }} scope at line {s.line} spans the loop's parts or holds a label"
            out.append((parts.pop() if parts else "pre", index, s))
            index += count
    return out


def producer_refusal(function: ast.Function, found: StagedLoop, shares: int) -> str | None:
    """Why the producers cannot run `shares` consumer threads' parts in turn, or None. One producer thread keeps
    one register copy per share, but one local-memory frame: a share's local stores would clobber another's."""
    units = body_units(function, found)
    if isinstance(units, str):
        return units
    if shares == 1:
        return None
    for part, _, s in units:
        if part not in _COPIED:
            continue
        for i in ast.instructions(s) if isinstance(s, ast.Block) else (s,):
            if isinstance(i, ast.Instruction) and any(sp.startswith("local") for _, _, sp in isa.memory_accesses(i)):
                return f"the producers' code uses local memory at line {i.line}: {shares} shares would share one frame"
    return None


def share_name(name: str, share: int) -> str:
    """Share j's copy of a register (share 0 keeps the kernel's): %r5 -> %wr_s1_r5, and a name without `%` (valid
    PTX) r5 -> %wr_s1$r5, so that the copies of distinct names stay distinct."""
    if share == 0:
        return name
    return f"%wr_s{share}_{name[1:]}" if name.startswith("%") else f"%wr_s{share}${name}"


def _share_label(name: str, share: int, tag: str = "p") -> str:
    """Share j's copy of a label in the producers' code (`tag`: which pass over the part: p, or c for a check)."""
    return copied_label(tag if share == 0 else f"s{share}{tag}", name)


def substituted(node: object, names: Callable[[str], str | None]) -> object:
    """An operand with every Name that `names` maps replaced (in addresses, vectors, expressions too)."""
    if isinstance(node, ast.Name):
        new = names(node.text)
        return node if new is None else replace(node, text=new)
    if isinstance(node, tuple):
        return tuple(substituted(x, names) for x in node)
    if isinstance(node, ast.NODE_TYPES) and not isinstance(node, ast.Owner):
        changes = {f.name: substituted(getattr(node, f.name), names) for f in fields(node)}
        return replace(node, **changes)
    return node


def _copy(
    s: ast.Statement, share: int, part: str, names: Callable[[str, str, int, str], str | None], tag: str = "p"
) -> ast.Statement:
    """Statement `s` of `part` as share `share` runs it in pass `tag`: its registers and labels renamed."""
    rename = lambda text: names(text, part, share, tag)  # noqa: E731
    if isinstance(s, ast.Instruction):
        guard = s.guard and replace(s.guard, predicate=substituted(s.guard.predicate, rename))
        return replace(s, operands=substituted(s.operands, rename), guard=guard)
    if isinstance(s, ast.Label):
        return replace(s, name=_share_label(s.name, share, tag))
    if isinstance(s, ast.Declaration) and s.has(".reg"):
        return replace(s, declarators=tuple(replace(x, name=share_name(x.name, share)) for x in s.declarators))
    if isinstance(s, ast.Block):
        return replace(s, statements=tuple(_copy(x, share, part, names, tag) for x in s.statements))
    return s


def declared_registers(function: ast.Function) -> frozenset[str]:
    """Every register name the kernel declares (`%r<4>` as %r0..%r3)."""
    out: set[str] = set()
    for d in ast.walk(function.body):
        if isinstance(d, ast.Declaration) and d.has(".reg"):
            for x in d.declarators:
                count = int(x.count.value) if x.count is not None else None
                out.update([x.name] if count is None else (f"{x.name}{k}" for k in range(count)))
    return frozenset(out)


def producer_code(
    function: ast.Function,
    found: StagedLoop,
    shares: int,
    stages: int,
    stage_bytes: int,
    forms: Forms,
    ring_names: dict[str, ast.Operand],
    wide: Callable[[str], bool],
    staging: Staging = Staging(),
) -> list[ast.Statement]:
    """The producers' code after `$__wr_producer`: consumer threads %wr_vtid + (N / shares)·j for j < shares,
    replayed in turn per part (their code before the loop, then per trip their staging, then their tail), each
    share in registers of its own; the waits, the arrival and the trip count once per trip; `staging.end` last."""
    units = body_units(function, found)
    assert not isinstance(units, str), units  # producer_refusal said so first
    lo = found.staging.start
    replayed = {**ring_names, "%tid.x": ast.Name("%wr_vtid")}
    registers = declared_registers(function) | {"%wr_vtid"}
    label_part = {s.name: part for part, _, s in units if isinstance(s, ast.Label)}

    def edit(index: int, i: ast.Instruction, checking: bool = False) -> tuple[ast.Statement, ...]:
        i = renamed(i, replayed)
        if index in found.staging and checking and staging.check is not None:
            return staging.check(index, i)
        if index in found.staging and staging.edit is not None:
            return staging.edit(index, i)
        if index in found.staging and any(s.startswith("shared") for _, _, s in isa.memory_accesses(i)):
            return relocated(i, wide)
        if index < lo and dropped_by_producers(i):
            return ()
        return (i,)

    def names(text: str, part: str, share: int, tag: str) -> str | None:
        if text in registers:
            return share_name(text, share)
        target = label_part.get(text)
        if target is None:
            return None
        if target == part or share == shares - 1 or (part == "pre" and target == "post"):
            if tag != "p" and target != part:  # a check pass never leaves its part: the staging pass follows it
                return f"$__wr_{tag}{part}{shares}"
            return _share_label(text, share if target == part else 0, tag)
        return f"$__wr_{tag if tag != 'p' else ''}{part}{share + 1}"  # the next share's copy of this part

    def edited(part: str, checking: bool = False) -> list[ast.Statement]:
        out: list[ast.Statement] = []
        step = lambda index, i: edit(index, i, checking)  # noqa: E731
        for p, index, s in units:
            if p != part:
                continue
            if isinstance(s, ast.Instruction):
                out.extend(step(index, s))
            elif isinstance(s, ast.Block):
                out.append(mapped(s, step, {}, start=index))
            else:
                out.append(s)
        return out

    def copies(part: str, tag: str = "p") -> list[ast.Statement]:
        code = edited(part, tag != "p")
        out: list[ast.Statement] = []
        prefix = "" if tag == "p" else tag
        for share in range(shares):
            out += statements(f"$__wr_{prefix}{part}{share}:") if share else ()
            out += [_copy(s, share, part, names, tag) for s in code]
        return [*out, *(statements(f"$__wr_{prefix}{part}{shares}:") if tag != "p" else ())]

    def once(part: str) -> list[ast.Statement]:
        return [_copy(s, 0, part, names) for s in edited(part) if isinstance(s, ast.Label)]

    wait = (
        slot_code(stages, stage_bytes, EMPTY)
        + "\nxor.b32 %wr_eph, %wr_ph, 1;\n"
        + forms.wait_code("$__wr_empty_wait", "%wr_eph")
    )
    full = f"mov.u32 %wr_bar, {FULL};\nmad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;"
    arrive = f"{full}\n{staging.arrive.format(space=forms.space)}\nadd.u32 %wr_k, %wr_k, 1;"
    return [
        *copies("pre"),
        *once("header"),
        *statements(wait),
        *(statements(staging.before, forms.target) if staging.before else ()),
        *(copies("staging", "c") if staging.check is not None else ()),
        *(statements(staging.decide, forms.target) if staging.decide else ()),
        *copies("staging"),
        *once("filled"),
        *statements(arrive),
        *copies("tail"),
        *once("post"),
        *(statements(staging.end, forms.target) if staging.end else ()),
    ]

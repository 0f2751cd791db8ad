"""Staging stores turned into `cp.async`: a `st.shared` of a value only an `ld.global` of the same bytes gave it
becomes a copy from the load's address into the ring slot, so one thread issues a trip's copies without waiting
for each load. nvcc's bounds-checked staging (the value is the load or an all-zero value) becomes a copy whose
src-size is 0 on the zero path: cp.async fills the bytes it does not read with zeros (PTX ISA, cp.async).

cp.asyncs are not ordered with each other nor with plain stores, so the conversion is refused unless every shared
write of the staging part converts and the converted stores of one trip write disjoint bytes in each thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, DefUse
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import Loop
from ptxtool.analysis.staging import SharedBuffer, StagedLoop
from ptxtool.isa.caching import access_bytes
from ptxtool.syntax import ast

CP_ASYNC_BYTES = (4, 8, 16)  # cp.async.ca copies 4, 8 or 16 bytes, .cg only 16 (PTX ISA, cp.async)
_ORDERED = frozenset(("volatile", "relaxed", "acquire", "release", "mmio"))  # a cp.async would not keep these


@dataclass(frozen=True)
class AsyncCopy:
    """Copy `number`: the load and the store it joins, the size, and how the zero path is chosen: `zeros` are the
    other definitions of the stored register that reach the store (each all-zero bits), `select` a selp between
    the loaded register and zero (with `loaded_first`: the load is selp's first choice)."""

    number: int
    load: int
    store: int
    size: int
    zeros: tuple[int, ...] = ()
    select: int | None = None

    @property
    def source(self) -> str:
        return f"%wr_src{self.number}"

    @property
    def flag(self) -> str:
        """True where this trip's path copies the loaded bytes, false where it stores zeros."""
        return f"%wr_cp{self.number}"

    @property
    def zero_fill(self) -> bool:
        return bool(self.zeros) or self.select is not None


@dataclass(frozen=True)
class _Place:
    """Where a converted store writes, before the ring moves it: the buffer, the base register (None: the
    buffer's symbol itself) with its reaching definitions, the constant offset and the size."""

    buffer: str
    base: str | None
    defs: frozenset[int]
    offset: int
    size: int


def zero_bits(operand: ast.Operand) -> bool:
    """Whether an immediate's bits are all zero (0, 0f00000000, 0d0000000000000000; not -0.0)."""
    if not isinstance(operand, ast.Immediate):
        return False
    text = operand.text.lower()
    if text[:2] in ("0f", "0d"):
        return int(text[2:], 16) == 0
    try:
        value = ast.literal_value(operand.text)
    except ValueError:
        return False
    return value == 0 and not str(value).startswith("-")


def _space(i: ast.Instruction) -> str | None:
    return next((s for _, _, s in isa.memory_accesses(i)), None)


class _Converter:
    """The proofs, per staging store; each method returns its finding or a reason (a str)."""

    def __init__(self, cfg: CFG, du: DefUse, loops: tuple[Loop, ...], found: StagedLoop) -> None:
        self.cfg, self.du, self.loops, self.found = cfg, du, loops, found
        self.ops = cfg.linear.ops
        self.names = {r.key: r.name for r in cfg.linear.registers.values()}

    def key(self, op: Op, name: str) -> str | None:
        return next((k for k in op.uses if self.names[k] == name), None)

    def in_inner_loop(self, index: int) -> bool:
        block = self.cfg.block_of[index]
        return any(loop.index != self.found.loop.index and block in loop.blocks for loop in self.loops)

    def zero(self, at: int, key: str, seen: set[int]) -> bool:
        """Whether definition `at` of register `key` gives all-zero bits (a mov of zero, or of a register whose
        every reaching definition does)."""
        if at in seen:
            return True
        seen.add(at)
        i = self.ops[at].instruction
        if isa.family(i) != "mov" or len(i.operands) != 2 or isa.memory_accesses(i):
            return False
        value = i.operands[1]
        if zero_bits(value):
            return True
        if not isinstance(value, ast.Name) or (inner := self.key(self.ops[at], value.text)) is None:
            return False
        defs = self.du.defs_of.get((at, inner), ())
        return bool(defs) and ENTRY not in defs and all(self.zero(d, inner, seen) for d in defs)

    def load(self, at: int, key: str, size: int) -> ast.Instruction | str:
        """The `ld.global` at `at` if a cp.async can read what it reads: weak, scalar, `size` bytes, a 64-bit
        address, its value read by one instruction only."""
        i = self.ops[at].instruction
        target = i.operands[0] if i.operands else None
        address = i.operands[1] if len(i.operands) == 2 else None
        line = self.ops[at].line
        if isa.family(i) != "ld" or _space(i) != "global" or not isinstance(target, ast.Name):
            return f"the value stored comes from {i.mnemonic} at line {line}, not only from a global load"
        if set(i.modifiers) & _ORDERED:
            return f"{i.mnemonic} at line {line} is ordered: a cp.async would not keep its order"
        if access_bytes(i) != size or size not in CP_ASYNC_BYTES:
            return f"{i.mnemonic} at line {line} reads {access_bytes(i)} bytes; cp.async copies 4, 8 or 16"
        if not isinstance(address, ast.Address):
            return f"{i.mnemonic} at line {line} has no address operand"
        if isinstance(address.base, ast.Name) and address.base.text.startswith("%"):
            register = next((r for r in self.cfg.linear.registers.values() if r.name == address.base.text), None)
            if register is None or not register.type.endswith("64"):
                return f"{i.mnemonic} at line {line} reads through a 32-bit address; cp.async takes a 64-bit one"
        if self.du.uses_of.get((at, key)) is None or len(self.du.uses_of[(at, key)]) != 1:
            return f"the value {i.mnemonic} loads at line {line} is read elsewhere than by the store"
        if self.in_inner_loop(at):
            return f"{i.mnemonic} at line {line} runs more than once per trip (an inner loop)"
        return i

    def copy(self, number: int, store_at: int, buffers: dict[str, SharedBuffer]) -> AsyncCopy | str:
        """The cp.async that does staging store `store_at`, or why none does."""
        op = self.ops[store_at]
        store, line = op.instruction, op.line
        data = store.operands[-1] if len(store.operands) == 2 else None
        size = access_bytes(store)
        if isa.family(store) != "st" or _space(store) != "shared" or store.guard is not None:
            return f"{store.mnemonic} at line {line} writes shared memory and is not a plain unguarded st.shared"
        if set(store.modifiers) & _ORDERED or not isinstance(data, ast.Name) or size not in CP_ASYNC_BYTES:
            return f"{store.mnemonic} at line {line} is not a weak scalar store of 4, 8 or 16 bytes"
        if self.in_inner_loop(store_at):
            return f"{store.mnemonic} at line {line} runs more than once per trip (an inner loop): bytes may repeat"
        key = self.key(op, data.text)
        defs = self.du.defs_of.get((store_at, key), ()) if key else ()
        if not defs or ENTRY in defs or any(d not in self.found.staging for d in defs):
            return f"the value {store.mnemonic} stores at line {line} is not defined in the staging part alone"
        loads = [d for d in defs if isa.memory_accesses(self.ops[d].instruction)]
        if len(loads) == 1:
            if isinstance(why := self.load(loads[0], key, size), str):
                return why
            zeros = tuple(d for d in defs if d != loads[0])
            if not all(self.zero(d, key, set()) for d in zeros):
                return f"the value {store.mnemonic} stores at line {line} is the load or a value other than zero"
            return AsyncCopy(number, loads[0], store_at, size, zeros)
        if len(defs) == 1 and isa.family(chosen := self.ops[defs[0]].instruction) == "selp":
            return self.selected(number, store_at, defs[0], chosen, size)
        return f"the value {store.mnemonic} stores at line {line} is not only loaded from global memory"

    def selected(self, number: int, store_at: int, at: int, selp: ast.Instruction, size: int) -> AsyncCopy | str:
        """`selp %v, %loaded, 0, %p` (or `0, %loaded`): the copy reads where the load is chosen."""
        line = self.ops[at].line
        if len(selp.operands) != 4 or selp.guard is not None:
            return f"{selp.mnemonic} at line {line} is not a plain selp"
        uses = self.du.uses_of.get((at, self.key_def(at, selp.operands[0])), ())
        if tuple(uses) != (store_at,):
            return f"the value {selp.mnemonic} selects at line {line} is read elsewhere than by the store"
        for loaded, other in ((1, 2), (2, 1)):
            name, zero = selp.operands[loaded], selp.operands[other]
            key = self.key(self.ops[at], name.text) if isinstance(name, ast.Name) else None
            defs = self.du.defs_of.get((at, key), ()) if key else ()
            if len(defs) != 1 or defs[0] == ENTRY or not isa.memory_accesses(self.ops[defs[0]].instruction):
                continue
            if not zero_bits(zero):
                return f"{selp.mnemonic} at line {line} selects between the load and a value other than zero"
            if defs[0] not in self.found.staging:
                return f"the load {selp.mnemonic} selects at line {line} is outside the staging part"
            if isinstance(why := self.load(defs[0], key, size), str):
                return why
            return AsyncCopy(number, defs[0], store_at, size, select=at)
        return f"{selp.mnemonic} at line {line} selects no global load"

    def key_def(self, at: int, operand: ast.Operand) -> str | None:
        name = operand.text if isinstance(operand, ast.Name) else None
        return next((k for k in self.ops[at].defs if self.names[k] == name), None)

    def place(self, copy: AsyncCopy, buffers: dict[str, SharedBuffer]) -> _Place | str:
        """Which buffer the store writes (the one symbol its address is computed from), its base and offset."""
        op = self.ops[copy.store]
        address = op.instruction.operands[0]
        assert isinstance(address, ast.Address)
        offset = int(ast.constant_value(address.offset)) * (1 if address.plus else -1) if address.offset else 0
        base = address.base.text if isinstance(address.base, ast.Name) else ""
        if base in buffers:
            return _Place(base, None, frozenset(), offset, copy.size)
        key = self.key(op, base)
        if key is None:
            return f"the address of the store at line {op.line} is not a register or a shared buffer"
        symbols = self.symbols(copy.store, key, buffers)
        if len(symbols) != 1:
            return f"the store at line {op.line} writes an address computed from {len(symbols)} shared buffers"
        defs = frozenset(self.du.defs_of.get((copy.store, key), ()))
        return _Place(symbols.pop(), base, defs, offset, copy.size)

    def symbols(self, at: int, key: str, buffers: dict[str, SharedBuffer]) -> set[str]:
        """The shared buffers whose addresses register `key` (as op `at` reads it) is computed from."""
        out: set[str] = set()
        work, seen = [(at, key)], set()
        while work:
            where, register = work.pop()
            for d in self.du.defs_of.get((where, register), ()):
                if d == ENTRY or (d, register) in seen:
                    continue
                seen.add((d, register))
                source = self.ops[d]
                for operand in source.instruction.operands:
                    out |= {n.text for n in isa.operand_names(operand) if n.text in buffers}
                work.extend((d, u) for u in source.uses)
        return out

    def stable(self, place: _Place, stores: tuple[int, int]) -> bool:
        """Whether the base register holds one value at both stores: its definitions reaching them are the same
        and each lies before both, outside inner loops, or outside the staging part (run once per trip at most,
        never between the two)."""
        staging = self.found.staging
        return all(d < 0 or d not in staging or (d < min(stores) and not self.in_inner_loop(d)) for d in place.defs)


def async_copies(
    cfg: CFG, du: DefUse, loops: tuple[Loop, ...], found: StagedLoop
) -> tuple[AsyncCopy, ...] | tuple[int, str]:
    """A cp.async for every shared write of the staging part, or (line, why not): each converts, each buffer's
    alignment covers its copy's size, and the stores of one trip write disjoint bytes in each thread."""
    converter = _Converter(cfg, du, loops, found)
    buffers = {b.name: b for b in found.buffers}
    out: list[AsyncCopy] = []
    places: list[_Place] = []
    for at in found.stores:
        line = cfg.linear.ops[at].line
        copy = converter.copy(len(out), at, buffers)
        if isinstance(copy, str):
            return line, copy
        place = converter.place(copy, buffers)
        if isinstance(place, str):
            return line, place
        # ld/st addresses are aligned to their size (PTX ISA); in the ring the buffer keeps min(.align, 16)
        if copy.size > min(16, buffers[place.buffer].align):
            return line, (
                f"{place.buffer} is aligned to {buffers[place.buffer].align} bytes: a {copy.size}-byte cp.async into "
                "the ring slot is not proven aligned"
            )
        for other, seen in zip(out, places, strict=True):
            if seen.buffer != place.buffer:
                continue  # PTX fixes no layout between variables: an access from one never reaches another
            same = seen.base == place.base and seen.defs == place.defs
            if not (same and (place.base is None or converter.stable(place, (other.store, at)))):
                return line, (
                    f"cannot prove the staging stores at lines {cfg.linear.ops[other.store].line} and {line} write "
                    f"disjoint bytes of {place.buffer} (cp.asyncs are not ordered with each other)"
                )
            if seen.offset < place.offset + place.size and place.offset < seen.offset + seen.size:
                return line, (
                    f"the staging stores at lines {cfg.linear.ops[other.store].line} and {line} write the same bytes "
                    "of one trip: cp.asyncs are not ordered with each other"
                )
        out.append(copy)
        places.append(place)
    return tuple(out)

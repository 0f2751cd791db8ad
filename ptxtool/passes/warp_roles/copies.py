"""Staging stores turned into `cp.async`: a `st.shared` of a value only an `ld.global` of the same bytes gave it
becomes a copy from the load's address into the ring slot, so one thread issues a trip's copies without waiting
for each load. nvcc's bounds-checked staging (the value is the load or an all-zero value) becomes a copy whose
src-size is 0 on the zero path: cp.async fills the bytes it does not read with zeros (PTX ISA, cp.async).

cp.asyncs are not ordered with each other nor with plain stores, so the conversion is refused unless every shared
write of the staging part converts and the converted stores of one trip write disjoint bytes in each thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import ENTRY, DefUse, def_use
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import Loop, find_loops
from ptxtool.analysis.staging import SharedBuffer, StagedLoop
from ptxtool.isa.caching import access_bytes
from ptxtool.isa.integer import integer_form, wrapped
from ptxtool.isa.targets import MAX_BLOCK_THREADS
from ptxtool.passes.warp_roles.fills import FillTrace, Refused, Write, address_bits, postdominators
from ptxtool.passes.warp_roles.memo import memoized
from ptxtool.passes.warp_roles.thread_values import Value, carried_symbol
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
    looped: bool = False  # in a fill loop: issued once per inner trip

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


_FIXED_SPECIALS = frozenset(("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid"))  # the same all the thread's life
_Values = tuple[str | None, tuple[int, ...]]  # a shared buffer's symbol (or None) plus one integer per thread


class _Converter:
    """The proofs, per staging store; each method returns its finding or a reason (a str)."""

    def __init__(self, cfg: CFG, du: DefUse, loops: tuple[Loop, ...], found: StagedLoop) -> None:
        self.cfg, self.du, self.loops, self.found = cfg, du, loops, found
        self.ops = cfg.linear.ops
        self.names = {r.key: r.name for r in cfg.linear.registers.values()}
        self.buffer_names = {b.name for b in found.buffers}
        self.threads = found.tid_x or MAX_BLOCK_THREADS  # the values %tid.x may take (launch_bounds.tid_limits)
        self.evaluated: dict[int, tuple[Value, ...] | None] = {}
        self.memo: dict[int, _Values | None] = {}
        self.shapes: dict[int, tuple[int, int] | None] = {}
        self.shape_ids: dict[tuple[str | None, tuple[int, ...]], int] = {}
        self.traced = False  # fills.py proved where each thread's stores write, trip after trip: inner loops pass

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

    def deciding_branch(self, store_at: int) -> int | None:
        """The line of a branch of the staging part that decides whether the store runs and may go another way on
        another trip; None when every such branch is trip-invariant, so that each thread runs the store on every
        trip or on none (a byte it skips is one it never writes in the loop: it holds what it holds in the input).
        The branches that decide are the store's control-dependence ancestors in the staging part (the barrier
        its exit): a block runs iff one of its control parents runs and goes its way."""
        cfg = self.cfg
        pdom = postdominators(cfg, self.found)
        region = set(pdom)
        succ = {b: [x for x in cfg.blocks[b].successors if x in region] for b in region}
        parents: dict[int, set[int]] = {b: set() for b in region}
        for x in region:
            if len(succ[x]) > 1:
                for y in succ[x]:
                    for z in pdom[y]:
                        if z == x or z not in pdom[x]:
                            parents[z].add(x)
        seen, work = set(), [cfg.block_of[store_at]]
        while work:
            for x in parents[work.pop()] - seen:
                seen.add(x)
                work.append(x)
                last = cfg.linear.ops[cfg.blocks[x].end - 1]
                i = last.instruction
                key = self.key(last, i.guard.predicate.text) if i.guard is not None else None
                invariant = key is not None and self.trip_invariant(last.index, key, {})
                if i.opcode != "bra" or not invariant or self.in_inner_loop(last.index):
                    return last.line
        return None

    def trip_invariant(self, at: int, key: str, memo: dict[int, bool]) -> bool:
        """Whether register `key`, as op `at` reads it, holds the same value on every trip in each thread: set before
        the loop, or computed in it, by pure unguarded ops, from such registers, constants, symbols and the
        thread's and block's fixed indices alone (a loop-carried definition is a cycle: not invariant)."""
        loop = range(self.found.staging.start, self.found.tail.stop)
        for d in self.du.defs_of.get((at, key), ()):
            if d == ENTRY or d not in loop:
                continue
            if d in memo:
                if not memo[d]:
                    return False
                continue
            memo[d] = False  # in progress: a cycle through the loop is not invariant
            op = self.ops[d]
            i = op.instruction
            if op.guarded or isa.memory_accesses(i) or isa.effects(i) or len(op.defs) != 1:
                return False
            for operand in i.operands[1:]:
                for n in isa.operand_names(operand):
                    special = n.text.startswith("%") and self.key(op, n.text) is None
                    if special and n.text.partition(".")[0] not in _FIXED_SPECIALS:
                        return False
            if not all(self.trip_invariant(d, u, memo) for u in op.uses):
                return False
            memo[d] = True
        return True

    def load(self, at: int, key: str, size: int) -> ast.Instruction | str:
        """The `ld.global` at `at` if a cp.async can read what it reads: weak, scalar, `size` bytes, a 64-bit
        address, its value read by one instruction only."""
        i = self.ops[at].instruction
        target = i.operands[0] if i.operands else None
        address = i.operands[1] if len(i.operands) == 2 else None
        line = self.ops[at].line
        if isa.family(i) != "ld" or _space(i) != "global" or not isinstance(target, ast.Name | ast.Vector):
            return f"the value stored comes from {i.mnemonic} at line {line}, not only from a global load"
        if set(i.modifiers) & _ORDERED:
            return f"{i.mnemonic} at line {line} is ordered: a cp.async would not keep its order"
        if access_bytes(i) != size or size not in CP_ASYNC_BYTES:
            return f"{i.mnemonic} at line {line} reads {access_bytes(i)} bytes; cp.async copies 4, 8 or 16"
        if not isinstance(address, ast.Address):
            return f"{i.mnemonic} at line {line} has no address operand"
        base = address.base.text if isinstance(address.base, ast.Name) else ""
        register = next((r for r in self.cfg.linear.registers.values() if r.name == base), None)
        if register is not None or base.startswith("%"):  # a register (`rd5` too), not a global variable
            if register is None or not register.type.endswith("64"):
                return f"{i.mnemonic} at line {line} reads through a 32-bit address; cp.async takes a 64-bit one"
        if self.du.uses_of.get((at, key)) is None or len(self.du.uses_of[(at, key)]) != 1:
            return f"the value {i.mnemonic} loads at line {line} is read elsewhere than by the store"
        if self.in_inner_loop(at) and not self.traced:
            return f"{i.mnemonic} at line {line} runs more than once per trip (an inner loop)"
        return i

    def copy(self, number: int, store_at: int, buffers: dict[str, SharedBuffer]) -> AsyncCopy | str:
        """The cp.async that does staging store `store_at`, or why none does."""
        op = self.ops[store_at]
        store, line = op.instruction, op.line
        data = store.operands[-1] if len(store.operands) == 2 else None
        size = access_bytes(store)
        if isa.family(store) != "st" or _space(store) not in ("shared", "shared::cta") or store.guard is not None:
            return f"{store.mnemonic} at line {line} writes shared memory and is not a plain unguarded st.shared"
        if set(store.modifiers) & _ORDERED or not isinstance(data, ast.Name | ast.Vector) or size not in CP_ASYNC_BYTES:
            return f"{store.mnemonic} at line {line} is not a weak scalar store of 4, 8 or 16 bytes"
        if not self.traced and (why := self.every_trip(store_at)) is not None:
            return why
        if isinstance(data, ast.Vector):
            return self.vector(number, store_at, data, size)
        key = self.key(op, data.text)
        defs = self.du.defs_of.get((store_at, key), ()) if key else ()
        if not defs or ENTRY in defs or any(d not in self.found.staging for d in defs):
            return f"the value {store.mnemonic} stores at line {line} is not defined in the staging part alone"
        loads = [d for d in defs if isa.memory_accesses(self.ops[d].instruction)]
        if len(loads) == 1:
            if isinstance(why := self.load(loads[0], key, size), str):
                return why
            zeros = tuple(d for d in defs if d != loads[0])
            if self.ops[loads[0]].instruction.guard is not None and not zeros:
                return f"the value {store.mnemonic} stores at line {line} is loaded on some paths only"
            if not all(self.zero(d, key, set()) for d in zeros):
                return f"the value {store.mnemonic} stores at line {line} is the load or a value other than zero"
            return AsyncCopy(number, loads[0], store_at, size, zeros, looped=self.in_inner_loop(store_at))
        if len(defs) == 1 and isa.family(chosen := self.ops[defs[0]].instruction) == "selp":
            return self.selected(number, store_at, defs[0], chosen, size)
        return f"the value {store.mnemonic} stores at line {line} is not only loaded from global memory"

    def every_trip(self, store_at: int) -> str | None:
        """Why the store outside fill loops may write other bytes on another trip (skipped by a trip-dependent
        branch, or at an address that changes), or None."""
        op = self.ops[store_at]
        store, line = op.instruction, op.line
        if self.in_inner_loop(store_at):
            return f"{store.mnemonic} at line {line} runs more than once per trip (an inner loop): bytes may repeat"
        if not self.cfg.dominates(self.cfg.block_of[store_at], self.cfg.block_of[self.found.filled]):
            if (branch := self.deciding_branch(store_at)) is not None:
                return (
                    f"{store.mnemonic} at line {line} is skipped on some paths of a trip, decided by a branch at line "
                    f"{branch} that may go another way on another trip: a byte it skips would hold the value of S "
                    "trips before, not of the trip before"
                )
        if not self.invariant(store_at):
            return (
                f"{store.mnemonic} at line {line} writes an address that may change from trip to trip: a byte one "
                "trip skips would hold the value of S trips before"
            )
        return None

    def trace(self) -> FillTrace:
        """fills.py's run of the staging part, thread after thread, with what this converter knows of live-ins."""
        bounds = block_bounds(self.cfg.function)
        ntid = bounds.dims[0] if bounds is not None and bounds.exact else None

        def key(at: int, name: str) -> str | None:
            return self.key(self.ops[at], name)

        def key_def(at: int, name: str) -> str | None:
            return self.key_def(at, ast.Name(name))

        return FillTrace(self.cfg, self.found, self.value, key, key_def, ntid)

    def fill_refusal(self, disjoint: bool = True) -> tuple[int, str] | None:
        """(line, why) where fills.py cannot tell each thread's writes of a trip, or (`disjoint`) two of one thread's
        overlap (cp.asyncs are not ordered with each other); None: every thread's writes are known, the same on
        every trip, and (`disjoint`) disjoint."""
        trace = self.trace()
        for tid in range(self.threads):
            try:
                writes = trace.writes(tid)
            except Refused as refused:
                return refused.line, refused.why
            if disjoint and (pair := _overlapping(writes)) is not None:
                first, second = (self.ops[w.store].line for w in pair)
                which = (
                    f"store at line {first} writes"
                    if first == second
                    else f"stores at lines {first} and {second} write"
                )
                return second, (
                    f"the staging {which} the same bytes of {pair[0].buffer} twice in thread {tid} of one "
                    "trip: cp.asyncs are not ordered with each other"
                )
        return None

    def vector(self, number: int, store_at: int, data: ast.Vector, size: int) -> AsyncCopy | str:
        """`st.shared.v4 [s], {%f1, ..}` of exactly the registers one unguarded vector load defined, in order (no
        zero-fill: its elements could come from different paths)."""
        op = self.ops[store_at]
        names = [x.text if isinstance(x, ast.Name) else "" for x in data.items]
        keys = [k for n in names if (k := self.key(op, n)) is not None]
        defs = {d for k in keys for d in self.du.defs_of.get((store_at, k), ())}
        why = f"the vector {op.instruction.mnemonic} at line {op.line} stores other than one vector load's registers"
        if len(keys) != len(set(names)) or len(keys) != len(names) or len(defs) != 1:
            return why
        at = defs.pop()
        if at not in self.found.staging:
            return why
        load = self.ops[at].instruction
        target = load.operands[0] if load.operands else None
        if not isinstance(target, ast.Vector) or [x.text for x in target.items if isinstance(x, ast.Name)] != names:
            return why
        if load.guard is not None:
            return f"{load.mnemonic} at line {self.ops[at].line} is guarded: a vector copy has no zero-fill path"
        for key in keys:
            if isinstance(found := self.load(at, key, size), str):
                return found
        return AsyncCopy(number, at, store_at, size, looped=self.in_inner_loop(store_at))

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
            return AsyncCopy(number, defs[0], store_at, size, select=at, looped=self.in_inner_loop(store_at))
        return f"{selp.mnemonic} at line {line} selects no global load"

    def key_def(self, at: int, operand: ast.Operand) -> str | None:
        name = operand.text if isinstance(operand, ast.Name) else None
        return next((k for k in self.ops[at].defs if self.names[k] == name), None)

    def place(self, copy: AsyncCopy, buffers: dict[str, SharedBuffer]) -> _Place | str:
        """Which buffer the store writes (the one symbol its address is computed from), its base and offset."""
        op = self.ops[copy.store]
        address = op.instruction.operands[0]
        assert isinstance(address, ast.Address)
        offset = ast.displacement(address)
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

    def value(self, at: int, operand: ast.Operand) -> _Values | None:
        """What `operand` of op `at` holds in each thread (%tid.x = 0, 1, ...), computed from %tid.x, constants and
        shared buffers' addresses alone through one reaching definition each; None where it depends on anything else."""
        fixed = self.fixed(operand)
        if fixed is not None or (source := self.source(at, operand)) is None:
            return fixed
        return self.defined(source)

    def fixed(self, operand: ast.Operand) -> _Values | None:
        """An immediate's, `%tid.x`'s or a buffer's value in each thread (None: another operand)."""
        if isinstance(operand, ast.Immediate):
            try:
                number = ast.literal_value(operand.text)
            except ValueError:
                return None
            return (None, (number,) * self.threads) if isinstance(number, int) else None
        if not isinstance(operand, ast.Name):
            return None
        if operand.text == "%tid.x":
            return None, tuple(range(self.threads))
        if operand.text in self.buffer_names:
            return operand.text, (0,) * self.threads
        return None

    def source(self, at: int, operand: ast.Operand) -> int | None:
        """The one definition a register operand of op `at` reads (None: not a register, or not one definition)."""
        if not isinstance(operand, ast.Name) or (key := self.key(self.ops[at], operand.text)) is None:
            return None
        defs = self.du.defs_of.get((at, key), ())
        return defs[0] if len(defs) == 1 and defs[0] != ENTRY else None

    def defined(self, at: int) -> _Values | None:
        """The value definition `at` gives in every thread, evaluated once for all threads (memoized per op), its
        sources first."""
        return memoized(at, self.memo, self.sources, self.computed)

    def sources(self, at: int) -> list[int] | None:
        """The definitions op `at` reads, where it is a definition `computed` evaluates (None: it is not)."""
        op = self.ops[at]
        if op.guarded or len(op.defs) != 1 or integer_form(op.instruction) is None:
            return None  # only what isa.integer describes exactly
        return [d for x in op.instruction.operands[1:] if (d := self.source(at, x)) is not None]

    def computed(self, at: int) -> _Values | None:
        """Definition `at` evaluated from its operands' memoized values."""
        i = self.ops[at].instruction
        form = integer_form(i)
        assert form is not None
        args = [self.fixed(x) if (d := self.source(at, x)) is None else self.memo.get(d) for x in i.operands[1:]]
        if any(a is None for a in args):
            return None
        known, symbol = carried_symbol(form, [a[0] for a in args])  # type: ignore[index]
        if not known:
            return None
        results = [form.result(list(xs)) for xs in zip(*(a[1] for a in args), strict=True)]  # type: ignore[index]
        if any(r is None for r in results):
            return None
        return symbol, tuple(results)  # type: ignore[return-value]

    def addresses(self, at: int) -> tuple[Value, ...] | None:
        """The address the store at `at` writes in each thread, %tid.x = 0, 1, ...: a function of %tid.x, constants
        and a buffer's address alone, evaluated through its definitions, as an offset into the buffer modulo the
        address's width (None where it is not one, or where some thread's bytes wrap around the address space's end)."""
        if at not in self.evaluated:
            i = self.ops[at].instruction
            address = i.operands[0]
            assert isinstance(address, ast.Address)
            extra = ast.displacement(address)
            base = self.value(at, address.base)
            key = self.key(self.ops[at], address.base.text) if isinstance(address.base, ast.Name) else None
            if base is None:
                self.evaluated[at] = None
            else:
                offsets = [wrapped(v + extra, address_bits(self.cfg, key), access_bytes(i)) for v in base[1]]
                self.evaluated[at] = None if None in offsets else tuple((base[0], v) for v in offsets)  # type: ignore[misc]
        return self.evaluated[at]

    def shape(self, at: int) -> tuple[int, int] | None:
        """The store's addresses as (shape, first address): stores of one shape differ by one constant in every
        thread (tile + 4t and tile + 4t + 64), so one comparison decides a pair of them."""
        if at not in self.shapes:
            found = self.addresses(at)
            if found is None or len({symbol for symbol, _ in found}) != 1:
                self.shapes[at] = None
            else:
                first = found[0][1]
                key = (found[0][0], tuple(v - first for _, v in found))
                self.shapes[at] = (self.shape_ids.setdefault(key, len(self.shape_ids)), first)
        return self.shapes[at]

    def enumerated(self, stores: tuple[int, int], sizes: tuple[int, int]) -> bool:
        """Whether two stores write disjoint bytes in every thread of the block, address by address."""
        (na, nb) = sizes
        shapes = [self.shape(at) for at in stores]
        if shapes[0] is not None and shapes[1] is not None and shapes[0][0] == shapes[1][0]:
            a, b = shapes[0][1], shapes[1][1]
            return not (a < b + nb and b < a + na)
        first, second = (self.addresses(at) for at in stores)
        if first is None or second is None:
            return False
        return all(sa == sb and not (a < b + nb and b < a + na) for (sa, a), (sb, b) in zip(first, second, strict=True))

    def invariant(self, at: int) -> bool:
        """Whether the store at `at` writes the same address on every trip: computed from %tid.x, constants and
        buffers' addresses alone, or from registers defined before the loop only."""
        address = self.ops[at].instruction.operands[0]
        assert isinstance(address, ast.Address)
        if self.addresses(at) is not None:
            return True
        base = address.base.text if isinstance(address.base, ast.Name) else ""
        key = self.key(self.ops[at], base)
        loop = range(self.found.staging.start, self.found.tail.stop)
        defs = self.du.defs_of.get((at, key), ()) if key else ()
        return base in self.buffer_names or (bool(defs) and all(d == ENTRY or d not in loop for d in defs))

    def stable(self, place: _Place, stores: tuple[int, int]) -> bool:
        """Whether the base register holds one value at both stores: its definitions reaching them are the same
        and each lies before both, outside inner loops, or outside the staging part (run once per trip at most,
        never between the two)."""
        staging = self.found.staging
        return all(d < 0 or d not in staging or (d < min(stores) and not self.in_inner_loop(d)) for d in place.defs)


def counted(copies: tuple[AsyncCopy, ...], per: str) -> str:
    """The report's count of copies: `8 cp.async per trip`, or with fill loops `14 cp.async per trip (8 in fill
    loops, once per inner trip)`."""
    looped = sum(c.looped for c in copies)
    return f"{len(copies)} {per}" + (f" ({looped} in fill loops, once per inner trip)" if looped else "")


def _overlapping(writes: list[Write]) -> tuple[Write, Write] | None:
    """Two of one thread's writes (in program order) that share a byte, or None."""
    ordered = sorted(enumerate(writes), key=lambda x: (x[1].buffer, x[1].offset))
    for (i, a), (j, b) in zip(ordered, ordered[1:], strict=False):
        if a.buffer == b.buffer and b.offset < a.offset + a.size:
            return (a, b) if i < j else (b, a)
    return None


def staging_trace(cfg: CFG, found: StagedLoop) -> tuple[FillTrace, int]:
    """fills.py's run of the staging part with this module's evaluation of live-ins, and the threads to run it for
    (the values %tid.x may take)."""
    du = def_use(cfg)
    converter = _Converter(cfg, du, find_loops(cfg, du), found)
    return converter.trace(), converter.threads


def stale_slot(cfg: CFG, du: DefUse, loops: tuple[Loop, ...], found: StagedLoop) -> tuple[int, str] | None:
    """(line, why) where a staging store may skip a byte on some trip, or write another address on another trip: in
    the input that byte holds the trip before's value, in a ring slot the value of S trips before (the ld+st split's
    producers fill slots as the copies do). Stores in an inner (fill) loop are judged by running every thread's trip
    (fills.py); overlaps do not matter here (ld+st stores land in order)."""
    converter = _Converter(cfg, du, loops, found)
    if any(converter.in_inner_loop(at) for at in found.stores) and (why := converter.fill_refusal(False)) is not None:
        return why
    for at in found.stores:
        if not converter.in_inner_loop(at) and (why := converter.every_trip(at)) is not None:
            return cfg.linear.ops[at].line, why
    return None


def async_copies(
    cfg: CFG, du: DefUse, loops: tuple[Loop, ...], found: StagedLoop
) -> tuple[AsyncCopy, ...] | tuple[int, str]:
    """A cp.async for every shared write of the staging part, or (line, why not): each converts, each buffer's
    alignment covers its copy's size, and the stores of one trip write disjoint bytes in each thread. Where a staging
    load or store lies in an inner (fill) loop, fills.py runs every thread's trip to prove both instead."""
    converter = _Converter(cfg, du, loops, found)
    buffers = {b.name: b for b in found.buffers}
    if any(converter.in_inner_loop(at) for at in (*found.stores, *found.loads)):
        if (why := converter.fill_refusal()) is not None:
            return why
        converter.traced = True
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
        for other, seen in zip(out, places, strict=True) if not converter.traced else ():
            if seen.buffer != place.buffer:
                continue  # PTX fixes no layout between variables: an access from one never reaches another
            same = seen.base == place.base and seen.defs == place.defs
            if converter.enumerated((other.store, at), (other.size, copy.size)):
                continue  # disjoint in every thread, address by address
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


def _flag(copy: AsyncCopy, value: str, guard: ast.Guard | None) -> ast.Instruction:
    return ast.Instruction("mov", ("pred",), (ast.Name(copy.flag), ast.Immediate(value)), guard=guard)


def _capture(copy: AsyncCopy, load: ast.Instruction, registers: frozenset[str]) -> tuple[ast.Statement, ...]:
    """In place of the load: its address into the copy's source register (and, on a zero-fill copy, the flag:
    this path copies), under the load's guard."""
    address = load.operands[1]
    assert isinstance(address, ast.Address)
    value = ast.displacement(address)
    source = ast.Name(copy.source)
    if isinstance(address.base, ast.Name) and address.base.text in registers:  # `rd5` is a register too
        take = ast.Instruction("add", ("s64",), (source, address.base, ast.Immediate(str(value))), guard=load.guard)
    else:  # a global variable's address
        symbol = ast.SymbolOffset(address.base, ast.Immediate(str(value))) if value else address.base
        take = ast.Instruction("mov", ("u64",), (source, symbol), guard=load.guard)
    flagged = copy.zero_fill and copy.select is None
    return (take, _flag(copy, "1", load.guard)) if flagged else (take,)


def _selected(copy: AsyncCopy, selp: ast.Instruction) -> ast.Instruction:
    """In place of `selp %v, %loaded, 0, %p`: the flag is %p (negated where the load is selp's second choice)."""
    loaded_first = isinstance(selp.operands[2], ast.Immediate)  # selp d, a, b, p is p ? a : b; the zero is b
    return ast.Instruction("mov" if loaded_first else "not", ("pred",), (ast.Name(copy.flag), selp.operands[3]))


def _cp_async(copy: AsyncCopy, store: ast.Instruction) -> tuple[ast.Statement, ...]:
    """The relocated store as a cp.async from the captured address; zero-filled (src-size 0) where the flag is
    off. `.cg` (L2 only) for 16 bytes, as CUTLASS does; `.ca` for 4 and 8 (the only sizes it takes)."""
    level = "cg" if copy.size == 16 else "ca"
    destination, size = store.operands[0], ast.Immediate(str(copy.size))
    operands: tuple[ast.Operand, ...] = (destination, ast.Address(ast.Name(copy.source)), size)
    out: list[ast.Statement] = []
    if copy.zero_fill:
        read = ast.Name(f"%wr_n{copy.number}")
        out.append(ast.Instruction("selp", ("u32",), (read, size, ast.Immediate("0"), ast.Name(copy.flag))))
        operands = (*operands, read)
    out.append(ast.Instruction("cp", ("async", level, "shared", "global"), operands))
    return tuple(out)


def copying(
    copies: tuple[AsyncCopy, ...],
    registers: frozenset[str],
    relocate: Callable[[ast.Instruction], tuple[ast.Statement, ...]],
) -> Callable[[int, ast.Instruction], tuple[ast.Statement, ...]]:
    """The staging part's edit, op by op, for the pipeline's ahead copy and the copying producers alike: each load
    only takes its address (and sets its copy's flag), each zero sets the flag off, each selp picks it, and each
    store, moved into the ring slot by `relocate`, becomes its cp.async."""
    by_load = {c.load: c for c in copies}
    by_store = {c.store: c for c in copies}
    by_select = {c.select: c for c in copies if c.select is not None}
    zeros = {z: c for c in copies for z in c.zeros}

    def edit(index: int, i: ast.Instruction) -> tuple[ast.Statement, ...]:
        if index in by_load:
            return _capture(by_load[index], i, registers)
        if index in by_select:
            return (_selected(by_select[index], i),)
        if index in by_store:
            *moved, store = relocate(i)
            assert isinstance(store, ast.Instruction)
            return (*moved, *_cp_async(by_store[index], store))
        if index in zeros:
            return (i, _flag(zeros[index], "0", i.guard))
        return (i,)

    return edit

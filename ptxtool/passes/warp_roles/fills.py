"""The staging part of one trip run for every thread of the block, knowing only what is fixed for the thread: the
bytes each thread's staging stores write, in order, where an inner fill loop (`for (i = tid; i < 1032; i += 256)
s[i] = x[start + i];`) makes one store run several times per trip.

Known values are %tid.x, constants, the shared buffers' addresses, `%ntid.x` under `.reqntid`, and what integer
arithmetic the thread does on them (thread_values.py, before the loop or in the trip); everything else (loaded
values, the trip's counters, parameters) is unknown. A branch on a known predicate is followed. A branch on an
unknown one (nvcc's bounds checks) runs both ways up to where they meet again (its immediate post-dominator in the
staging part) and keeps the registers both ways agree on; neither way may run a store or reach that branch again.
So each thread's stores, their number and addresses are a function of values fixed for the thread: the same on
every trip (a byte the trip skips is one the thread never writes in the loop), which is what a ring slot needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ptxtool import isa
from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa import Effect
from ptxtool.isa.caching import access_bytes, type_bits
from ptxtool.isa.integer import compared, wrapped
from ptxtool.passes.warp_roles.thread_values import computed
from ptxtool.syntax import ast

STEPS = 400_000  # instructions run for all threads together before the proof gives up (pathological fills)

_Known = tuple[str | None, int] | bool  # a buffer's symbol (or None) plus an integer, or a predicate's value
_State = dict[str, _Known | None]  # register key -> its value in this thread (None: unknown)
LiveIn = Callable[[int, ast.Operand], tuple[str | None, tuple[int, ...]] | None]  # op, operand -> value per thread
Key = Callable[[int, str], str | None]  # op, register name -> the register's key there


@dataclass(frozen=True)
class Write:
    """One execution of a staging store: the op, the buffer, the offset into it and the bytes written."""

    store: int
    buffer: str
    offset: int
    size: int


class Refused(Exception):
    """(line, why) the writes are not a function of what is fixed for the thread."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(why)
        self.line, self.why = line, why


def postdominators(cfg: CFG, found: StagedLoop) -> dict[int, set[int]]:
    """Each block of the staging part (and the first barrier's) with the blocks that post-dominate it there, towards
    the barrier (iteratively: the region is small)."""
    barrier = cfg.block_of[found.filled]
    region = {cfg.block_of[o] for o in found.staging} | {barrier}
    succ = {b: [x for x in cfg.blocks[b].successors if x in region] for b in region}
    pdom = {b: set(region) for b in region}
    pdom[barrier] = {barrier}
    changed = True
    while changed:
        changed = False
        for b in region - {barrier}:
            new = {b} | set.intersection(*(pdom[x] for x in succ[b])) if succ[b] else {b}
            if new != pdom[b]:
                pdom[b], changed = new, True
    return pdom


@lru_cache(maxsize=4096)
def _immediate(text: str) -> _Known | None:
    try:
        number = ast.literal_value(text)
    except ValueError:
        return None
    return (None, number) if isinstance(number, int) and not isinstance(number, bool) else None


def address_bits(cfg: CFG, key: str | None) -> int | None:
    """The width of the address register `key` (an op's use of it), which an address wraps at; None where the
    address is no register (a buffer's symbol itself, whose offsets do not wrap within the buffer)."""
    register = cfg.linear.registers.get(key) if key else None
    return type_bits(register.type) if register else None


class FillTrace:
    """Runs the staging part for thread after thread: `live_in(at, operand)` is what a register the trace has not
    defined yet holds in every thread (None: unknown), `key`/`key_def` a register's key as op `at` reads or writes
    it, `ntid` the block's exact size (None: not declared exactly)."""

    def __init__(self, cfg: CFG, found: StagedLoop, live_in: LiveIn, key: Key, key_def: Key, ntid: int | None) -> None:
        self.cfg, self.found = cfg, found
        self.ops = cfg.linear.ops
        self.live_in, self.key, self.key_def, self.ntid = live_in, key, key_def, ntid
        self.buffers = {b.name for b in found.buffers}
        self.stores = frozenset(found.stores)
        self.pdom = postdominators(cfg, found)
        self.steps = 0
        self.keys: dict[tuple[int, str], str | None] = {}  # memoized: thread after thread reads the same ops
        self.targets: dict[int, str | None] = {}
        staging = self.ops[found.staging.start : found.filled]
        self.jump = next(
            (o for o in staging if o.instruction.opcode != "bra" and isa.effects(o.instruction) & Effect.BRANCH), None
        )

    def writes(self, tid: int) -> list[Write]:
        """Thread `tid`'s staging writes of one trip, in order; Refused where they are not known."""
        if self.jump is not None:  # brx.idx: pipeline_refusal says so first; the split's producers copy its table
            raise Refused(
                self.jump.line, f"{self.jump.instruction.mnemonic} in the staging part: its targets are not followed"
            )
        out: list[Write] = []
        self.run(tid, self.found.staging.start, self.found.filled, {}, out, ())
        return out

    def run(self, tid: int, pc: int, stop: int, state: _State, out: list[Write], forks: tuple[int, ...]) -> None:
        """Run from op `pc` to op `stop`; inside a fork (`forks`: the unknown branches being run both ways) a
        store is refused."""
        while pc != stop:
            self.steps += 1
            if self.steps > STEPS:
                raise Refused(
                    self.ops[pc].line, f"the staging part takes more than {STEPS} steps to run for every thread"
                )
            if not self.found.staging.start <= pc < self.found.filled:
                raise Refused(self.ops[pc].line, "the staging part's control leaves it before its join")
            op = self.ops[pc]
            i = op.instruction
            taken: bool | None = True
            if i.guard is not None:
                guard = self.read(tid, pc, i.guard.predicate, state)
                taken = None if not isinstance(guard, bool) else guard != i.guard.negated
            if i.opcode == "bra" and taken is None:
                pc = self.fork(tid, pc, state, forks)
                continue
            if i.opcode == "bra":
                pc = self.cfg.linear.labels[op.targets[0]] if taken else pc + 1
                continue
            self.observe(tid, pc, state, taken)
            if pc in self.stores:
                self.store(tid, pc, taken, state, out, forks)
            elif taken is None:
                state.update(dict.fromkeys(op.defs))
            elif taken:
                self.evaluate(tid, pc, state)
            pc += 1

    def observe(self, tid: int, at: int, state: _State, taken: bool | None) -> None:
        """Op `at` reached in thread `tid` (`taken`: its guard's value, None unknown), before it runs: a hook for
        analyses that follow more than the known values (sources.py)."""

    def fork(self, tid: int, at: int, state: _State, forks: tuple[int, ...]) -> int:
        """A branch on an unknown predicate: both ways run to their join, the registers they agree on kept."""
        op = self.ops[at]
        if at in forks:
            raise Refused(
                op.line,
                f"the branch at line {op.line} loops on a value not fixed for the thread (a fill loop whose trip "
                "count may change from trip to trip)",
            )
        block = self.cfg.block_of[at]
        after = self.pdom[block] - {block}
        join_block = next(b for b in after if self.pdom[b] == after)
        join = self.cfg.blocks[join_block].start
        ways: list[_State] = []
        for start in (self.cfg.linear.labels[op.targets[0]], at + 1):
            way = dict(state)
            self.run(tid, start, join, way, [], (*forks, at))
            ways.append(way)
        self.joined(at, state, *ways)
        return join

    def joined(self, at: int, state: _State, first: _State, second: _State) -> None:
        """`state` after the branch at op `at` ran both ways (`first`: taken): the values both ways agree on, and
        `merger`'s for the others."""
        merge = self.merger(at, state)
        for key in first.keys() | second.keys():
            if key not in first or key not in second or first[key] != second[key]:
                state[key] = merge(key, first.get(key), second.get(key))
            else:
                state[key] = first[key]

    def merger(self, at: int, state: _State) -> Callable[[Any, Any, Any], Any]:
        """How a value the two ways of the branch at op `at` disagree on joins (`state`: before the branch): unknown."""
        return lambda key, first, second: None

    def store(
        self, tid: int, at: int, taken: bool | None, state: _State, out: list[Write], forks: tuple[int, ...]
    ) -> None:
        op = self.ops[at]
        i = op.instruction
        if forks:
            branch = self.ops[forks[-1]].line
            raise Refused(
                op.line,
                f"{i.mnemonic} at line {op.line} is skipped on some paths of a trip, decided by a branch at line "
                f"{branch} on a value not fixed for the thread: a byte it skips would hold the value of S trips "
                "before, not of the trip before",
            )
        if not taken:
            if taken is None:
                raise Refused(op.line, f"{i.mnemonic} at line {op.line} is guarded by a value not fixed for the thread")
            return
        address = i.operands[0]
        assert isinstance(address, ast.Address)
        base = self.read(tid, at, address.base, state)
        if not isinstance(base, tuple) or base[0] not in self.buffers:
            raise Refused(
                op.line,
                f"{i.mnemonic} at line {op.line} in a fill loop writes an address that is not a function of %tid.x, "
                "constants and a buffer's address: its bytes may change from trip to trip",
            )
        extra = ast.displacement(address)
        size = access_bytes(i)
        key = self.key(at, address.base.text) if isinstance(address.base, ast.Name) else None
        offset = wrapped(base[1] + extra, address_bits(self.cfg, key), size)
        if offset is None:
            raise Refused(
                op.line,
                f"{i.mnemonic} at line {op.line} in a fill loop writes bytes that wrap around the end of the address "
                "space: their order is not known",
            )
        out.append(Write(at, base[0], offset, size))

    def read(self, tid: int, at: int, operand: ast.Operand, state: _State) -> _Known | None:
        """What `operand` of op `at` holds in thread `tid`."""
        if isinstance(operand, ast.Immediate):
            return _immediate(operand.text)
        if not isinstance(operand, ast.Name):
            return None
        if operand.text == "%tid.x":
            return None, tid
        if operand.text == "%ntid.x":
            return (None, self.ntid) if self.ntid else None
        if operand.text in self.buffers:
            return operand.text, 0
        if (at, operand.text) not in self.keys:
            self.keys[at, operand.text] = self.key(at, operand.text)
        key = self.keys[at, operand.text]
        if key is None:
            return None
        if key in state:
            return state[key]
        values = self.live_in(at, operand)
        return None if values is None else (values[0], values[1][tid])

    def evaluate(self, tid: int, at: int, state: _State) -> None:
        """Op `at` run in thread `tid`: its definitions' values, or unknown."""
        op = self.ops[at]
        i = op.instruction
        if at not in self.targets:  # the one register it defines where it computes from registers alone
            first = i.operands[0] if i.operands else None
            computes = isinstance(first, ast.Name) and len(op.defs) == 1 and not isa.memory_accesses(i)
            self.targets[at] = self.key_def(at, first.text) if computes else None  # type: ignore[union-attr]
        target = self.targets[at]
        if target is None:
            state.update(dict.fromkeys(op.defs))
            return
        state[target] = self.computed(i, [self.read(tid, at, x, state) for x in i.operands[1:]])

    @staticmethod
    def computed(i: ast.Instruction, args: list[_Known | None]) -> _Known | None:
        """The value an unguarded instruction gives from known operands (None: unknown)."""
        if "pred" in i.modifiers:
            flags = [bool(a[1]) if isinstance(a, tuple) and a[0] is None else a for a in args]
            flags = [a for a in flags if isinstance(a, bool)]
            if len(flags) != len(args):
                return None
            if i.opcode in ("mov", "not") and len(flags) == 1:
                return flags[0] if i.opcode == "mov" else not flags[0]
            if i.opcode in ("and", "or", "xor") and len(flags) == 2:
                a, b = flags
                return a and b if i.opcode == "and" else a or b if i.opcode == "or" else a != b
            return None
        if i.opcode == "selp" and len(args) == 3:
            return (args[0] if args[2] else args[1]) if isinstance(args[2], bool) else None
        numbers = [a for a in args if isinstance(a, tuple)]
        if len(numbers) != len(args):
            return None
        if i.opcode == "setp":
            if any(a[0] is not None for a in numbers):
                return None  # an address compared: its buffer's place is not known
            return compared(i, [a[1] for a in numbers])
        return computed(i, numbers)

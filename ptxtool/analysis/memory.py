"""Memory facts for a kernel's global (and generic) accesses: where each pointer comes from, how its offset moves
around loops, what the kernel may write, and through what it may observe other agents' writes.

Each address is evaluated symbolically through its reaching definitions: `ld.param` of a pointer gives the
parameter as the base; `cvta`, `mov`, `cvt`, `add`/`sub`, `mul`/`shl` by constants and `mad` keep the value affine;
a loop's induction variable becomes a symbol that grows by its step each trip; anything else (a load, `%tid.x`, a
product of two registers) is an opaque symbol. Everything here is conservative: a call has its callee's effects
(an `.extern`, indirect or unknown callee has every effect), and a store, atomic, bulk copy or call that may write
through a pointer of unknown origin makes no parameter read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from ptxtool import isa
from ptxtool.analysis.cfg import CFG, build_cfg
from ptxtool.analysis.dataflow.liveness import ENTRY, DefUse
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import InductionVariable, Loop, innermost
from ptxtool.analysis.statements import statements
from ptxtool.isa import Effect, Mode
from ptxtool.syntax import ast

# CUDA runtime functions without a body in the module, known to touch no memory the kernel's pointers reach.
_HARMLESS_EXTERN = frozenset(("vprintf", "malloc", "free", "__assertfail"))
_ALLOCATORS = frozenset(("malloc",))  # their result is fresh memory: it aliases no parameter
_CARRIED_DEPTH = 16  # loop-carried registers checked inside one another's check, at most
# Special registers that tell the threads of a grid apart.
THREAD_INDICES = frozenset(f"%tid.{d}" for d in "xyz")
BLOCK_INDICES = frozenset(f"%ctaid.{d}" for d in "xyz")
_INDICES = THREAD_INDICES | BLOCK_INDICES
THREAD_SHAPES = frozenset((t,) for t in THREAD_INDICES)


class Space(Enum):
    """Where a pointer points: a kernel parameter's buffer, a module variable, a state space, or nobody knows."""

    PARAM = "param"  # the buffer a pointer parameter of the kernel points to
    GLOBAL = "global"  # a module-level .global variable
    SHARED = "shared"
    LOCAL = "local"
    CONST = "const"
    PARAM_SPACE = "param space"  # the .param state space itself
    HEAP = "heap"  # fresh memory from malloc
    UNKNOWN = "unknown"  # a loaded pointer, an integer made into one, a sum of two pointers


_SPACE_WORDS = {".global": Space.GLOBAL, ".shared": Space.SHARED, ".const": Space.CONST, ".local": Space.LOCAL}
_SPACE_WORDS[".param"] = Space.PARAM_SPACE
_NOT_GLOBAL = frozenset((Space.SHARED, Space.LOCAL, Space.CONST, Space.PARAM_SPACE, Space.HEAP))


@dataclass(frozen=True, slots=True)
class MemoryBase:
    """The object an address points into: its kind and, for parameters and module variables, its name."""

    space: Space
    name: str | None = None

    @property
    def param(self) -> str | None:
        return self.name if self.space is Space.PARAM else None

    def __str__(self) -> str:
        return f"{self.space.value}:{self.name}" if self.name else self.space.value


UNKNOWN = MemoryBase(Space.UNKNOWN)


@dataclass(frozen=True, slots=True)
class Symbol:
    """An unknown in an affine form: a special register (`%tid.x`), the value of a register at an op, a loop's
    induction variable, or a product of such. `factors` lists the special registers it is the product of (empty
    when it is not a product of special registers only); `specials` every special register it involves; `ops` and
    `loops` the ops whose results and the loops whose trips may change it; `distinct` the special registers whose
    different values give it different values (not those seen only through `and`, `shr`, `min`, ...)."""

    text: str
    factors: tuple[str, ...] = ()
    specials: frozenset[str] = frozenset()
    ops: frozenset[int] = frozenset()
    loops: frozenset[int] = frozenset()
    distinct: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Affine:
    """`base + sum(coefficient * symbol) + const`; base None for a plain number."""

    base: MemoryBase | None = None
    terms: dict[Symbol, int] = field(default_factory=dict)
    const: int = 0

    def __add__(self, other: Affine) -> Affine:
        base = UNKNOWN if self.base and other.base else self.base or other.base
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Affine(base, {k: v for k, v in terms.items() if v}, self.const + other.const)

    def scale(self, factor: int) -> Affine:
        """This value times a constant (a scaled pointer is no longer a pointer into its base)."""
        terms = {k: v * factor for k, v in self.terms.items() if v * factor}
        return Affine(UNKNOWN if self.base else None, terms, self.const * factor)

    @property
    def constant(self) -> int | None:
        """The value when it is a plain number."""
        return self.const if not self.terms and not self.base else None

    @property
    def specials(self) -> frozenset[str]:
        """Every special register the value involves."""
        return frozenset().union(*(s.specials for s in self.terms))

    @property
    def distinct(self) -> frozenset[str]:
        """The special registers the value tells apart (`%tid.x & 31` involves `%tid.x` but tells 32 apart only)."""
        return frozenset().union(*(s.distinct for s in self.terms))

    def coefficient(self, special: str) -> int:
        """The coefficient of one special register standing alone (`%tid.x` in `16*%tid.x + ...`)."""
        return sum(v for s, v in self.terms.items() if s.factors == (special,))

    def __str__(self) -> str:
        parts = [f"{v}*{k}" if v != 1 else str(k) for k, v in sorted(self.terms.items(), key=lambda t: t[0].text)]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def _opaque(text: str, ops: Iterable[int] = (), loops: Iterable[int] = ()) -> Affine:
    return Affine(None, {Symbol(text, ops=frozenset(ops), loops=frozenset(loops)): 1})


def _special(name: str) -> Affine:
    return Affine(None, {Symbol(name, (name,), frozenset((name,)), distinct=frozenset((name,))): 1})


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """One global or generic access: where (op, line), how (mode, space), into which object (`base`) at which
    `offset` from it, the innermost loop around it and how many loops enclose it, and the bytes its address moves
    per trip of that loop (`stride`: affine over loop-invariant symbols; None when it moves in no affine way)."""

    op: int
    line: int
    mnemonic: str
    mode: Mode
    space: str
    base: MemoryBase
    offset: Affine
    loop: int | None
    depth: int
    stride: Affine | None

    @property
    def param(self) -> str | None:
        return self.base.param

    @property
    def in_loop(self) -> bool:
        return self.loop is not None


@dataclass(frozen=True, slots=True)
class Observer:
    """An op through which the kernel may observe memory written by another agent, and why (`line` in its own
    function; a call names the callee's op)."""

    op: int
    line: int
    reason: str


@dataclass(frozen=True)
class MemoryFacts:
    """Every global/generic access of a function; the parameters and module variables it may write; the ops that
    write through (or hand to a call) a pointer of unknown origin; the ops through which it may observe other
    agents' writes; and the thread/block indices (`%tid.y`, `%ctaid.y`) it reads."""

    accesses: tuple[MemoryAccess, ...]
    written_params: frozenset[str]
    read_only_params: frozenset[str]
    written_globals: frozenset[str]
    unknown_writes: tuple[int, ...]
    observers: tuple[Observer, ...] = ()
    indices: frozenset[str] = frozenset()

    @property
    def writes(self) -> bool:
        """Whether the function may write global or generic memory at all."""
        return bool(self.unknown_writes or self.written_params or self.written_globals) or any(
            a.mode is not Mode.READ for a in self.accesses
        )


def variable_spaces(module: ast.Module, function: ast.Function) -> dict[str, Space]:
    """State space of each variable a function can name: module-level ones and those declared in its body."""
    decls = [i for i in module.items if isinstance(i, ast.Declaration)]
    if function.body is not None:
        decls += [s for s in statements(function.body) if isinstance(s, ast.Declaration)]
    out = {}
    for d in decls:
        space = next((_SPACE_WORDS[a.word] for a in d.attributes if a.word in _SPACE_WORDS), None)
        if space:
            out.update((x.name, space) for x in d.declarators)
    return out


def _symbol_base(name: str, space: Space | None) -> MemoryBase:
    return MemoryBase(Space.GLOBAL, name) if space is Space.GLOBAL else MemoryBase(space) if space else UNKNOWN


class _Evaluator:
    """Symbolic values of registers at their uses, memoized; cycles and merges become opaque symbols."""

    def __init__(
        self,
        cfg: CFG,
        du: DefUse,
        loops: tuple[Loop, ...],
        spaces: dict[str, Space],
        params: set[str],
        allocators: frozenset[str] = _ALLOCATORS,
        threads: tuple[int, ...] = (),
    ):
        self.cfg, self.du, self.spaces, self.params, self.allocators = cfg, du, spaces, params, allocators
        self.threads = threads  # the most threads per block in x, y, z (`.maxntid`/`.reqntid`), where declared
        self.loops = sorted(loops, key=lambda loop: -loop.depth)  # innermost first
        self.memo: dict[tuple[int, str], Affine] = {}
        self.busy: set[tuple[int, str]] = set()
        self.steps: dict[Symbol, Affine | None] = {}  # induction symbol -> its step per trip (None: not affine)
        self.carrying: set[tuple[int, str]] = set()  # (loop, register) whose carried base is being checked

    def operand(self, op: int, index: int) -> Affine:
        o = self.cfg.linear.ops[op]
        operand = o.instruction.operands[index]
        key = o.keys[index] if index < len(o.keys) else None
        if key is not None:
            return self.register(op, key)
        if isinstance(operand, ast.Immediate):
            value = operand.value
            return Affine(const=value) if isinstance(value, int) else _opaque(operand.text)
        if isinstance(operand, ast.Name):
            space = self.spaces.get(operand.text)
            if space:
                return Affine(_symbol_base(operand.text, space))
            return _special(operand.text) if operand.text.startswith("%") else _opaque(operand.text)
        return _opaque(f"?@{op}", (op,))  # a vector or other operand we do not follow

    def register(self, op: int, key: str) -> Affine:
        memo = (op, key)
        if memo in self.memo:
            return self.memo[memo]
        if memo in self.busy:
            return _opaque(f"{key}@{op}", (op,))
        self.busy.add(memo)
        value = self._register(op, key)
        self.busy.discard(memo)
        self.memo[memo] = value
        return value

    def _register(self, op: int, key: str) -> Affine:
        defs = self.du.defs_of.get((op, key), (ENTRY,))
        if len(defs) == 1 and defs[0] != ENTRY:
            return self.define(defs[0], key)
        for loop in self.loops:
            if self.cfg.block_of[op] in loop.blocks:
                outside = [d for d in defs if d == ENTRY or self.cfg.block_of[d] not in loop.blocks]
                if len(outside) == 1 and outside[0] != ENTRY and len(outside) < len(defs):
                    return self._carried(loop, key, outside[0])
        return _opaque(f"{key}@{op}", (op, *(d for d in defs if d != ENTRY)))

    def _carried(self, loop: Loop, key: str, init_op: int) -> Affine:
        """A register carried around a loop: `init + iv` for an induction variable, else `init`'s base plus an
        unknown that changes every trip."""
        init = self.define(init_op, key)
        iv = next((v for v in loop.induction if v.register == key), None)
        if iv is None:
            base = init.base if self._keeps_base(loop, key, init.base) else UNKNOWN if init.base else None
            return Affine(base, {Symbol(f"{key}@L{loop.index}", loops=frozenset((loop.index,))): 1})
        symbol = Symbol(f"iv(L{loop.index}:{key})", loops=frozenset((loop.index,)))
        self.steps[symbol] = self._step(iv)
        return init + Affine(None, {symbol: 1})

    def _keeps_base(self, loop: Loop, key: str, base: MemoryBase | None) -> bool:
        """Whether every definition of key inside the loop keeps the base it enters with (pointers swapped between
        buffers each trip do not), assuming the carried value keeps it; what was learnt under a failed
        assumption is forgotten."""
        if (loop.index, key) in self.carrying:
            return True
        if len(self.carrying) >= _CARRIED_DEPTH:  # registers copied around a loop through a long chain: give up
            return False
        self.carrying.add((loop.index, key))
        known = set(self.memo)
        inside = [o.index for b in loop.blocks for o in self.cfg.ops(self.cfg.blocks[b]) if key in o.defs]
        kept = all(self.define(d, key).base == base for d in inside)
        self.carrying.discard((loop.index, key))
        if not kept:
            for stale in set(self.memo) - known:
                del self.memo[stale]
        return kept

    def _step(self, iv: InductionVariable) -> Affine | None:
        """An induction variable's step as an affine value (loops.py renders it as `3*%rd27 + 8` over register
        keys that the loop never writes; each is evaluated where the update reads it)."""
        if isinstance(iv.step, int):
            return Affine(const=iv.step)
        total = Affine()
        for part in iv.step.split(" + "):
            count, star, key = part.rpartition("*")
            if not star and key.lstrip("-").isdigit():
                total = total + Affine(const=int(key))
            elif key in self.cfg.linear.registers:
                total = total + self.register(iv.update, key).scale(int(count) if star else 1)
            else:
                return None
        return total

    def define(self, op: int, key: str) -> Affine:
        """The value op writes to register key."""
        o = self.cfg.linear.ops[op]
        i = o.instruction
        family = isa.family(i)
        n = len(i.operands)
        if o.defs != (key,) or o.guarded:
            return self._opaque(op, key)
        if family == "ld" and "param" in i.modifiers and isinstance(i.operands[1], ast.Address):
            base = i.operands[1].base
            if isinstance(base, ast.Name) and base.text in self.params:
                wide = any(isa.caching.type_bits(t) == 64 for t in i.modifiers)
                return Affine(MemoryBase(Space.PARAM, base.text)) if wide else _opaque(f"param:{base.text}")
            if isinstance(base, ast.Name) and self._returned_by(op, base.text) in self.allocators:
                return Affine(MemoryBase(Space.HEAP))
        if family in ("mov", "cvta", "cvt") and n == 2:
            return self.operand(op, 1)
        if family == "mapa" and n == 3 and self.operand(op, 1).base == MemoryBase(Space.SHARED):
            return Affine(MemoryBase(Space.SHARED))  # the same variable in another block of the cluster
        if family in ("add", "sub") and n == 3:
            right = self.operand(op, 2)
            return self.operand(op, 1) + (right if family == "add" else right.scale(-1))
        if family in ("mul", "shl") and n == 3 and "hi" not in i.modifiers:
            a, b = self.operand(op, 1), self.operand(op, 2)
            if family == "shl":
                shift = b.constant
                return a.scale(1 << shift) if shift is not None and 0 <= shift < 64 else self._opaque(op, key)
            return _product(a, b) or self._opaque(op, key)
        if family == "mad" and n == 4 and "hi" not in i.modifiers:
            product = _product(self.operand(op, 1), self.operand(op, 2))
            return product + self.operand(op, 3) if product else self._opaque(op, key)
        if family == "neg" and n == 2:
            return self.operand(op, 1).scale(-1)
        if family == "and" and n == 3 and self._whole_mask(self.operand(op, 1), self.operand(op, 2)):
            return self.operand(op, 1)  # `%tid.x & 127` with at most 128 threads: %tid.x itself
        return self._opaque(op, key)

    def _whole_mask(self, value: Affine, mask: Affine) -> bool:
        """Whether `value & mask` is value: a thread index under a mask that covers every thread the kernel's
        `.maxntid`/`.reqntid` allows in that dimension."""
        bits = mask.constant
        if len(value.terms) != 1 or value.const or value.base or bits is None or bits < 0 or bits & (bits + 1):
            return False
        ((symbol, coefficient),) = value.terms.items()
        if coefficient != 1:
            return False
        dimension = "xyz".index(symbol.factors[0][-1]) if symbol.factors in THREAD_SHAPES else None
        limit = self.threads[dimension] if dimension is not None and dimension < len(self.threads) else None
        return limit is not None and limit <= bits + 1

    def _opaque(self, op: int, key: str) -> Affine:
        """A value computed in a way we do not follow; it still involves the special registers of its inputs
        (`and %r, %tid.x, 127`), except through memory (a loaded value may be anything)."""
        i = self.cfg.linear.ops[op].instruction
        specials: frozenset[str] = frozenset()
        if not isa.memory_accesses(i):
            uses = [n for n, (_, role) in enumerate(isa.operand_roles(i)) if role is isa.Role.USE]
            specials = specials.union(*(self.operand(op, n).specials for n in uses))
        return Affine(None, {Symbol(f"{key}@{op}", specials=specials, ops=frozenset((op,))): 1})

    def _returned_by(self, op: int, name: str) -> str | None:
        """The callee of the nearest call before op whose return list names `name`."""
        for prior in reversed(self.cfg.linear.ops[:op]):
            i = prior.instruction
            if i.opcode == "call" and len(i.operands) > 1 and isinstance(i.operands[0], ast.ParenList):
                if any(isinstance(x, ast.Name) and x.text == name for x in i.operands[0].items):
                    callee = i.operands[1]
                    return callee.text if isinstance(callee, ast.Name) else None
        return None


def _product(a: Affine, b: Affine) -> Affine | None:
    """a * b when one side is a constant; the product of two single terms is one symbol naming both (a product
    of special registers keeps its factors: `%nctaid.x * %ntid.x`); None for a product with a pointer."""
    if (c := a.constant) is not None:
        return b.scale(c)
    if (c := b.constant) is not None:
        return a.scale(c)
    if a.base or b.base:
        return None
    if len(a.terms) == 1 == len(b.terms) and not a.const and not b.const:
        (x, m), (y, n) = *a.terms.items(), *b.terms.items()
        pure = bool(x.factors and y.factors)
        factors = tuple(sorted(x.factors + y.factors)) if pure else ()
        text = "*".join(factors) if pure else f"({x})*({y})"
        symbol = Symbol(
            text, factors, x.specials | y.specials, x.ops | y.ops, x.loops | y.loops, x.distinct | y.distinct
        )
        return Affine(None, {symbol: m * n})
    symbols = [*a.terms, *b.terms]
    return Affine(
        None,
        {
            Symbol(
                f"({a})*({b})",
                specials=frozenset().union(*(s.specials for s in symbols)),
                ops=frozenset().union(*(s.ops for s in symbols)),
                loops=frozenset().union(*(s.loops for s in symbols)),
                distinct=frozenset().union(*(s.distinct for s in symbols)),
            ): 1
        },
    )


def varies(symbol: Symbol, cfg: CFG, loop: Loop) -> bool:
    """Whether a symbol may change from one trip of the loop to the next."""
    return loop.index in symbol.loops or any(cfg.block_of[at] in loop.blocks for at in symbol.ops)


def _address(ev: _Evaluator, op: int, operand: ast.Operand) -> Affine:
    if not isinstance(operand, ast.Address):
        return Affine(UNKNOWN)
    o = ev.cfg.linear.ops[op]
    base = operand.base
    if isinstance(base, ast.Name):
        reg = ev.cfg.linear.registers
        key = next((k for k in o.uses if reg[k].name == base.text), None)
        value = ev.register(op, key) if key is not None else Affine(_symbol_base(base.text, ev.spaces.get(base.text)))
    else:
        value = Affine(UNKNOWN, const=int(base.value))
    if operand.offset is not None:
        delta = int(operand.offset.value)
        value = value + Affine(const=delta if operand.plus else -delta)
    return value


def _stride(ev: _Evaluator, value: Affine, loop: Loop | None) -> Affine | None:
    """Bytes the address moves per trip of the loop, over loop-invariant symbols (`16*%nctaid.x*%ntid.x`);
    None outside loops and when it moves in a way that is not affine."""
    if loop is None:
        return None
    total = Affine()
    for symbol, coefficient in value.terms.items():
        if symbol in ev.steps and symbol.loops == {loop.index}:
            step = ev.steps[symbol]
            if step is None:
                return None
            total = total + step.scale(coefficient)
        elif varies(symbol, ev.cfg, loop):
            return None
    return total


def _stores(op: Op) -> bool:
    """Whether op writes memory other than `.global` (where a poll's value would be handed on: shared, local,
    generic); a global store of a loaded scalar (`y[i] = x[i] * scale[0]`) hands on nothing."""
    return any(mode is not Mode.READ and space != "global" for _, mode, space in isa.memory_accesses(op.instruction))


def _loads(op: Op) -> bool:
    return any(mode is not Mode.WRITE for _, mode, _ in isa.memory_accesses(op.instruction))


def dependent_branches(ops: list[Op], source: Op, *, through_memory: bool = False) -> list[Op]:
    """The conditional branches, indirect branches and exits among `ops` whose predicate or target depends on what
    `source` defines. `through_memory`: a value stored among `ops` outside `.global` (or a call's result, which comes
    back through `.param` memory) may reach every load among them (`if (!tid) s = *f; __syncthreads(); while (!s)`)."""
    seen = set(source.defs)
    memory = through_memory and bool(isa.effects(source.instruction) & Effect.CALL)
    changed = True
    while changed:
        changed = False
        for op in ops:
            tainted = seen.intersection(op.uses) or (memory and _loads(op))
            if tainted and not seen.issuperset(op.defs):
                seen.update(op.defs)
                changed = True
            if through_memory and not memory and seen.intersection(op.uses) and _stores(op):
                memory = changed = True
    leaves = Effect.BRANCH | Effect.RETURN
    return [
        op
        for op in ops
        if (info := isa.find(op.instruction))
        and info.effects & leaves
        and ((op.guarded and op.uses[-1] in seen) or (not op.guarded and seen.intersection(op.uses)))
    ]


def _polls(cfg: CFG, loops: tuple[Loop, ...], ev: _Evaluator, op: int, value: Affine | None) -> bool:
    """A load whose address stays put in a loop that its value controls, even through memory: it waits for someone
    else's write. A call (value None) polls when its result controls a loop around it."""
    for loop in loops:
        if cfg.block_of[op] in loop.blocks and (value is None or not any(varies(s, cfg, loop) for s in value.terms)):
            inside = [o for b in sorted(loop.blocks) for o in cfg.ops(cfg.blocks[b])]
            if dependent_branches(inside, cfg.linear.ops[op], through_memory=True):
                return True
    return False


def _callee(module: ast.Module, op: Op) -> tuple[str | None, ast.Function | None]:
    """The name and function of a direct call's callee (name None: an indirect call through a register)."""
    operands = op.instruction.operands
    at = 1 if len(operands) > 1 and isinstance(operands[0], ast.ParenList) else 0
    callee = operands[at] if at < len(operands) else None
    if not isinstance(callee, ast.Name) or op.keys[at] is not None:
        return None, None
    named = [f for f in module.functions if f.name == callee.text]  # a prototype, then maybe its definition
    if any(a.word == ".weak" for f in named for a in f.attributes):
        return callee.text, None  # the linker may put another module's definition in its place: unknown effects
    return callee.text, next((f for f in named if f.body is not None), next(iter(named), None))


def _call(
    ev: _Evaluator, module: ast.Module, op: int, stack: tuple[str, ...], done: dict[str, MemoryFacts]
) -> tuple[set[str], bool, list[Observer]]:
    """A call's effects: the parameters it may write (pointers handed to it), whether it may write through unknown
    pointers, and the first thing through which it may observe other agents (transitively through its calls)."""
    o = ev.cfg.linear.ops[op]
    name, function = _callee(module, o)
    line = o.line
    if name is None:
        return set(), True, [Observer(op, line, "an indirect call (its callee may do anything)")]
    if function is None or function.body is None:
        if name in _HARMLESS_EXTERN:
            return set(), False, []
        return set(), True, [Observer(op, line, f"a call to {name}, which has no body here (it may do anything)")]
    if name in stack:  # recursion: the cycle's effects are those of its members, being summed already; but it is
        # a loop no CFG shows, so a load in it may be a poll (`wait() { if (!flag[0]) wait(); }`)
        cycle = [f for f in module.functions if f.name in stack[stack.index(name) :] and f.body is not None]
        if any(_reads_global(f) for f in cycle):
            return set(), False, [Observer(op, line, f"a recursive call to {name} (a loop that may poll)")]
        return set(), False, []
    if name not in done:
        done[name] = memory_facts(module, function, _stack=(*stack, name), _done=done)
    facts = done[name]
    observers = [Observer(op, line, f"a call to {name}: {x.reason} at line {x.line}") for x in facts.observers[:1]]
    written: set[str] = set()
    unknown = facts.writes
    for prior in ev.cfg.linear.ops[: op + 1]:  # pointers stored into the call's parameters
        i = prior.instruction
        if i.opcode == "st" and "param" in i.modifiers and len(i.operands) == 2 and prior.keys[1]:
            value = ev.register(prior.index, prior.keys[1])
            if value.base and value.base.param:
                written.add(value.base.param)
    return written, unknown, observers


def _reads_global(function: ast.Function) -> bool:
    """Whether a function's own body reads global or generic memory."""
    instructions = (n for n in ast.walk(function.body) if isinstance(n, ast.Instruction))
    return any(
        mode is not Mode.WRITE and space in ("global", "generic")
        for i in instructions
        if isa.find(i) is not None
        for _, mode, space in isa.memory_accesses(i)
    )


def _callee_indices(module: ast.Module, op: Op, stack: tuple[str, ...], done: dict[str, MemoryFacts]) -> frozenset[str]:
    """The thread/block indices a call's callee reads (every one for a callee we cannot see): a callee that reads
    `%ctaid.y` makes a launch wider in y do different work, so the caller's loads are read again by each y (a
    recursive call's are being summed already)."""
    name, function = _callee(module, op)
    if name in stack or (name in _HARMLESS_EXTERN and (function is None or function.body is None)):
        return frozenset()
    facts = done.get(name) if name else None
    return _INDICES if facts is None else facts.indices


def _reads_memory(module: ast.Module, op: Op, done: dict[str, MemoryFacts]) -> bool:
    """Whether a call's callee may read global memory (indirect and bodiless callees are observers already)."""
    name, function = _callee(module, op)
    facts = done.get(name) if name else None
    return facts is None or any(a.mode is not Mode.WRITE for a in facts.accesses)


def memory_facts(
    module: ast.Module,
    function: ast.Function,
    cfg: CFG | None = None,
    *,
    _stack: tuple[str, ...] = (),
    _done: dict[str, MemoryFacts] | None = None,
) -> MemoryFacts:
    """The memory facts of one kernel (or function) with a body. Callees are analysed once per top-level call
    (`_done`); inside a recursive cycle a callee's facts leave out the members being analysed above it, whose
    effects reach the top-level function through them anyway."""
    cfg = cfg or build_cfg(function)
    du = cfg.chains
    loops = cfg.loops
    params = {p.name for p in function.params or ()}
    defined = {f.name for f in module.functions if f.body is not None}  # a module's own `malloc` hands out anything
    bounds = block_bounds(function)
    spaces = variable_spaces(module, function)
    ev = _Evaluator(cfg, du, loops, spaces, params, _ALLOCATORS - defined, bounds.tid_limits if bounds else ())
    stack = _stack or (function.name,)
    done = {} if _done is None else _done
    written: set[str] = set()
    globals_written: set[str] = set()
    unknown_writes: list[int] = []
    observers: list[Observer] = []
    indices: set[str] = set()
    found: list[tuple[int, Mode, str, Affine]] = []
    for o in cfg.linear.ops:
        i = o.instruction
        if isa.find(i) is None:
            unknown_writes.append(o.index)
            observers.append(Observer(o.index, o.line, f"{i.mnemonic} (an instruction the ISA tables do not know)"))
            continue
        indices.update(n.text for x in i.operands for n in isa.operand_names(x) if n.text in _INDICES)
        if why := isa.caching.observes_other_agents(i):
            observers.append(Observer(o.index, o.line, why))
        for operand, mode, space in isa.memory_accesses(i):
            if space in ("surf", "tex") and mode is not Mode.READ:
                unknown_writes.append(o.index)  # a surface is global memory no pointer of ours names
            if space not in ("global", "generic"):
                continue
            value = _address(ev, o.index, operand)
            if space == "generic" and value.base and value.base.space in _NOT_GLOBAL:
                continue
            found.append((o.index, mode, space, value))
            if mode is Mode.READ:
                if i.opcode == "ld" and _polls(cfg, loops, ev, o.index, value):
                    observers.append(Observer(o.index, o.line, f"{i.mnemonic} polls: its loop waits on what it reads"))
            elif value.base and value.base.param:
                written.add(value.base.param)
            elif value.base and value.base.space is Space.GLOBAL and value.base.name:
                globals_written.add(value.base.name)
            else:
                unknown_writes.append(o.index)
        if isa.effects(i) & Effect.CALL:
            hands, unknown, seen = _call(ev, module, o.index, stack, done)
            written |= hands
            observers += seen
            indices.update(_callee_indices(module, o, stack, done))
            if _reads_memory(module, o, done) and _polls(cfg, loops, ev, o.index, None):
                observers.append(Observer(o.index, o.line, f"{i.mnemonic} in a loop its result controls (a poll)"))
            if unknown:
                unknown_writes.append(o.index)
    read_only = frozenset() if unknown_writes else frozenset(params - written)
    accesses = tuple(
        MemoryAccess(
            op,
            cfg.linear.ops[op].line,
            cfg.linear.ops[op].instruction.mnemonic,
            mode,
            space,
            value.base or UNKNOWN,
            Affine(None, value.terms, value.const),
            loop.index if (loop := innermost(loops, cfg.block_of[op])) else None,
            loop.depth if loop else 0,
            _stride(ev, value, loop),
        )
        for op, mode, space, value in found
    )
    return MemoryFacts(
        accesses,
        frozenset(written),
        read_only,
        frozenset(globals_written),
        tuple(unknown_writes),
        tuple(observers),
        frozenset(indices),
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a global load may take the non-coherent (`.nc`) path. `blockers` hold whatever the user declares;
    `aliases` are writes that may reach the load's memory only if pointers alias (lifted by `--noalias`)."""

    blockers: tuple[str, ...]
    aliases: tuple[str, ...]

    def allowed(self, alias_free: bool) -> bool:
        return not self.blockers and (alias_free or not self.aliases)


def non_coherent(facts: MemoryFacts, access: MemoryAccess, instr: ast.Instruction) -> Verdict:
    """May this load read through the non-coherent path: can nothing write its memory while the kernel runs?
    The one rule for `.nc` that the optimizer applies and lint advises."""
    blockers: list[str] = []
    if instr.opcode != "ld" or access.space != "global" or access.mode is not Mode.READ:
        blockers.append("not a plain global load")
    if words := isa.caching.coherent(instr):
        blockers.append(f"ordered/volatile/scoped load (.{' .'.join(sorted(words))}): stays coherent")
    if op := isa.caching.cache_operator(instr):
        blockers.append(f"has cache operator .{op} (the author's choice)")
    param = access.param
    if param is None:
        blockers.append(f"pointer of unknown origin ({access.base}): not provably safe")
    elif param in facts.written_params:
        blockers.append(f"the kernel writes {param}: the load stays coherent")
    if facts.unknown_writes:
        blockers.append("the kernel writes through pointers of unknown origin (or calls code that may)")
    if facts.observers:
        first = facts.observers[0]
        blockers.append(f"the kernel may observe other agents' writes: {first.reason} (line {first.line})")
    aliases = [f"the kernel writes through {p}, which may alias {param}" for p in sorted(facts.written_params)]
    aliases += [
        f"the kernel writes module variable {g}, which may alias {param}" for g in sorted(facts.written_globals)
    ]
    return Verdict(tuple(blockers), tuple(aliases))

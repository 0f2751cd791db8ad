"""Memory facts for a kernel's global (and generic) accesses: where each pointer comes from, how its offset moves
around loops, and which pointer parameters the kernel may write.

Each address is evaluated symbolically through its reaching definitions: `ld.param` of a pointer gives the
parameter as the base; `cvta`, `mov`, `cvt`, `add`/`sub`, `mul`/`shl` by constants and `mad` keep the value affine;
a loop's induction variable becomes a symbol `iv(L<n>:%r)` that grows by its step each trip; anything else
(a load, `%tid.x`, a product of two registers) is an opaque symbol. Read-only is conservative: a store, atomic,
bulk copy or call that may write through a pointer of unknown origin makes no parameter read-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ptxtool import isa
from ptxtool.analysis.cfg import CFG, build_cfg
from ptxtool.analysis.dataflow.liveness import ENTRY, DefUse, def_use
from ptxtool.analysis.loops import Loop, find_loops, innermost
from ptxtool.isa import Effect, Mode
from ptxtool.syntax import ast

UNKNOWN = "unknown"
# Functions without a body in the module that are known not to write through the pointers they are given.
_HARMLESS_EXTERN = frozenset(("vprintf", "malloc", "free", "__assertfail"))
_ALLOCATORS = frozenset(("malloc",))  # their result is fresh memory: it aliases no parameter
_SPACE_WORDS = {".global": "global", ".shared": "shared", ".const": "const", ".local": "local", ".param": "param"}


@dataclass(frozen=True)
class Affine:
    """`base + sum(coefficient * symbol) + const`; base is `param:NAME`, `global:SYM`, `shared`, `local`, `const`,
    `heap` (from malloc), None for a plain number, or UNKNOWN for a pointer of unknown origin."""

    base: str | None = None
    terms: dict[str, int] = field(default_factory=dict)
    const: int = 0

    def __add__(self, other: Affine) -> Affine:
        if self.base and other.base:
            base: str | None = UNKNOWN
        else:
            base = self.base or other.base
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Affine(base, {k: v for k, v in terms.items() if v}, self.const + other.const)

    def scale(self, factor: int) -> Affine:
        """This value times a constant (a scaled pointer is no longer a pointer into its base)."""
        return Affine(
            UNKNOWN if self.base else None, {k: v * factor for k, v in self.terms.items()}, self.const * factor
        )

    def __str__(self) -> str:
        parts = [f"{v}*{k}" if v != 1 else k for k, v in sorted(self.terms.items())]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def _opaque(symbol: str) -> Affine:
    return Affine(None, {symbol: 1})


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """One global or generic access: where (op, line), how (mode, space), from which kernel parameter, the offset
    from that base, the innermost loop around it, and the bytes its address moves per trip of that loop (`stride`
    when a constant; `stride_expr` also when it is an expression over loop-invariant registers)."""

    op: int
    line: int
    mnemonic: str
    mode: Mode
    space: str
    base: str
    param: str | None
    offset: str
    loop: int | None
    stride: int | None
    stride_expr: str | None
    param_read_only: bool | None

    @property
    def in_loop(self) -> bool:
        return self.loop is not None


@dataclass(frozen=True)
class MemoryFacts:
    """Every global/generic access of a kernel, the parameters it may write, those it never writes, and the ops
    that write through (or hand to a call) a pointer of unknown origin."""

    accesses: tuple[MemoryAccess, ...]
    written_params: frozenset[str]
    read_only_params: frozenset[str]
    unknown_writes: tuple[int, ...]


def variable_spaces(module: ast.Module, function: ast.Function) -> dict[str, str]:
    """State space of each variable a function can name: module-level ones and those declared in its body."""
    decls = [i for i in module.items if isinstance(i, ast.Declaration)]
    if function.body is not None:
        decls += [n for n in ast.walk(function.body) if isinstance(n, ast.Declaration)]
    out = {}
    for d in decls:
        space = next((_SPACE_WORDS[a.word] for a in d.attributes if a.word in _SPACE_WORDS), None)
        if space:
            out.update((x.name, space) for x in d.declarators)
    return out


class _Evaluator:
    """Symbolic values of registers at their uses, memoized; cycles and merges become opaque symbols."""

    def __init__(self, cfg: CFG, du: DefUse, loops: tuple[Loop, ...], spaces: dict[str, str], params: set[str]):
        self.cfg, self.du, self.spaces, self.params = cfg, du, spaces, params
        self.loops = sorted(loops, key=lambda loop: -loop.depth)  # innermost first
        self.memo: dict[tuple[int, str], Affine] = {}
        self.busy: set[tuple[int, str]] = set()
        self.steps: dict[str, int | str] = {}  # iv symbol -> step per trip (an int, or an invariant expression)

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
            if space == "global":
                return Affine(f"global:{operand.text}")
            return Affine(space) if space else _opaque(operand.text)  # shared/local/const, or %tid.x
        return _opaque(f"?@{op}")  # a vector or other operand we do not follow

    def register(self, op: int, key: str) -> Affine:
        memo = (op, key)
        if memo in self.memo:
            return self.memo[memo]
        if memo in self.busy:
            return _opaque(f"{key}@{op}")
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
        return _opaque(f"{key}@{op}")

    def _carried(self, loop: Loop, key: str, init_op: int) -> Affine:
        """A register carried around a loop: `init + iv` for an induction variable, else `init`'s base plus an
        unknown that changes every trip."""
        init = self.define(init_op, key)
        iv = next((v for v in loop.induction if v.register == key), None)
        if iv is None:
            return Affine(init.base, {f"{key}@L{loop.index}": 1})
        symbol = f"iv(L{loop.index}:{key})"
        self.steps[symbol] = iv.step
        return init + _opaque(symbol)

    def define(self, op: int, key: str) -> Affine:
        """The value op writes to register key."""
        o = self.cfg.linear.ops[op]
        i = o.instruction
        family = isa.family(i)
        n = len(i.operands)
        if o.defs != (key,) or o.guarded:
            return _opaque(f"{key}@{op}")
        if family == "ld" and "param" in i.modifiers and isinstance(i.operands[1], ast.Address):
            base = i.operands[1].base
            if isinstance(base, ast.Name) and base.text in self.params:
                wide = any(t in i.modifiers for t in ("u64", "b64", "s64"))
                return Affine(f"param:{base.text}") if wide else _opaque(f"param:{base.text}")
            if isinstance(base, ast.Name) and self._returned_by(op, base.text) in _ALLOCATORS:
                return Affine("heap")
        if family in ("mov", "cvta", "cvt") and n == 2:
            return self.operand(op, 1)
        if family == "mapa" and n == 3 and self.operand(op, 1).base == "shared":
            return Affine("shared")  # the same variable in another block of the cluster
        if family in ("add", "sub") and n == 3:
            right = self.operand(op, 2)
            return self.operand(op, 1) + (right if family == "add" else right.scale(-1))
        if family in ("mul", "shl") and n == 3 and "hi" not in i.modifiers:
            a, b = self.operand(op, 1), self.operand(op, 2)
            if family == "shl":
                constant = not b.terms and not b.base and 0 <= b.const < 64
                return a.scale(1 << b.const) if constant else _opaque(f"{key}@{op}")
            return _product(a, b) or _opaque(f"{key}@{op}")
        if family == "mad" and n == 4 and "hi" not in i.modifiers:
            product = _product(self.operand(op, 1), self.operand(op, 2))
            return product + self.operand(op, 3) if product else _opaque(f"{key}@{op}")
        if family == "neg" and n == 2:
            return self.operand(op, 1).scale(-1)
        return _opaque(f"{key}@{op}")

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
    """a * b when one side is a constant; the product of two offsets is one opaque symbol naming both."""
    if not a.terms and not a.base:
        return b.scale(a.const)
    if not b.terms and not b.base:
        return a.scale(b.const)
    if a.base or b.base:
        return None
    return _opaque(f"({a})*({b})")


def _varies(symbol: str, cfg: CFG, loop: Loop) -> bool:
    """Whether a symbol may change from one trip of the loop to the next."""
    if f"iv(L{loop.index}:" in symbol or f"@L{loop.index}" in symbol:
        return True
    return any(cfg.block_of[int(at)] in loop.blocks for at in re.findall(r"@(\d+)", symbol))


def _address(ev: _Evaluator, op: int, operand: ast.Operand) -> Affine:
    if not isinstance(operand, ast.Address):
        return Affine(UNKNOWN)
    o = ev.cfg.linear.ops[op]
    base = operand.base
    if isinstance(base, ast.Name):
        reg = ev.cfg.linear.registers
        key = next((k for k in o.uses if reg[k].name == base.text), None)
        if key is not None:
            value = ev.register(op, key)
        else:
            space = ev.spaces.get(base.text)
            value = Affine(f"global:{base.text}" if space == "global" else space or UNKNOWN)
    else:
        value = Affine(UNKNOWN, const=int(base.value))
    if operand.offset is not None:
        delta = int(operand.offset.value)
        value = value + Affine(const=delta if operand.plus else -delta)
    return value


def _stride(ev: _Evaluator, value: Affine, loop: Loop | None) -> tuple[int | None, str | None]:
    """Bytes the address moves per trip of the loop, as a number when constant and as an expression over
    loop-invariant registers (`8*(4*%rd27)`); (None, None) when it moves in a way that is not affine."""
    if loop is None:
        return None, None
    total = 0
    symbolic = []
    for symbol, coefficient in value.terms.items():
        if symbol.startswith(f"iv(L{loop.index}:") and symbol in ev.steps:
            step = ev.steps[symbol]
            if isinstance(step, int):
                total += coefficient * step
            else:
                symbolic.append(f"{coefficient}*({step})" if coefficient != 1 else step)
        elif _varies(symbol, ev.cfg, loop):
            return None, None
    if symbolic:
        return None, " + ".join(symbolic + ([str(total)] if total else []))
    return total, str(total)


def _call_hazards(ev: _Evaluator, module: ast.Module, op: int) -> tuple[set[str], bool]:
    """Parameters a call may write (pointers handed to it), and whether it may write through unknown pointers."""
    o = ev.cfg.linear.ops[op]
    callee = o.instruction.operands[1] if isinstance(o.instruction.operands[0], ast.ParenList) else None
    callee = callee or o.instruction.operands[0]
    name = callee.text if isinstance(callee, ast.Name) else ""
    body = next((f for f in module.functions if f.name == name), None)
    indirect = any(k is not None for k in o.keys[:2])
    harmless = body is not None and body.body is None and name in _HARMLESS_EXTERN
    written: set[str] = set()
    unknown = indirect or not (harmless or (body is not None and _writes_nothing(body)))
    for prior in ev.cfg.linear.ops[: op + 1]:  # pointers stored into the call's parameters
        i = prior.instruction
        if i.opcode == "st" and "param" in i.modifiers and len(i.operands) == 2 and prior.keys[1]:
            value = ev.register(prior.index, prior.keys[1])
            if value.base and value.base.startswith("param:"):
                written.add(value.base[6:])
            elif value.base == UNKNOWN:
                unknown = True
    return written, unknown


def _writes_nothing(function: ast.Function) -> bool:
    """A callee with a body that stores, atomically updates or copies to no global/generic memory and calls nobody."""
    for i in ast.instructions(function.body) if function.body else ():
        info = isa.find(i)
        if info is None or info.effects & Effect.CALL:
            return False
        if any(m is not Mode.READ and s in ("global", "generic") for _, m, s in isa.memory_accesses(i)):
            return False
    return True


def memory_facts(module: ast.Module, function: ast.Function, cfg: CFG | None = None) -> MemoryFacts:
    """The memory facts of one kernel (or function) with a body."""
    cfg = cfg or build_cfg(function)
    du = def_use(cfg)
    loops = find_loops(cfg, du)
    params = {p.name for p in function.params or ()}
    ev = _Evaluator(cfg, du, loops, variable_spaces(module, function), params)
    written: set[str] = set()
    unknown_writes: list[int] = []
    found: list[tuple[int, Mode, str, Affine]] = []
    for o in cfg.linear.ops:
        i = o.instruction
        for operand, mode, space in isa.memory_accesses(i):
            if space not in ("global", "generic"):
                continue
            value = _address(ev, o.index, operand)
            if space == "generic" and value.base in ("shared", "local", "const", "param", "heap"):
                continue
            found.append((o.index, mode, space, value))
            if mode is not Mode.READ:
                if value.base and value.base.startswith("param:"):
                    written.add(value.base[6:])
                elif value.base is None or value.base == UNKNOWN:
                    unknown_writes.append(o.index)
        if isa.effects(i) & Effect.CALL:
            hands, unknown = _call_hazards(ev, module, o.index)
            written |= hands
            if unknown:
                unknown_writes.append(o.index)
    read_only = frozenset() if unknown_writes else frozenset(params - written)
    accesses = []
    for op, mode, space, value in found:
        loop = innermost(loops, cfg.block_of[op])
        param = value.base[6:] if value.base and value.base.startswith("param:") else None
        accesses.append(
            MemoryAccess(
                op,
                cfg.linear.ops[op].line,
                cfg.linear.ops[op].instruction.mnemonic,
                mode,
                space,
                value.base or UNKNOWN,
                param,
                str(value),
                loop.index if loop else None,
                *_stride(ev, value, loop),
                (param in read_only) if param else None,
            )
        )
    return MemoryFacts(tuple(accesses), frozenset(written), read_only, tuple(unknown_writes))

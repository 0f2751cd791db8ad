"""A function body as one list of operations with names resolved: the form every analysis works on.

Nested `{ }` blocks declare their own registers and labels, which may reuse outer names; each name is resolved
through the scopes in force at its use and given a key that is unique in the function (`%r1` in the outermost
scope, `%r1#3` in nested scope 3). Names that are not declared registers (special registers, symbols, labels,
functions) take no part in data flow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ptxtool import isa
from ptxtool.syntax import ast

_NUMBERED = re.compile(r"(.*?)(\d+)$")


@dataclass(frozen=True, slots=True)
class Register:
    """A declared register: its unique key, name as written, type without the dot, and vector width."""

    key: str
    name: str
    type: str
    vector: int = 1

    @property
    def units(self) -> int:
        """Size in 32-bit registers (predicates: 0; 8- and 16-bit values still take a whole register)."""
        if self.type == "pred":
            return 0
        return max(1, -(-(isa.caching.type_bits(self.type) or 32) // 32)) * self.vector


@dataclass(frozen=True, slots=True)
class Op:
    """One instruction of the body: its node, the register keys it defines and uses, the label keys it may jump
    to, and whether a guard predicate makes its definitions conditional."""

    index: int
    instruction: ast.Instruction
    defs: tuple[str, ...]
    uses: tuple[str, ...]
    targets: tuple[str, ...] = ()
    guarded: bool = False
    keys: tuple[str | None, ...] = ()  # per operand: the register key of a plain register operand, else None

    @property
    def line(self) -> int:
        return self.instruction.line


@dataclass(frozen=True, slots=True)
class Linear:
    """A function's operations in order, where each label points (`labels[key]` = index of the next operation,
    len(ops) for a label at the end), its registers, and `.branchtargets`/`.calltargets` lists by label key."""

    function: ast.Function
    ops: tuple[Op, ...]
    labels: dict[str, int]
    registers: dict[str, Register]
    target_lists: dict[str, tuple[str, ...]]


class _Scope:
    """Names declared in one block; ranges such as `%r<10>` kept as prefix -> count."""

    def __init__(self, ident: int, parent: _Scope | None) -> None:
        self.ident = ident
        self.parent = parent
        self.exact: dict[str, Register] = {}
        self.ranges: dict[str, Register] = {}  # prefix -> template register (key is prefix-based)
        self.counts: dict[str, int] = {}
        self.labels: set[str] = set()
        self.found: dict[str, Register | None] = {}  # filled once the declarations of this scope and above are in

    def key(self, name: str) -> str:
        return name if self.ident == 0 else f"{name}#{self.ident}"

    def find(self, name: str) -> Register | None:
        if name in self.found:
            return self.found[name]
        self.found[name] = found = self._find(name)
        return found

    def _find(self, name: str) -> Register | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.exact:
                return scope.exact[name]
            numbered = _NUMBERED.match(name)
            if numbered and numbered[1] in scope.ranges and int(numbered[2]) < scope.counts[numbered[1]]:
                template = scope.ranges[numbered[1]]
                return Register(scope.key(name), name, template.type, template.vector)
            scope = scope.parent
        return None

    def label(self, name: str) -> str:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.labels:
                return scope.key(name)
            scope = scope.parent
        return name


def _reg_type(attributes: tuple[ast.Attribute, ...]) -> tuple[str, int]:
    words = [a.word.lstrip(".") for a in attributes]
    vector = next((int(w[1:]) for w in words if w in ("v2", "v4", "v8")), 1)
    kind = next((w for w in words if isa.caching.type_bits(w)), "b32")
    return kind, vector


class _Builder:
    def __init__(self, function: ast.Function) -> None:
        self.function = function
        self.ops: list[Op] = []
        self.labels: dict[str, int] = {}
        self.registers: dict[str, Register] = {}
        self.target_lists: dict[str, tuple[str, ...]] = {}
        self.scopes = 0

    def declare(self, scope: _Scope, attributes: tuple[ast.Attribute, ...], declarator: ast.Declarator) -> None:
        kind, vector = _reg_type(attributes)
        if declarator.count is not None:
            scope.ranges[declarator.name] = Register(scope.key(declarator.name), declarator.name, kind, vector)
            scope.counts[declarator.name] = int(declarator.count.value)
        else:
            scope.exact[declarator.name] = Register(scope.key(declarator.name), declarator.name, kind, vector)

    def names(self, scope: _Scope, operand: ast.Operand) -> list[str]:
        kind = type(operand)
        if kind is ast.Immediate:  # the common cases first, without operand_names' generator
            return []
        if kind is ast.Name and operand.text != "_":
            reg = scope.find(operand.text)
            if reg is None:
                return []
            self.registers.setdefault(reg.key, reg)
            return [reg.key]
        out = []
        for name in isa.operand_names(operand):
            reg = scope.find(name.text)
            if reg is not None:
                self.registers.setdefault(reg.key, reg)
                out.append(reg.key)
        return out

    def block(self, block: ast.Block, parent: _Scope | None) -> None:
        scope = _Scope(self.scopes, parent)
        self.scopes += 1
        for s in block.statements:  # declarations and labels are visible in the whole block
            if isinstance(s, ast.Declaration) and s.has(".reg"):
                for d in s.declarators:
                    self.declare(scope, s.attributes, d)
            elif isinstance(s, ast.Label):
                scope.labels.add(s.name)
        pending: str | None = None
        for s in block.statements:
            if isinstance(s, ast.Label):
                self.labels[scope.key(s.name)] = len(self.ops)
                pending = scope.key(s.name)
                continue
            if isinstance(s, ast.Directive) and s.word in (".branchtargets", ".calltargets") and pending:
                self.target_lists[pending] = tuple(scope.label(op.text) for g in s.args for op in g)
            elif isinstance(s, ast.Instruction):
                self.instruction(s, scope)
            elif isinstance(s, ast.Block):
                self.block(s, scope)
            pending = None

    def instruction(self, i: ast.Instruction, scope: _Scope) -> None:
        defs: list[str] = []
        uses: list[str] = []
        targets: list[str] = []
        for operand, role in isa.operand_roles(i):
            if role is isa.Role.TARGET:
                targets.extend(scope.label(n.text) for n in isa.operand_names(operand))
            elif role is isa.Role.DEF and not isinstance(operand, ast.Address):
                defs.extend(self.names(scope, operand))
            elif role is isa.Role.DEF_USE:
                both = self.names(scope, operand)
                defs.extend(both)
                uses.extend(both)
            else:
                uses.extend(self.names(scope, operand))
        if i.guard is not None:
            uses.extend(self.names(scope, i.guard.predicate))
        keys = tuple(self.key(scope, op) for op in i.operands)
        self.ops.append(Op(len(self.ops), i, tuple(defs), tuple(uses), tuple(targets), i.guard is not None, keys))

    def key(self, scope: _Scope, operand: ast.Operand) -> str | None:
        reg = scope.find(operand.text) if isinstance(operand, ast.Name) else None
        return reg.key if reg else None


def linearize(function: ast.Function) -> Linear:
    """Resolve a function body's scopes into a Linear form (an empty one for a declaration without a body)."""
    builder = _Builder(function)
    root = _Scope(0, None)  # `.reg` parameters of a `.func`, named like the body's own registers
    for p in (*(function.returns or ()), *(function.params or ())):
        if any(a.word == ".reg" for a in p.attributes):
            root.exact[p.name] = Register(p.name, p.name, *_reg_type(p.attributes))
    if function.body is not None:
        builder.block(function.body, root)
    return Linear(function, tuple(builder.ops), builder.labels, builder.registers, builder.target_lists)

"""The PTX syntax tree: small frozen dataclasses, children in tuples, edited with `dataclasses.replace` (made by
`records`, which compiles their methods in one go: the same classes `@dataclass(frozen=True, slots=True)` makes).

Nodes keep every token's spelling (`0f3F800000` stays so) and the comments that belong to them, never source text:
the printer rebuilds the file from these fields alone. Positions (`line`, `column`) are 1-based, 0 for nodes made
by a pass, and take no part in equality.
"""

from __future__ import annotations

from collections.abc import Iterator

from ptxtool.records import field, field_names, finish, is_record, record

# ---------------------------------------------------------------- operands


class Name(metaclass=record):
    """A register, special register, symbol, label or the sink `_` (PTX does not tell them apart by spelling)."""

    text: str


class Immediate(metaclass=record):
    """A number kept as written: `0x1F`, `017`, `0b101`, `1U`, `-4`, `0f3F800000`, `1.5`."""

    text: str

    @property
    def value(self) -> int | float:
        return literal_value(self.text)


class String(metaclass=record):
    """A double-quoted string, escapes kept as written."""

    text: str


class Not(metaclass=record):
    """A negated predicate operand: `!%p`."""

    name: Name


class PredPair(metaclass=record):
    """A destination with a predicate beside it, written `p|q` (setp, elect.sync) or `{d0, d1}|p` (tex, tld4)."""

    first: Name | Vector
    second: Name


class SymbolOffset(metaclass=record):
    """A symbol plus a constant expression: `table+4`, `table+4*2` (`+` is kept before a negative one: `x+-4`)."""

    symbol: Name
    offset: Operand


class Address(metaclass=record):
    """A memory operand `[base]`, `[base+imm]`, `[base-imm]`, `[base+3*64]` (the offset a constant expression), or a
    multi-part one `[tex, sampler, {x, y}]`."""

    base: Name | Immediate
    offset: Operand | None = None
    plus: bool = True
    rest: tuple[Operand, ...] = ()


class Vector(metaclass=record):
    """A brace list of operands: `{%f1, %f2, _}`."""

    items: tuple[Operand, ...]


class ParenList(metaclass=record):
    """A parenthesised operand list, as in `call (ret), f, (a, b)`; may be empty."""

    items: tuple[Operand, ...]


class Unary(metaclass=record):
    """A constant expression `-x`, `!x` or `~x` (a minus before a literal is folded into it: `-3` is a literal)."""

    op: str
    operand: Operand

    @property
    def value(self) -> int | float:
        return constant_value(self)


class Binary(metaclass=record):
    """A run of C binary operators of one precedence, left to right: `a*b`, `1<<20`, `1+2-3` (operands (1, 2, 3),
    ops ("+", "-")). A flat chain is one node, however long."""

    operands: tuple[Operand, ...]
    ops: tuple[str, ...]

    @property
    def value(self) -> int | float:
        return constant_value(self)


class Paren(metaclass=record):
    """A parenthesised constant expression `(a+b)`."""

    inner: Operand

    @property
    def value(self) -> int | float:
        return constant_value(self)


class Conditional(metaclass=record):
    """A constant expression `c?a:b`."""

    condition: Operand
    if_true: Operand
    if_false: Operand

    @property
    def value(self) -> int | float:
        return constant_value(self)


Operand = (
    Name
    | Immediate
    | String
    | Not
    | PredPair
    | SymbolOffset
    | Address
    | Vector
    | ParenList
    | Unary
    | Binary
    | Paren
    | Conditional
)

# ---------------------------------------------------------------- initializers and attributes


class Generic(metaclass=record):
    """`generic(sym)` or `generic(sym)+4` in an initializer: the generic address of a variable."""

    symbol: Name
    offset: Operand | None = None


class Mask(metaclass=record):
    """`0xFF(sym)`, `0xFF00(sym+4)`, `0xFF(generic(sym))` in an initializer: some bytes of an address."""

    mask: Immediate
    address: Name | SymbolOffset | Generic


class FieldInit(metaclass=record):
    """`filter_mode = nearest` inside a `.samplerref`/`.texref` initializer."""

    name: str
    value: Name | Immediate


class InitList(metaclass=record):
    """A brace initializer, possibly nested: `{1, 2, {3, 4}}`."""

    items: tuple[Initializer, ...]


_INIT_ITEMS = InitList.__dict__["items"]  # the slot holding an InitList's items (a Literals' once decoded)


class Literals(InitList):
    """A brace list of literals only, `{1, 2, -3, 0f3F800000}`, held as one string without blanks
    (`1,2,-3,0f3F800000`), not a node per element: a table of a million bytes parses and prints without a million
    nodes. It is an InitList: `items` decodes the Immediates on first use, and it equals (and hashes as) the
    InitList of the same items; `dataclasses.replace` with new items gives that InitList."""

    __slots__ = ("text",)

    def __new__(cls, text: str = "", items: tuple[Initializer, ...] | None = None) -> InitList:
        return InitList(items) if items is not None else object.__new__(cls)

    def __init__(self, text: str = "", items: None = None) -> None:
        object.__setattr__(self, "text", text)

    @property
    def items(self) -> tuple[Immediate, ...]:  # type: ignore[override]
        try:
            return _INIT_ITEMS.__get__(self)
        except AttributeError:
            texts = self.text.split(",")
            nodes = {text: Immediate(text) for text in set(texts)}  # a table of bytes has at most 256 distinct
            items = tuple(map(nodes.__getitem__, texts))
            _INIT_ITEMS.__set__(self, items)
            return items

    def __eq__(self, other: object) -> bool:
        if other.__class__ is Literals:
            return self.text == other.text
        return self.items == other.items if isinstance(other, InitList) else NotImplemented

    def __hash__(self) -> int:
        return hash((self.items,))  # as InitList's

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # only here: a run that changes no node never imports dataclasses

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        return f"Literals({self.text!r})"

    def __reduce__(self) -> tuple:
        return Literals, (self.text,)


Initializer = Operand | Name | SymbolOffset | Generic | Mask | FieldInit | InitList


class Attribute(metaclass=record):
    """A `.word` before a declared name: a state space, type, vector width, linkage, `.align 16`, `.ptr`,
    `.attribute(.managed)`."""

    word: str
    number: Immediate | None = None
    args: tuple[Attribute | Name | Immediate, ...] | None = None
    glued: bool = field(default=False, compare=False)  # written with no blank before it: the `.b16` of `.reg.b16`


class Declarator(metaclass=record):
    """One declared name: `%r<10>`, `buf[2][16]`, `x = 1`. `dims` holds the array sizes, None for `[]`."""

    name: str
    count: Immediate | None = None
    dims: tuple[Operand | None, ...] = ()
    init: Initializer | None = None


class Param(metaclass=record):
    """A function parameter: `.param .u64 .ptr .global .align 16 out`."""

    attributes: tuple[Attribute, ...]
    name: str
    dims: tuple[Operand | None, ...] = ()


# ---------------------------------------------------------------- statements (each owns its comments)


class Owner(metaclass=record):
    """What every statement has besides its syntax: the comments it owns and where it stood (keyword-only fields,
    after the syntax ones): `leading` comments on lines above it, `trailing` ones on its line."""

    leading: tuple[str, ...] = field(default=(), kw_only=True)
    trailing: tuple[str, ...] = field(default=(), kw_only=True)
    line: int = field(default=0, compare=False, kw_only=True)
    column: int = field(default=0, compare=False, kw_only=True)
    end_line: int = field(default=0, compare=False, kw_only=True)


class PerfDirective(Owner, metaclass=record):
    """A performance directive after a function's parameters, on a line of its own: `.maxntid 256, 1, 1`."""

    word: str
    values: tuple[Immediate, ...] = ()


class Guard(metaclass=record):
    """`@%p` or `@!%p` before an instruction."""

    predicate: Name
    negated: bool = False


class Instruction(Owner, metaclass=record):
    """`@guard opcode.mod.mod operands;` — modifiers in written order, without their dots."""

    opcode: str
    modifiers: tuple[str, ...] = ()
    operands: tuple[Operand, ...] = ()
    guard: Guard | None = None

    @property
    def mnemonic(self) -> str:
        """The opcode with its modifiers as written: `ld.global.nc.v4.f32`."""
        return ".".join((self.opcode, *self.modifiers))


class Label(Owner, metaclass=record):
    """`name:` — a branch target, or the name of a following `.branchtargets`/`.callprototype`."""

    name: str


class Declaration(Owner, metaclass=record):
    """Variables or registers: `.global .align 4 .u32 table[4] = {...};`, `.reg .b32 %r<10>, %t;`."""

    attributes: tuple[Attribute, ...]
    declarators: tuple[Declarator, ...]

    def has(self, word: str) -> bool:
        """Whether an attribute such as `.reg` or `.shared` is present."""
        return any(a.word == word for a in self.attributes)


class Directive(Owner, metaclass=record):
    """A directive of fixed shape: `.version`, `.target`, `.address_size`, `.file`, `.loc`, `.pragma`, `.alias`,
    `.branchtargets`, `.calltargets`, and the data items of a debug section (`.b8 1, 2`).

    `args` holds comma-separated groups of blank-separated operands: `.loc 1 15 3, inlined_at 1 52 7` is
    `((1, 15, 3), (inlined_at, 1, 52, 7))`.
    """

    word: str
    args: tuple[tuple[Operand | Difference, ...], ...] = ()
    semicolon: bool = False


class Difference(metaclass=record):
    """`a-b` between two labels in debug-section data."""

    left: Name
    right: Name


class CallPrototype(Owner, metaclass=record):
    """`name: .callprototype (.param .b32 _) _ (.param .b32 _) .noreturn;` — the label is the statement before it;
    `directives` are those after the parameters (`.noreturn`, `.abi_preserve 4`)."""

    returns: tuple[Param, ...] | None
    name: str
    params: tuple[Param, ...] | None
    directives: tuple[PerfDirective, ...] = ()


class Block(Owner, metaclass=record):
    """`{ statements }`: a function body or a nested scope with its own declarations and labels.
    `footer` holds the comments between the last statement and the closing brace."""

    statements: tuple[Statement, ...]
    footer: tuple[str, ...] = ()
    end_column: int = field(default=0, compare=False, kw_only=True)


class Data(Owner, metaclass=record):
    """A run of debug-section data lines and labels held as one string, not a node per line (a `-G` file has tens of
    thousands): `text` is their canonical form, one `.b8 1, 2` or `name:` a line; `statements` gives the Directive
    and Label nodes they stand for, with their positions when parsed (`source`, the text as written, keeps them)."""

    text: str
    source: str = field(default="", compare=False, repr=False)

    @property
    def statements(self) -> tuple[Directive | Label, ...]:
        import re

        from ptxtool.syntax.lexer import SECTION_LINE

        if self.source:
            text, line, line_start = self.source, self.line, 1 - self.column
        else:
            text, line, line_start = self.text, 0, None
        names: dict[str, Operand | Difference] = {}
        out: list[Directive | Label] = []
        counted = 0
        for m in re.finditer(SECTION_LINE, text):
            start = m.start()
            newlines = text.count("\n", counted, start)
            if newlines and line_start is not None:
                line += newlines
                line_start = text.rfind("\n", counted, start) + 1
            counted = start
            column = 0 if line_start is None else start - line_start + 1
            word, values, label = m.groups()
            if label is not None:
                out.append(Label(label, line=line, column=column, end_line=line))
                continue
            args = []
            for value in values.split(","):
                value = value.strip()
                if " " in value or "\t" in value:  # `a + 4`, `- 1`: the value the grammar reads from the tokens
                    value = value.replace(" ", "").replace("\t", "")
                node = names.get(value)
                if node is None:
                    node = names[value] = _section_value(value)
                args.append((node,))
            out.append(Directive(word, tuple(args), line=line, column=column, end_line=line))
        return tuple(out)


def _section_value(text: str) -> Operand | Difference:
    """The node of one value of a Data line (lexer._SECTION_VALUE's forms): `12`, `-1`, `name`, `name+4`, `a-b`."""
    if text[0].isdigit() or text[0] == "-":
        return Immediate(text)
    if "+" in text:
        symbol, offset = text.split("+")
        return SymbolOffset(Name(symbol), Immediate(offset))
    if "-" in text:
        left, right = text.split("-")
        return Difference(Name(left), Name(right))
    return Name(text)


Statement = Instruction | Label | Declaration | Directive | CallPrototype | Block | Data


class Function(Owner, metaclass=record):
    """`.entry` (a kernel) or `.func`, with parameter lists (None when written without parentheses),
    performance directives, and a body (None for a declaration ending in `;`)."""

    kind: str
    name: str
    attributes: tuple[Attribute, ...] = ()
    returns: tuple[Param, ...] | None = None
    params: tuple[Param, ...] | None = None
    directives: tuple[PerfDirective, ...] = ()
    body: Block | None = None
    kind_attributes: tuple[Attribute, ...] = ()  # written after `.func`: `.attribute(.unified(...))`

    @property
    def is_kernel(self) -> bool:
        return self.kind == ".entry"


class Section(Owner, metaclass=record):
    """`.section .debug_info { .b8 1, 2 ... }`: debug data; the body's statements are Directives and Labels, or (a
    body of nothing else, as compilers write it) one Data holding them all; `ast.expanded` gives either as nodes."""

    name: str
    body: Block


ModuleItem = Directive | Declaration | Function | Section


class Module(metaclass=record):
    """A PTX file: its top-level items and the comments after the last one."""

    items: tuple[ModuleItem, ...]
    footer: tuple[str, ...] = ()

    @property
    def functions(self) -> tuple[Function, ...]:
        return tuple(i for i in self.items if isinstance(i, Function))

    @property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.is_kernel and f.body is not None)

    def directive(self, word: str) -> Directive | None:
        """The first module-level directive such as `.version` or `.target`."""
        return next((i for i in self.items if isinstance(i, Directive) and i.word == word), None)

    @property
    def version(self) -> str | None:
        d = self.directive(".version")
        return d.args[0][0].text if d else None

    @property
    def targets(self) -> tuple[str, ...]:
        d = self.directive(".target")
        return tuple(group[0].text for group in d.args) if d else ()


NODE_TYPES: tuple[type, ...] = (
    Name,
    Immediate,
    String,
    Not,
    PredPair,
    SymbolOffset,
    Address,
    Vector,
    ParenList,
    Unary,
    Binary,
    Paren,
    Conditional,
    Generic,
    Mask,
    FieldInit,
    InitList,
    Literals,
    Attribute,
    Declarator,
    Param,
    PerfDirective,
    Guard,
    Instruction,
    Label,
    Declaration,
    Directive,
    Data,
    Difference,
    CallPrototype,
    Block,
    Function,
    Section,
    Module,
)
finish((Owner, *(c for c in NODE_TYPES if is_record(c))))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def children(node: object) -> Iterator[object]:
    """The child nodes of a node, in field order, found from its dataclass fields (a Data's: the statements it
    stands for, so that a walk sees every name a debug section refers to)."""
    if type(node) is Data:
        yield from node.statements
        return
    names = _FIELD_NAMES.get(type(node))
    if names is None:  # dataclasses.fields() per node was most of a walk's time
        names = _FIELD_NAMES[type(node)] = field_names(type(node))
    for name in names:
        value = getattr(node, name)
        if isinstance(value, tuple):
            for v in value:
                if isinstance(v, tuple):
                    yield from (x for x in v if isinstance(x, NODE_TYPES))
                elif isinstance(v, NODE_TYPES):
                    yield v
        elif isinstance(value, NODE_TYPES):
            yield value


def walk(node: object) -> Iterator[object]:
    """Every node under `node`, itself first, depth first in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def expanded(statements: tuple[Statement, ...]) -> Iterator[Statement]:
    """Statements with each Data replaced by the Directives and Labels it stands for."""
    for s in statements:
        if type(s) is Data:
            yield from s.statements
        else:
            yield s


def instructions(block: Block) -> Iterator[Instruction]:
    """The instructions of a body, nested scopes included, in source order (without recursion: scopes may nest
    as deep as ptxas allows, past Python's recursion limit)."""
    stack = [iter(block.statements)]
    while stack:
        for s in stack[-1]:
            if isinstance(s, Instruction):
                yield s
            elif isinstance(s, Block):
                stack.append(iter(s.statements))
                break
        else:
            stack.pop()


def _truncated(a: int, b: int) -> tuple[int, int]:
    """C's integer division, which truncates toward zero, and its remainder."""
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return quotient, a - b * quotient


_C_OPERATORS = {
    "*": lambda a, b: a * b,
    "/": lambda a, b: _truncated(a, b)[0] if isinstance(a, int) and isinstance(b, int) else a / b,
    "%": lambda a, b: _truncated(int(a), int(b))[1],
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b,
    "^": lambda a, b: a ^ b,
    "|": lambda a, b: a | b,
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)),
}


def displacement(address: Address) -> int:
    """The integer an address adds to its base (`[r+8]`: 8, `[r-8]`: -8, `[r]`: 0); ValueError as constant_value."""
    return int(constant_value(address.offset)) * (1 if address.plus else -1) if address.offset else 0


def constant_value(node: Operand) -> int | float:
    """The value of a constant expression, C rules on 64-bit integers (PTX ISA "Constant Expressions"); ValueError
    if it names a symbol or register, divides by zero or shifts by a negative amount."""
    kind = type(node)
    if kind is Immediate:
        return literal_value(node.text)
    if kind is Paren:
        return constant_value(node.inner)
    if kind is Unary:
        value = constant_value(node.operand)
        result = -value if node.op == "-" else int(not value) if node.op == "!" else ~int(value)
    elif kind is Conditional:
        return constant_value(node.if_true if constant_value(node.condition) else node.if_false)
    elif kind is Binary:
        result = constant_value(node.operands[0])
        for op, operand in zip(node.ops, node.operands[1:], strict=True):
            try:
                result = _C_OPERATORS[op](result, constant_value(operand))
            except (ZeroDivisionError, ValueError, TypeError, OverflowError) as error:
                raise ValueError(f"constant expression cannot be evaluated: {error}") from None
    else:
        raise ValueError(f"not a constant: {node}")
    if isinstance(result, int):
        result = (result + (1 << 63)) % (1 << 64) - (1 << 63)  # 64-bit two's complement, as ptxas computes
    return result


def literal_value(text: str) -> int | float:
    """The value of a PTX numeric literal as written (integers in any base, `0f`/`0d` bit patterns, decimals)."""

    neg = text.startswith("-")
    body = text[1:] if neg else text
    if body[:2] in ("0f", "0F", "0d", "0D"):
        import struct  # here: fmt reads no literal's value, and never imports struct

        value: int | float = struct.unpack(">f" if body[1] in "fF" else ">d", bytes.fromhex(body[2:]))[0]
    else:
        digits = body.rstrip("uU")
        if digits[:2] in ("0x", "0X"):
            value = int(digits[2:], 16)
        elif digits[:2] in ("0b", "0B"):
            value = int(digits[2:], 2)
        elif any(c in digits for c in ".eE"):
            value = float(digits)
        elif len(digits) > 1 and digits[0] == "0":
            value = int(digits, 8)
        else:
            value = int(digits)
    return -value if neg else value

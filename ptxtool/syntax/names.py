"""Kernel names as people write them: an Itanium C++ ABI demangler (the subset kernel symbols use) and the one
matcher every command uses, so `hadd2`, `ns::scale<float>` and `_Z5hadd2P7__half2i` all name the same kernel."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ptxtool.errors import InputError

TARGET = re.compile(r"sm_(\d+)([af]?)")  # a GPU target as PTX, ptxas and nvcc spell it: sm_90, sm_90a, sm_100f


def target_number(text: str) -> int | None:
    """The SM number of a target name (`sm_90a` -> 90); None when it is not one."""
    match = TARGET.fullmatch(text)
    return int(match.group(1)) if match else None


_BUILTIN = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
_BUILTIN_D = {"Dh": "half", "Df": "decimal32", "Dd": "decimal64", "Dn": "decltype(nullptr)", "Ds": "char16_t"}
_BUILTIN_D |= {"Di": "char32_t", "Du": "char8_t", "DF16_": "_Float16"}
_STD = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string"}
_LITERAL_SUFFIX = {"j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}


class _Fail(Exception):
    """Not a name this demangler reads: the caller shows the mangled name as it is."""


@dataclass(frozen=True, slots=True)
class Demangled:
    """A demangled function name: `base` (`scale`), `qualified` (`ns::scale<float>`), `signature` (with parameters)."""

    base: str
    qualified: str
    signature: str


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0
        self.subs: list[str] = []
        self.params: list[str] = []

    def peek(self, n: int = 1) -> str:
        return self.text[self.at : self.at + n]

    def take(self, prefix: str) -> bool:
        if self.text.startswith(prefix, self.at):
            self.at += len(prefix)
            return True
        return False

    def need(self, prefix: str) -> None:
        if not self.take(prefix):
            raise _Fail(f"expected {prefix!r} at {self.at}")

    def number(self) -> int:
        start = self.at
        while self.peek().isdigit():
            self.at += 1
        if start == self.at:
            raise _Fail("expected a number")
        return int(self.text[start : self.at])

    def seq_id(self, end: str) -> int:
        """`_` is 0, `<base-36>_` is that plus one (substitutions and template parameters)."""
        if self.take(end):
            return 0
        start = self.at
        while self.peek() and self.peek() != end:
            self.at += 1
        value = int(self.text[start : self.at], 36)
        self.need(end)
        return value + 1

    # ---------------------------------------------------------------- names

    def encoding(self, with_return: bool = True) -> Demangled:
        """A name and, for a function, its parameter types (the return type first after template arguments)."""
        qualified, template = self.name()
        types: list[str] = []
        while self.at < len(self.text) and self.peek() not in ("E", "."):  # `.constprop.0`: a clone suffix
            types.append(self.type())
        if not types:  # a variable
            return Demangled(_base(qualified), qualified, qualified)
        returns, params = (f"{types[0]} ", types[1:]) if template else ("", types)
        returns = returns if with_return else ""
        shown = "" if params in ([], ["void"]) else ", ".join(params)
        return Demangled(_base(qualified), qualified, f"{returns}{qualified}({shown})")

    def source_name(self) -> str:
        length = self.number()
        name = self.text[self.at : self.at + length]
        if len(name) != length:
            raise _Fail("name runs past the end")
        self.at += length
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def unqualified(self) -> str:
        if self.peek().isdigit():
            name = self.source_name()
            while self.take("B"):  # ABI tags
                name += f"[abi:{self.source_name()}]"
            return name
        if self.take("Ul"):  # a lambda's closure type: {lambda(params)#n}
            params = self.types_until("E")
            number = self.seq_id("_")
            shown = "" if params == ["void"] else ", ".join(params)
            return f"{{lambda({shown})#{number + 1}}}"
        if self.take("Ut"):
            return f"{{unnamed type#{self.seq_id('_') + 1}}}"
        if self.peek() in ("C", "D") and self.peek(2)[1:].isdigit():
            raise _Fail("constructors and destructors are not kernels")
        raise _Fail(f"unknown name at {self.at}")

    def name(self) -> tuple[str, bool]:
        """A name and whether it ends in template arguments (then the function type starts with its return type)."""
        if self.take("N"):
            while self.peek() in ("K", "V", "r"):
                self.at += 1
            parts = ""
            template = False
            while not self.take("E"):
                if self.peek() == "S" and not parts:
                    parts, template = self.substitution(), False
                    continue
                if self.peek() == "I":
                    self.subs.append(parts)
                    parts += self.template_args()
                    template = True
                elif self.peek() == "T":
                    parts = self.template_param()
                else:
                    parts = f"{parts}::{self.unqualified()}" if parts else self.unqualified()
                    template = False
                if self.peek() != "E":
                    self.subs.append(parts)
            return parts, template
        if self.take("Z"):  # a local entity: `outer(params)::name`
            outer = self.encoding(with_return=False)
            self.need("E")
            inner, template = self.name()
            return f"{outer.signature}::{inner}", template
        std = self.take("St")
        base = ("std::" if std else "") + self.unqualified()
        if self.peek() == "I":
            self.subs.append(base)
            return base + self.template_args(), True
        return base, False

    def substitution(self) -> str:
        for key, value in _STD.items():
            if self.take(key):
                if key == "St":
                    return f"std::{self.unqualified()}"
                return value
        self.need("S")
        index = self.seq_id("_")
        if index >= len(self.subs):
            raise _Fail("substitution out of range")
        return self.subs[index]

    def template_param(self) -> str:
        self.need("T")
        index = self.seq_id("_")
        if index >= len(self.params):
            raise _Fail("template parameter out of range")
        return self.params[index]

    def template_args(self) -> str:
        self.need("I")
        args = []
        while not self.take("E"):
            args.append(self.template_arg())
        self.params = args
        text = ", ".join(args)
        return f"<{text}{' ' if text.endswith('>') else ''}>"

    def template_arg(self) -> str:
        if self.take("L"):
            if self.take("_Z"):
                name, _ = self.name()
                self.need("E")
                return name
            kind = self.peek()
            type_ = self.type()
            negative = self.take("n")
            value = self.number()
            self.need("E")
            if kind == "b":
                return "true" if value else "false"
            text = f"{'-' if negative else ''}{value}"
            return text + _LITERAL_SUFFIX.get(kind, "") if kind in _BUILTIN else f"({type_}){text}"
        if self.take("J"):
            packed = []
            while not self.take("E"):
                packed.append(self.template_arg())
            return ", ".join(packed)
        if self.take("X"):  # only the simplest expression: a template parameter
            value = self.template_param()
            self.need("E")
            return value
        return self.type()

    # ---------------------------------------------------------------- types

    def types_until(self, end: str) -> list[str]:
        out = []
        while not self.take(end):
            out.append(self.type())
        return out

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN:
            self.at += 1
            return _BUILTIN[c]
        for key, value in _BUILTIN_D.items():
            if self.take(key):
                return value
        if c in "PRO":
            self.at += 1
            inner = self.type()
            text = inner + {"P": "*", "R": "&", "O": "&&"}[c]
        elif c in "KVr":
            qualifiers = []
            while self.peek() in ("K", "V", "r"):
                qualifiers.append({"K": "const", "V": "volatile", "r": "restrict"}[self.peek()])
                self.at += 1
            inner = self.type()
            text = f"{inner} {' '.join(reversed(qualifiers))}"
        elif c == "T":
            text = self.template_param()
            if self.peek() == "I":
                self.subs.append(text)
                text += self.template_args()
        elif c == "S" and not self.text.startswith("St", self.at):
            text = self.substitution()
            if self.peek() == "I":
                text += self.template_args()
            else:
                return text  # a substitution is not itself added again
        elif c == "A":
            self.at += 1
            size = self.number() if self.peek().isdigit() else ""
            self.need("_")
            text = f"{self.type()} [{size}]"
        elif c == "F":
            self.at += 1
            self.take("Y")
            returns, *params = self.types_until("E")
            text = f"{returns} ({', '.join(p for p in params if p != 'void')})"
        elif self.take("Dp"):  # a pack expansion: its pattern
            return self.type()
        elif c == "D" and self.peek(2) == "Dv":
            self.at += 2
            count = self.number()
            self.need("_")
            text = f"{self.type()} __vector({count})"
        elif c.isdigit() or c in "NS" or (c == "U" and self.peek(2) == "Ut"):
            text, _ = self.name()
        else:
            raise _Fail(f"unknown type code {c!r} at {self.at}")
        self.subs.append(text)
        return text


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> Demangled | None:
    """The C++ reading of an Itanium-mangled function symbol (`_Z...`); None for plain names and for what this
    subset does not read (then show the symbol as it is)."""
    if not symbol.startswith("_Z"):
        return None
    reader = _Reader(symbol)
    reader.at = 2
    try:
        found = reader.encoding()
    except (_Fail, ValueError, IndexError):
        return None
    return found if reader.at == len(symbol) or symbol[reader.at] == "." else None


def _base(qualified: str) -> str:
    """The last component's name without its template arguments (`ns::f<a::b>` -> `f`)."""
    depth, cut = 0, len(qualified)
    for i, ch in enumerate(qualified):
        if ch == "<":
            if depth == 0:
                cut = i
                break
            depth += 1
    head = qualified[:cut]
    return head.rsplit("::", 1)[-1]


def display(symbol: str) -> str:
    """A name for reports: the symbol, with its demangled signature beside it when it is a C++ name."""
    d = demangle(symbol)
    return f"{symbol} ({d.signature})" if d else symbol


def spellings(symbol: str) -> tuple[str, ...]:
    """Every way a user may name a symbol: as it is, and for C++ the base name, qualified name and signature."""
    d = demangle(symbol)
    return (symbol, d.base, d.qualified, d.signature) if d else (symbol,)


def matches(symbol: str, patterns: Sequence[str]) -> bool:
    """Whether any glob names the symbol in any of its spellings (`hadd2`, `_Z5hadd2*` both match `_Z5hadd2...`)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns for name in spellings(symbol))


def find(symbols: Sequence[str], wanted: str) -> list[str]:
    """The symbols `wanted` names: the exact symbol when there is one, else each whose C++ spellings include it."""
    if wanted in symbols:
        return [wanted]
    return [s for s in symbols if wanted in spellings(s)[1:]]


def choose_function(functions: Sequence, wanted: str | None, path: str):
    """The function (anything with `.name`) a `--kernel` option names, or the only one; InputError saying which
    there are otherwise."""
    names = [f.name for f in functions]
    if wanted is None:
        if len(functions) == 1:
            return functions[0]
        what = "several functions: choose one with --kernel" if functions else ""
    else:
        found = find(names, wanted)
        if len(found) == 1:
            return functions[names.index(found[0])]
        what = f"{wanted!r} names several functions: {', '.join(found)}" if found else f"no function named {wanted!r}"
    if not functions:
        raise InputError.at(path, "no kernel or function with a body to draw")
    raise InputError.at(path, f"{what} (functions with bodies: {', '.join(names)})")

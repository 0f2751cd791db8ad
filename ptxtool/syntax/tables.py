"""The grammar as plain data: Lark compiles grammar/ptx.lark into LALR tables, which are kept in a cache file so
that a run loads them with marshal (no import of Lark, pickle or hashlib: start-up is a large part of every short
command).

The cache file holds the grammar's text and this module's beside the tables, and is used only when both match; a
missing, stale or unreadable one is rebuilt and rewritten. What the driver needs of the rules, and the states where a
statement may start, are stored as found at compile time: a run makes no record per rule and scans no row for them.
"""

from __future__ import annotations

import marshal
import os
from functools import cache

from ptxtool.cache import cache_directory, checksum
from ptxtool.records import finish, record

# in the wheel, and linked in a checkout (paths as strings: a run that finds its tables never imports pathlib)
GRAMMAR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "grammar", "ptx.lark")

# an action: a shift (the next state) or a reduction (children popped, rule index, goto symbol): the form the driver
# runs, so that a run uses the loaded table as it is
Action = int | tuple[int, int, str]


class Rule(metaclass=record):
    """What a reduction does with a rule's children: which to keep (and which are spliced helper lists), and the
    name of the node builder (or that a `?rule` with one child is that child)."""

    name: str  # the alias or the rule's own name
    size: int
    keep: tuple[tuple[int, bool], ...]  # (position, spliced) for each child that is not filtered punctuation
    expand1: bool  # a `?rule` without an alias: one kept child is returned as it is
    spliced: bool  # a helper rule Lark made for `x*`/`x+` (its name starts with `_`)


class Terminal(metaclass=record):
    name: str
    priority: int
    pattern: str  # a regular expression, or the literal text when `literal`
    literal: bool


class Tables(metaclass=record):
    states: dict[int, dict[str, Action]]
    start_state: int
    end_state: int
    rules: tuple[tuple[str, int, tuple[tuple[int, bool], ...], bool, bool], ...]  # each a Rule's fields: `rule(n)`
    terminals: tuple[Terminal, ...]  # in the grammar's order
    ignore: frozenset[str]
    statement_starts: frozenset[int]  # states where a statement or module item may begin

    def rule(self, index: int) -> Rule:
        """Rule `index`, made when it is first reduced (a file reduces a fraction of the grammar's rules)."""
        return Rule(*self.rules[index])


finish((Rule, Terminal, Tables))


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def grammar_text() -> str:
    return _read(GRAMMAR)


def _compile(text: str) -> Tables:
    """Have Lark build the LALR tables (the only place that imports Lark)."""
    from lark import Lark
    from lark.parsers.lalr_analysis import Shift

    lark = Lark(text, parser="lalr", lexer="basic", maybe_placeholders=False)
    table = lark.parser.parser.parser.parse_table  # ParsingFrontend -> LALR_Parser -> _Parser
    index = {rule: n for n, rule in enumerate(lark.rules)}
    rules = []
    for rule in lark.rules:
        keep = tuple(
            (i, not sym.is_term and sym.name.startswith("_"))
            for i, sym in enumerate(rule.expansion)
            if not (sym.is_term and sym.filter_out)
        )
        name = str(rule.alias or rule.origin.name)
        expand1 = bool(rule.options.expand1) and not rule.alias
        rules.append((name, len(rule.expansion), keep, expand1, name.startswith("_")))
    # each symbol and each reduction one shared object: marshal writes the repeats as references, which halves the
    # cache file and the time a run takes to load it
    shared: dict[object, object] = {}

    def one(value: object) -> object:
        return shared.setdefault(value, value)

    def name(rule) -> str:
        return one(str(rule.origin.name))

    states = {
        state: {
            one(str(symbol)): arg if action is Shift else one((len(arg.expansion), index[arg], name(arg)))
            for symbol, (action, arg) in row.items()
        }
        for state, row in table.states.items()
    }
    terminals = tuple(
        Terminal(
            t.name,
            t.priority,
            t.pattern.value if t.pattern.type == "str" else t.pattern.to_regexp(),
            t.pattern.type == "str",
        )
        for t in lark.lexer_conf.terminals
    )
    return Tables(
        states,
        table.start_states["start"],
        table.end_states["start"],
        tuple(rules),
        terminals,
        frozenset(lark.lexer_conf.ignore),
        frozenset(state for state, row in states.items() if "statement" in row or "module_item" in row),
    )


def _cache_file(key: str) -> str | None:
    """Named by a checksum of the grammar and of this file (the shape of what is cached). None: no cache (turned
    off, or no home): the tables are compiled each run, silently (toolchain warns about the cache)."""
    directory, why = cache_directory()
    if not directory or why:
        return None
    return os.path.join(directory, f"tables-{checksum(key)}.marshal")


def _to_data(tables: Tables) -> tuple:
    terminals = tuple((t.name, t.priority, t.pattern, t.literal) for t in tables.terminals)
    return (
        tables.states,
        tables.start_state,
        tables.end_state,
        tables.rules,
        terminals,
        tables.ignore,
        tables.statement_starts,
    )


def _from_data(data: tuple) -> Tables:
    states, start, end, rules, terminals, ignore, starts = data
    return Tables(
        states,
        start,
        end,
        rules,
        tuple(Terminal(*t) for t in terminals),
        frozenset(ignore),
        frozenset(starts),
    )


@cache
def load() -> Tables:
    """The tables: from the cache file when it was made from this grammar and this file, else compiled now and cached
    for next time."""
    text = grammar_text()
    key = text + "\0" + _read(__file__)
    path = _cache_file(key)
    if path is None:
        return _compile(text)
    try:
        with open(path, "rb") as f:
            cached_key, data = marshal.loads(f.read())
        if cached_key == key:
            return _from_data(data)
    except Exception:  # noqa: BLE001 - missing, unreadable, from another version: rebuild it
        pass
    tables = _compile(text)
    import tempfile  # only here: a run that finds its tables never needs it

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tables-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps((key, _to_data(tables))))
        os.replace(tmp, path)
    except OSError:  # a read-only home: the tables still work, they are only rebuilt next time
        pass
    return tables

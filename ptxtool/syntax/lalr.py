"""A lean LALR(1) driver over the parse table and node builders that Lark compiles from grammar/ptx.lark.

Lark's own loop pays for generality on every token (assertions comparing rules, per-token dict probes, exception
plumbing for interactive recovery); PTX files run to a million lines, so the loop is ours, the grammar and tables
Lark's. Errors are handed to a callback that may skip the token and go on, which gives every error of a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lark import Lark, Token
from lark.grammar import Rule
from lark.parsers.lalr_analysis import Shift

END = "$END"
MAX_DEPTH = 400  # parser stack entries: real PTX nests a few levels; far deeper input would overflow the printer


@dataclass(frozen=True, slots=True)
class Unexpected:
    """The parser met `token` where only `expected` terminals could go."""

    token: Token
    expected: frozenset[str]
    message: str | None = None  # set when the parser gives up for a reason of its own


class _Splice(list):
    """The children of a helper rule Lark made for `x*`/`x+` (named `__...`): spliced into the rule that uses it."""


def _node_builder(rule: Rule, nodes: object) -> Callable[[list], object]:
    """A function from a rule's matched children to its value, with Lark's tree-shaping rules: punctuation written
    as a string in the grammar is dropped, `__` helper rules are spliced in, a `?rule` alternative with one child
    and no alias is that child; otherwise the method named after the alias or rule is called with the children."""
    keep = [
        (i, not sym.is_term and sym.name.startswith("_"))
        for i, sym in enumerate(rule.expansion)
        if not (sym.is_term and sym.filter_out)
    ]
    name = rule.alias or rule.origin.name
    if name.startswith("_"):
        method = _Splice
    else:
        method = getattr(nodes, name, None)
        if method is None and not rule.options.expand1:
            raise TypeError(f"no node builder for grammar rule {name!r}")

    def build(children: list) -> object:
        kept: list = []
        for i, splice in keep:
            if splice:
                if kept:
                    kept.extend(children[i])
                else:
                    kept = children[i]
            else:
                kept.append(children[i])
        if method is _Splice:
            return kept if isinstance(kept, _Splice) else _Splice(kept)
        if rule.options.expand1 and not rule.alias and len(kept) == 1:
            return kept[0]
        return method(*kept)

    positions = tuple(i for i, _ in keep)
    if any(splice for _, splice in keep) or method is _Splice or (rule.options.expand1 and not rule.alias):
        return build
    if positions == tuple(range(len(rule.expansion))):
        return lambda children: method(*children)
    return lambda children: method(*[children[i] for i in positions])


def _plain(name: str) -> str:
    return str.__str__(name)


class Driver:
    """Runs the table: an action is an int (shift to that state) or (size, build, goto symbol) to reduce."""

    def __init__(self, lark: Lark, nodes: object, start: str = "start") -> None:
        table = lark.parser.parser.parser.parse_table  # ParsingFrontend -> LALR_Parser -> _Parser
        self.start_state = table.start_states[start]
        self.end_state = table.end_states[start]
        builders = {rule: _node_builder(rule, nodes) for rule in lark.rules}
        # states where a statement or module item may begin: errors roll back to such a state
        self.statement_starts = frozenset(
            state for state, row in table.states.items() if any(str(s) in ("statement", "module_item") for s in row)
        )
        # Lark names symbols with its Token class, whose __eq__ is Python code: key the table by plain str
        self.actions: dict[int, dict[str, object]] = {
            state: {
                _plain(symbol): arg if action is Shift else (len(arg.expansion), builders[arg], _plain(arg.origin.name))
                for symbol, (action, arg) in row.items()
            }
            for state, row in table.states.items()
        }

    def parse(self, tokens: Iterable[Token], on_error: Callable[[Unexpected], bool]) -> object:
        """Parse a token stream. On an unexpected token call `on_error` (False stops), then recover: drop back to
        where the broken statement began and skip to its end, so the next statement parses cleanly."""
        actions, starts = self.actions, self.statement_starts
        stack = [self.start_state]
        values: list[object] = []
        checkpoint: tuple[int, int] | None = None  # stack sizes where the current statement began
        skipping: Token | None = None  # the error token while skipping to the end of a broken statement
        token = None
        for token in tokens:
            kind = token.type
            if skipping is not None:
                if not self._resynchronised(token, skipping, stack):
                    continue
                skipping = None
                if kind == "SEMICOLON":
                    continue
            while True:
                action = actions[stack[-1]].get(kind)
                if action is None:
                    if not on_error(Unexpected(token, self.expected(stack))):
                        return None
                    if checkpoint is not None:
                        del stack[checkpoint[0] :]
                        del values[checkpoint[1] :]
                        if kind == "RBRACE" and "statement" in actions[stack[-1]]:
                            continue  # the block ends here: let the brace close it
                    skipping = None if kind == "SEMICOLON" else token
                    break
                if action.__class__ is int:
                    if stack[-1] in starts:
                        checkpoint = (len(stack), len(values))
                    elif len(stack) > MAX_DEPTH:
                        on_error(Unexpected(token, frozenset(), f"nested more than {MAX_DEPTH} levels deep"))
                        return None
                    stack.append(action)
                    values.append(token)
                    break
                size, build, goto = action
                if size:
                    children = values[-size:]
                    del values[-size:]
                    del stack[-size:]
                else:
                    children = []
                values.append(build(children))
                stack.append(actions[stack[-1]][goto])
        end = Token(END, "", 0, token.line, token.column) if token is not None else Token(END, "", 0, 1, 1)
        while True:
            action = actions[stack[-1]].get(END)
            if action is None or action.__class__ is int:
                on_error(Unexpected(end, self.expected(stack)))
                return None
            size, build, goto = action
            children = values[-size:] if size else []
            if size:
                del values[-size:]
                del stack[-size:]
            values.append(build(children))
            stack.append(actions[stack[-1]][goto])
            if stack[-1] == self.end_state:
                return values[-1]

    def _resynchronised(self, token: Token, error: Token, stack: list[int]) -> bool:
        """Whether skipping after an error ends at `token`: a statement in a block ends at `;` (or its block at `}`);
        at module level the next line that starts something the module can hold starts afresh."""
        row = self.actions[stack[-1]]
        if "statement" in row:
            return token.type in ("SEMICOLON", "RBRACE")
        return token.line > error.line and token.type in row

    def expected(self, stack: list[int]) -> frozenset[str]:
        """The terminals that the parser would really shift here, found by simulating reductions (no nodes built)."""
        accepted = set()
        for symbol in self.actions[stack[-1]]:
            if not symbol.isupper() and symbol != END:
                continue
            states = list(stack)
            while True:
                action = self.actions[states[-1]].get(symbol)
                if action is None:
                    break
                if action.__class__ is int or (symbol == END and states[-1] == self.end_state):
                    accepted.add(symbol)
                    break
                size, _, goto = action
                if size:
                    del states[-size:]
                goto_action = self.actions[states[-1]].get(goto)
                if goto_action is None:
                    break
                states.append(goto_action)
                if symbol == END and states[-1] == self.end_state:
                    accepted.add(symbol)
                    break
        return frozenset(accepted)

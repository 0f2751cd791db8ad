"""A lean LALR(1) driver over the parse table and node builders that Lark compiles from grammar/ptx.lark.

Lark's own loop pays for generality on every token (assertions comparing rules, per-token dict probes, exception
plumbing for interactive recovery); PTX files run to a million lines, so the loop is ours, the grammar and tables
Lark's. Errors are handed to a callback that may skip the token and go on, which gives every error of a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lark import Lark, Token
from lark.parsers.lalr_analysis import Shift

END = "$END"


@dataclass(frozen=True, slots=True)
class Unexpected:
    """The parser met `token` where only `expected` terminals could go; `previous` is the token before it."""

    token: Token
    expected: frozenset[str]


class Driver:
    """Runs the table: an action is an int (shift to that state) or (size, build, goto symbol) to reduce."""

    def __init__(self, lark: Lark, start: str = "start") -> None:
        parser = lark.parser.parser.parser  # ParsingFrontend -> LALR_Parser -> _Parser
        table, callbacks = parser.parse_table, parser.callbacks
        self.start_state = table.start_states[start]
        self.end_state = table.end_states[start]
        self.actions: dict[int, dict[str, object]] = {
            state: {
                symbol: arg if action is Shift else (len(arg.expansion), callbacks[arg], arg.origin.name)
                for symbol, (action, arg) in row.items()
            }
            for state, row in table.states.items()
        }

    def parse(self, tokens: Iterable[Token], on_error: Callable[[Unexpected], bool]) -> object:
        """Parse a token stream; on an unexpected token call `on_error`, which returns True to skip it and go on."""
        actions = self.actions
        stack = [self.start_state]
        values: list[object] = []
        token = None
        for token in tokens:
            kind = token.type
            while True:
                action = actions[stack[-1]].get(kind)
                if action is None:
                    if not on_error(Unexpected(token, self.expected(stack))):
                        return None
                    break
                if action.__class__ is int:
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
        end = Token.new_borrow_pos(END, "", token) if token is not None else Token(END, "", 0, 1, 1)
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

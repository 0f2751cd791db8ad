"""A lean LALR(1) driver over the parse table and rule shapes that Lark compiles from grammar/ptx.lark (loaded
from ptxtool/syntax/tables.py's cache, so a run never imports Lark).

Lark's own loop pays for generality on every token (assertions comparing rules, per-token dict probes, exception
plumbing for interactive recovery); PTX files run to a million lines, so the loop is ours, the grammar and tables
Lark's. Errors are handed to a callback that may skip the token and go on, which gives every error of a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ptxtool.records import finish, record
from ptxtool.syntax.lexer import Token
from ptxtool.syntax.tables import Action, Rule, Tables

END = "$END"
LINE = "INSTRUCTION_LINE"  # a statement that a `whole_lines` builder makes whole, where a statement may start
PARAM_LINE = "PARAM_LINE"  # the same for one parameter of a function's list, where a parameter may start
BUILT = frozenset((LINE, PARAM_LINE))  # terminals the parser makes, none of them a token of the text's own
# parser stack entries: ptxas's own parser gives up at 10,000 (about 1,660 nested blocks); nothing here recurses
# over blocks, and expressions and operands have a tighter limit of their own (parser.MAX_NESTING)
MAX_DEPTH = 12_000


class Unexpected(metaclass=record):
    """The parser met `token` where only `expected` terminals could go."""

    token: Token
    expected: frozenset[str]
    message: str | None = None  # set when the parser gives up for a reason of its own


finish((Unexpected,))


class _Splice(list):
    """The children of a helper rule Lark made for `x*`/`x+` (named `__...`): spliced into the rule that uses it."""


def _method(rule: Rule, nodes: object) -> Callable[..., object] | None:
    """What makes a rule's node: `_Splice` for a `__` helper rule, the method named after the alias or rule, None
    for a `?rule` without one (it passes its child on; `_builders` refused any other rule `nodes` lacks)."""
    return _Splice if rule.spliced else getattr(nodes, rule.name, None)


def _node_builder(rule: Rule, nodes: object) -> Callable[[list], object]:
    """A function from a rule's matched children to its value, with Lark's tree-shaping rules: punctuation written
    as a string in the grammar is dropped, `__` helper rules are spliced in, a `?rule` alternative with one child
    and no alias is that child; otherwise the method named after the alias or rule is called with the children."""
    keep = rule.keep
    method = _method(rule, nodes)
    expand1 = rule.expand1

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
        if expand1 and len(kept) == 1:
            return kept[0]
        return method(*kept)

    positions = tuple(i for i, _ in keep)
    if any(splice for _, splice in keep) or method is _Splice or expand1:
        return build
    if positions == tuple(range(rule.size)):
        return lambda children: method(*children)
    return lambda children: method(*[children[i] for i in positions])


def _builders(tables: Tables, nodes: object) -> list[Callable[[list], object] | None]:
    """Each rule's node builder, in a list (the loop indexes it at every reduction), made at the rule's first
    reduction: a file reduces a fraction of the grammar's rules. None for a `?rule` reduced from its one child
    (`?atom` -> `?unary` -> ... -> `?expression` for each literal): the value stays, only the state changes. A rule
    without a builder in `nodes` is refused now, not when a file first reduces it."""
    builders: list[Callable[[list], object] | None] = []
    for index, (name, size, keep, expand1, spliced) in enumerate(tables.rules):
        if expand1 and size == 1 and keep == ((0, False),):
            builders.append(None)
        elif not spliced and not expand1 and getattr(nodes, name, None) is None:
            raise TypeError(f"no node builder for grammar rule {name!r}")
        else:
            builders.append(_on_first_use(builders, index, tables, nodes))
    return builders


def _on_first_use(builders: list, index: int, tables: Tables, nodes: object) -> Callable[[list], object]:
    """Stands for rule `index`'s node builder until its first reduction, which makes it and puts it in its place."""

    def build(children: list) -> object:
        made = builders[index] = _node_builder(tables.rule(index), nodes)
        return made(children)

    return build


SKIP, RESUME, REPORT = "skip", "resume", "report"


class _Skip:
    """Skipping the rest of a broken statement. In a block it ends after the next `;` (or at the `}` closing the
    block); at module level, at the first token of a later line that can start a module item (a later line that
    starts with anything else is reported as an error of its own). Braces opened while skipping are matched, so a
    vector operand or a whole function body is skipped as one."""

    __slots__ = ("error", "in_block", "row", "depth", "ended")

    def __init__(self, error: Token, in_block: bool, row: dict[str, object], depth: int) -> None:
        self.error, self.in_block, self.row, self.depth, self.ended = error, in_block, row, depth, False

    def step(self, token: Token) -> str:
        kind = token.type
        if self.ended:
            return RESUME
        if kind == "LBRACE":
            self.depth += 1
            return SKIP
        if kind == "RBRACE":
            if self.depth:
                self.depth -= 1
                return SKIP
            return RESUME if self.in_block else SKIP
        if self.depth:
            return SKIP
        if self.in_block:
            self.ended = kind == "SEMICOLON"
            return SKIP
        if token.line <= self.error.line:
            return SKIP
        if kind in self.row:
            return RESUME
        self.error = token  # a later line that starts with something no module item can: an error of its own
        return REPORT


def _unclosed(values: list[object]) -> str | None:
    """At the end of the file: which brace is still open, if one is."""
    brace = next((v for v in reversed(values) if v.__class__ is Token and v.type == "LBRACE"), None)
    return None if brace is None else f"end of file inside the '{{' opened at line {brace.line}: expected '}}'"


class Driver:
    """Runs the table: an action is an int (shift to that state) or (size, rule, goto symbol) to reduce."""

    def __init__(self, tables: Tables, nodes: object) -> None:
        self.start_state = tables.start_state
        self.end_state = tables.end_state
        self.builders = _builders(tables, nodes)
        self.actions: dict[int, dict[str, Action]] = tables.states
        self.statement_starts = tables.statement_starts  # errors roll back to such a state

    def parse(
        self,
        tokens: Iterable[Token],
        on_error: Callable[[Unexpected], bool],
        whole_lines: dict[str, tuple[tuple[str, Callable[[Token], object | None]], ...]] | None = None,
    ) -> object:
        """Parse a token stream. On an unexpected token call `on_error` (False stops), then recover: drop back to
        where the broken statement began and skip to its end, so the next statement parses cleanly. A token whose
        terminal is in `whole_lines` (a name, `@`, a declaration's first word, `.loc`) is first offered to each
        builder listed for it whose terminal the parser would shift there (INSTRUCTION_LINE where a statement may
        start, PARAM_LINE where a parameter may): the node of the whole statement or parameter it begins on its
        line (shifted as that terminal; the token source then goes on after it), or None."""
        actions, builders, starts = self.actions, self.builders, self.statement_starts
        stack = [self.start_state]
        values: list[object] = []
        checkpoint: tuple[int, int] | None = None  # stack sizes where the current statement began
        skip: _Skip | None = None  # set while skipping the rest of a broken statement
        token = None
        for token in tokens:
            kind = token.type
            if skip is not None:
                step = skip.step(token)
                if step == REPORT and not on_error(Unexpected(token, self.expected(stack))):
                    return None
                if step != RESUME:
                    continue
                skip = None
            while True:
                action = actions[stack[-1]].get(kind)
                if action is None:
                    if not on_error(Unexpected(token, self.expected(stack))):
                        return None
                    depth = 0  # braces the broken statement opened and did not close
                    if checkpoint is not None:
                        depth = sum(1 for v in values[checkpoint[1] :] if v.__class__ is Token and v.type == "LBRACE")
                        del stack[checkpoint[0] :]
                        del values[checkpoint[1] :]
                    row = actions[stack[-1]]
                    skip = _Skip(token, "statement" in row, row, depth)
                    if skip.step(token) == RESUME:  # a `}` that closes the block the broken statement was in
                        skip = None
                        continue
                    break
                if action.__class__ is int:
                    if stack[-1] in starts:
                        checkpoint = (len(stack), len(values))
                    if len(stack) > MAX_DEPTH:
                        message = f"nested too deep: more than {MAX_DEPTH} parser states open (ptxas stops sooner)"
                        on_error(Unexpected(token, frozenset(), message))
                        return None
                    shifted: object = token
                    # (not near the depth limit, which the statement's own tokens could reach)
                    if whole_lines is not None and kind in whole_lines and len(stack) < MAX_DEPTH - 64:
                        row = actions[stack[-1]]
                        for terminal, whole_line in whole_lines[kind]:
                            target = row.get(terminal)
                            if target.__class__ is int and (node := whole_line(token)) is not None:
                                action, shifted = target, node
                                break
                    stack.append(action)
                    values.append(shifted)
                    break
                size, rule, goto = action
                build = builders[rule]
                if build is None:  # a unit reduction: the value stays
                    stack[-1] = actions[stack[-2]][goto]
                    continue
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
                on_error(Unexpected(end, self.expected(stack), _unclosed(values)))
                return None
            size, rule, goto = action
            build = builders[rule]
            if build is None:
                stack[-1] = actions[stack[-2]][goto]
            else:
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
            if (not symbol.isupper() and symbol != END) or symbol in BUILT:
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

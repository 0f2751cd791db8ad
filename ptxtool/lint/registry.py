"""The lint rules by stable id (PTX001...), each a function over a file's Context that yields Hits, registered with
its name, default severity and options; its docstring is what `ptxtool lint --explain ID` prints."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptxtool.lint.context import Context

SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True, slots=True)
class Hit:
    """What a rule found: where (1-based line and column of the PTX) and a one-line message."""

    line: int
    column: int
    message: str


Check = Callable[["Context"], Iterable[Hit]]


@dataclass(frozen=True, slots=True)
class Rule:
    """A registered rule. `options` are its settings with their defaults (overridable in `[tool.ptxtool.lint.ID]`);
    `needs_ptxas` rules are skipped with a notice when ptxas is missing or `--no-ptxas` is given."""

    id: str
    name: str
    severity: str
    check: Check
    options: dict = field(default_factory=dict)
    needs_ptxas: bool = False
    asks_ptxas: bool = False  # uses ptxas's answers when there are any, and decides from the PTX alone otherwise

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0]

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.check) or self.name


RULES: dict[str, Rule] = {}


def rule(
    rule_id: str,
    name: str,
    severity: str,
    *,
    options: dict | None = None,
    needs_ptxas: bool = False,
    asks_ptxas: bool = False,
):
    """Register a check function as rule `rule_id`; ids are stable and never reused."""
    assert severity in SEVERITIES and rule_id not in RULES

    def register(check: Check) -> Check:
        RULES[rule_id] = Rule(rule_id, name, severity, check, dict(options or {}), needs_ptxas, asks_ptxas)
        return check

    return register


def all_rules() -> dict[str, Rule]:
    """Every rule, by id in order (the rule modules register themselves on import)."""
    import ptxtool.lint.rules  # noqa: F401 - importing registers the rules

    return dict(sorted(RULES.items()))

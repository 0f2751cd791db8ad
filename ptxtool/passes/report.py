"""What a pass says it did: each rewritten instruction with its reason and the SASS it promises, each candidate it
left alone and why, and warnings a user must see (the service verifies the promises against nvdisasm); and, for the
minimal output, where each edit goes in the input's text (`column`, `Insertion`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptxtool.errors import Diagnostic, Location


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One instruction changed: where (kernel, input line and the opcode's column, 0 until the service has tied the
    rewrite to the input's text), the mnemonic before and after, why, and the modifiers every SASS memory
    instruction made from it must carry afterwards (`NA`, `LTC256B`, `CONSTANT`, `EF`)."""

    kernel: str
    line: int
    before: str
    after: str
    reasons: tuple[str, ...]
    sass: tuple[str, ...] = ()
    column: int = 0

    def to_data(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "line": self.line,
            "column": self.column,
            "before": self.before,
            "after": self.after,
            "reasons": list(self.reasons),
            "sass": list(self.sass),
        }


@dataclass(frozen=True, slots=True)
class Insertion:
    """A statement a pass added (`createpolicy`, a register declaration): its text and its anchor, the input
    position it is spliced in before (line and column of the statement that follows it, or of a block's `}`)."""

    kernel: str
    line: int
    column: int
    text: str

    def to_data(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "line": self.line, "column": self.column, "text": self.text}


def dropped_rewrite(path: str, rewrite: Rewrite, reason: str) -> Diagnostic:
    """A rewrite the pass proposed that verification took back, and why in words (the note), as the one diagnostic
    type; its JSON keeps the rewrite's fields and `reason`."""
    properties = rewrite.to_data() | {"reason": reason}
    del properties["line"], properties["column"]  # the location's
    return Diagnostic(
        Location(path, rewrite.line, rewrite.column),
        f"{rewrite.kernel}: dropped {rewrite.before} -> {rewrite.after}",
        "warning",
        notes=(reason,),
        code="optimize/dropped",
        properties=properties,
    )


@dataclass(frozen=True, slots=True)
class Skip:
    """A qualifier a policy wanted on an instruction but did not add, and why (unsafe, or the file is too old)."""

    kernel: str
    line: int
    mnemonic: str
    reason: str

    def to_data(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "line": self.line, "mnemonic": self.mnemonic, "reason": self.reason}


@dataclass
class PassReport:
    """Everything one pass did to one module. `inserted` names the kernels where the pass added instructions of its
    own, and `sass_may_change` the SASS mnemonics those may add or replace there (createpolicy's descriptor)."""

    name: str
    rewrites: list[Rewrite] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    inserted: list[str] = field(default_factory=list)
    sass_may_change: frozenset[str] = frozenset()

    @property
    def changed(self) -> bool:
        return bool(self.rewrites)

    def to_data(self) -> dict[str, Any]:
        return {
            "pass": self.name,
            "rewrites": [r.to_data() for r in self.rewrites],
            "skipped": [s.to_data() for s in self.skipped],
            "warnings": list(self.warnings),
        }

"""The PTX ISA as data, and the one API to query it: what an instruction defines and uses, which memory it
touches, its side effects, and the PTX version and target it needs.
The API lives in `instructions.py`, the tables beside it.
"""

# The package loads its tables on first use (PEP 562), so `ptxtool.isa.targets`' constants (the block limits cli.py
# declares options with) cost no start-up time: `ptxtool --help` never builds the opcode tables.
from __future__ import annotations

from typing import Any

__all__ = [
    "CONSTRUCTS",
    "caching",
    "DIRECTIVES",
    "MODIFIERS",
    "Access",
    "Effect",
    "Feature",
    "InstructionInfo",
    "Mode",
    "Need",
    "REMOVED",
    "Requirement",
    "Role",
    "Target",
    "TYPES",
    "WORST_CASE",
    "Version",
    "effects",
    "family",
    "find",
    "lookup",
    "memory_accesses",
    "operand_names",
    "operand_roles",
    "requirements",
    "satisfied",
    "state_spaces",
    "unknown_modifiers",
    "unmet_added",
    "version",
    "version_text",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ptxtool.isa import instructions

        return getattr(instructions, name)
    raise AttributeError(f"module 'ptxtool.isa' has no attribute {name!r}")

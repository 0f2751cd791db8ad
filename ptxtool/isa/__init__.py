"""The PTX ISA as data, and the one API to query it: what an instruction defines and uses, which memory it
touches, its side effects, and the PTX version and target it needs.
The API lives in `instructions.py`, the tables beside it.
"""

# The package loads its tables on first use (PEP 562), so `ptxtool.isa.targets`' constants (the block limits cli.py
# declares options with) cost no start-up time: `ptxtool --help` never builds the opcode tables.
from __future__ import annotations

from importlib import import_module
from typing import Any


def __getattr__(name: str) -> Any:
    instructions = import_module("ptxtool.isa.instructions")  # not `from ptxtool.isa import`: that asks us again
    if name in instructions.__all__:
        value = globals()[name] = getattr(instructions, name)  # asked once: the passes read these in hot loops
        return value
    raise AttributeError(f"module 'ptxtool.isa' has no attribute {name!r}")

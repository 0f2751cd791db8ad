"""What ptxas says about each function (`-v`): registers, spills, stack, shared and constant memory, barriers,
and the warnings worth showing a user (spills, serialized wgmma, ignored setmaxnreg).

These numbers are the authority on resources: never count PTX registers instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAMED = re.compile(r"^ptxas info\s*: (?:Compiling (?:entry )?function|Function properties for) '?([^' ]+)'?")
_USED = re.compile(r"^ptxas info\s*: Used \d+ registers")
_PROPERTIES = re.compile(
    r"^(?:ptxas\s+\.)?\s+\d"
)  # the indented line after "Function properties" (nvJitLink: "ptxas .")

# one regex per number ptxas prints, and the field it fills
_FIELDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\d+) bytes stack frame"), "stack_frame"),
    (re.compile(r"(\d+) bytes spill stores"), "spill_stores"),
    (re.compile(r"(\d+) bytes spill loads"), "spill_loads"),
    (re.compile(r"Used (\d+) registers"), "registers"),
    (re.compile(r"used (\d+) barriers"), "barriers"),
    (re.compile(r"(\d+) bytes cumulative stack size"), "cumulative_stack"),
    (re.compile(r"(\d+) bytes smem"), "shared"),
    (re.compile(r"(\d+) bytes lmem"), "local"),
)
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")

# warnings users should see, by what ptxas says (its message codes vary: C7511..C7515 for serialized wgmma)
WARNING_KINDS: tuple[tuple[str, str], ...] = (
    ("Registers are spilled", "spill"),
    ("wgmma.mma_async instructions are serialized", "wgmma-serialized"),
    ("'setmaxnreg' ignored", "setmaxnreg-ignored"),
    ("setmaxnreg", "setmaxnreg"),
    ("wgmma.wait_group is injected", "wgmma-wait-injected"),
)
_CODE = re.compile(r"\((C\d{4})\)")
_IN_FUNCTION = re.compile(r"(?:function|entry) '?([\w$.]+)'?")
_LINE = re.compile(r"line (\d+)")


@dataclass
class FunctionResources:
    """One function's resources as ptxas reports them. `registers` is None for a non-entry function that ptxas
    inlined into its callers' numbers (whole-program mode prints no register line for it)."""

    name: str
    is_kernel: bool = False
    registers: int | None = None
    barriers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cumulative_stack: int = 0
    shared: int = 0
    local: int = 0
    constant: dict[int, int] = field(default_factory=dict)

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores + self.spill_loads

    @property
    def uses_local_memory(self) -> bool:
        """Spills, a stack frame or `.local` arrays all live in (slow, off-chip) local memory."""
        return bool(self.spill_bytes or self.stack_frame or self.local)


@dataclass(frozen=True, slots=True)
class ToolWarning:
    """A ptxas message worth surfacing: its kind (`spill`, `wgmma-serialized`, ...), code, function, PTX line."""

    kind: str
    message: str
    code: str = ""
    function: str = ""
    line: int = 0


def parse_verbose(log: str) -> dict[str, FunctionResources]:
    """Per-function resources from `ptxas -v` output, in the order ptxas compiled them."""
    functions: dict[str, FunctionResources] = {}
    current: FunctionResources | None = None
    for line in log.splitlines():
        named = _NAMED.match(line)
        if named:
            current = functions.setdefault(named.group(1), FunctionResources(named.group(1)))
            current.is_kernel |= "entry function" in line
            continue
        if current is None or not (_PROPERTIES.match(line) or _USED.match(line)):
            continue
        for pattern, name in _FIELDS:
            found = pattern.search(line)
            if found:
                setattr(current, name, int(found.group(1)))
        for size, bank in _CMEM.findall(line):
            current.constant[int(bank)] = int(size)
    return functions


def parse_warnings(log: str) -> list[ToolWarning]:
    """The warnings and coded performance notes in ptxas output, classified by WARNING_KINDS."""
    found = []
    for line in log.splitlines():
        code = _CODE.search(line)
        if not (code or line.startswith("ptxas warning") or "; warning" in line):
            continue
        where, _, message = line.partition(": ")
        message = message.strip() or line
        kind = next((kind for words, kind in WARNING_KINDS if words in message), "other")
        function = _IN_FUNCTION.search(message)
        at = _LINE.search(message) or _LINE.search(where)
        found.append(
            ToolWarning(
                kind,
                message,
                code.group(1) if code else "",
                function.group(1) if function else "",
                int(at.group(1)) if at else 0,
            )
        )
    return found

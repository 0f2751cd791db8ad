"""SASS from a cubin through nvdisasm: per-function instruction lists (`-json`), the statistics people ask about
(global and local memory traffic by full variant, barriers, tensor-core operations), and a listing with the PTX
lines each instruction came from (`-gp`, for cubins built with `-lineinfo`), and the registers ptxas keeps live at
each instruction (`-plr -lrm count`), mapped to those PTX lines."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ptxtool.errors import EnvironmentProblem
from ptxtool.toolchain.compile import cache_dir
from ptxtool.toolchain.discover import find_tool, run_tool

# instruction classes by mnemonic (the opcode before its first dot)
GLOBAL_MEMORY = frozenset(
    {"LDG", "STG", "ATOMG", "RED", "REDG", "LDGSTS", "UBLKCP", "UBLKRED", "UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF"}
)
LOCAL_MEMORY = frozenset({"LDL", "STL"})
BARRIERS = frozenset({"BAR", "BARRIER", "SYNCS", "UCGABAR_ARV", "UCGABAR_WAIT", "MEMBAR", "ERRBAR", "CGAERRBAR"})
TENSOR_CORE = frozenset(
    {
        "HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA",
        "HGMMA", "IGMMA", "QGMMA", "BGMMA",
        "UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SassInstruction:
    """One SASS instruction: full opcode with modifiers (`LDG.E.128.CONSTANT`), operands, and guard (`@P0`)."""

    opcode: str
    operands: str = ""
    predicate: str = ""

    @property
    def mnemonic(self) -> str:
        return self.opcode.split(".", 1)[0]


@dataclass
class SassStats:
    """What a function's SASS amounts to. Counters are keyed by full opcode, except `histogram` (by mnemonic)."""

    count: int = 0
    histogram: dict[str, int] = field(default_factory=dict)
    global_memory: dict[str, int] = field(default_factory=dict)
    local_memory: dict[str, int] = field(default_factory=dict)
    barriers: dict[str, int] = field(default_factory=dict)
    tensor_core: dict[str, int] = field(default_factory=dict)


def _sorted(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def statistics(instructions: list[SassInstruction]) -> SassStats:
    """Counts over one function's instructions (NOPs included in `count`, as the hardware fetches them)."""
    classes = {"global_memory": GLOBAL_MEMORY, "local_memory": LOCAL_MEMORY, "barriers": BARRIERS}
    classes["tensor_core"] = TENSOR_CORE
    counters: dict[str, Counter[str]] = {name: Counter() for name in classes}
    for i in instructions:
        for name, members in classes.items():
            if i.mnemonic in members:
                counters[name][i.opcode] += 1
    return SassStats(
        len(instructions),
        _sorted(Counter(i.mnemonic for i in instructions)),
        **{name: _sorted(c) for name, c in counters.items()},
    )


def _nvdisasm(cubin: bytes, options: list[str]) -> str:
    """nvdisasm's output for a cubin, cached by content (nvdisasm takes ~0.5 s even on a small cubin)."""
    nvdisasm = find_tool("nvdisasm")
    key = hashlib.sha256("\0".join([nvdisasm.path, nvdisasm.version, *options]).encode() + cubin).hexdigest()
    cache = cache_dir()
    if cache and (cache / f"{key}.sass").is_file():
        return (cache / f"{key}.sass").read_text()
    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        path = Path(tmp) / "code.cubin"
        path.write_bytes(cubin)
        done = run_tool(nvdisasm, [*options, str(path)])
    if done.returncode != 0:
        raise EnvironmentProblem(f"nvdisasm at {nvdisasm.path} failed (exit {done.returncode}): {done.stderr.strip()}")
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
        partial = cache / f".{key}.{os.getpid()}.tmp"
        partial.write_text(done.stdout)
        os.replace(partial, cache / f"{key}.sass")
    return done.stdout


def disassemble(cubin: bytes) -> dict[str, list[SassInstruction]]:
    """Instructions per function, in cubin order, from `nvdisasm -json`."""
    text = _nvdisasm(cubin, ["-json"])
    try:
        _, functions = json.loads(text)
    except ValueError as error:
        raise EnvironmentProblem(f"nvdisasm -json printed something that is not its JSON ({error})") from None
    return {
        f["function-name"]: [
            SassInstruction(i["opcode"], i.get("operands", ""), i.get("predicate", ""))
            for i in f.get("sass-instructions", [])
        ]
        for f in functions
    }


@dataclass(frozen=True, slots=True)
class ListingLine:
    """A line of an annotated listing: a SASS instruction's text and the PTX line it came from (0: unknown)."""

    text: str
    ptx_line: int = 0


_SECTION = re.compile(r"^\.text\.(\S+):$")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;?\s*$")
_PTX_LINE = re.compile(r'^\s*//## File "[^"]*", line (\d+)')
_LABEL = re.compile(r"^(\.L_\w+):$")


def listing(cubin: bytes, with_ptx_lines: bool) -> dict[str, list[ListingLine]]:
    """Per function, its instructions and labels as nvdisasm prints them, each tagged with its PTX line."""
    text = _nvdisasm(cubin, ["-c", *(["-gp"] * with_ptx_lines)])
    functions: dict[str, list[ListingLine]] = {}
    current: list[ListingLine] | None = None
    line = 0
    for raw in text.splitlines():
        if section := _SECTION.match(raw):
            current = functions.setdefault(section.group(1), [])
            line = 0
        elif current is None:
            continue
        elif at := _PTX_LINE.match(raw):
            line = int(at.group(1))
        elif label := _LABEL.match(raw.strip()):
            current.append(ListingLine(label.group(1) + ":"))
        elif instruction := _INSTRUCTION.match(raw):
            current.append(ListingLine(instruction.group(1), line))
    return functions


@dataclass(frozen=True, slots=True)
class LiveCount:
    """Registers live at one SASS instruction as nvdisasm counts them (`# occupied`): general (32-bit),
    predicate, uniform, uniform predicate; with the instruction's address and its PTX line (0: unknown)."""

    address: int
    gpr: int = 0
    predicates: int = 0
    uniform: int = 0
    uniform_predicates: int = 0
    ptx_line: int = 0


_LIVE_FIELDS = {"GPR": "gpr", "PRED": "predicates", "UGPR": "uniform", "UPRED": "uniform_predicates"}
_ADDRESS = re.compile(r"^\s*/\*([0-9a-f]+)\*/")
_TEXT_SECTION = re.compile(r"^\.text\.(\S+):")
_COLUMNS = re.compile(r"//\s*\|(.*)\|\s*$")


def _addressed_lines(text: str) -> dict[str, dict[int, int]]:
    """Per function, instruction address -> PTX line, from an `nvdisasm -c -gp` listing."""
    out: dict[str, dict[int, int]] = {}
    current: dict[int, int] | None = None
    line = 0
    for raw in text.splitlines():
        if section := _TEXT_SECTION.match(raw):
            current, line = out.setdefault(section.group(1), {}), 0
        elif current is None:
            continue
        elif at := _PTX_LINE.match(raw):
            line = int(at.group(1))
        elif address := _ADDRESS.match(raw):
            current[int(address.group(1), 16)] = line
    return out


def live_registers(cubin: bytes) -> dict[str, list[LiveCount]]:
    """Per function, the live-register counts at each SASS instruction. nvdisasm ignores line info when it prints
    life ranges, so the PTX lines come from a second `-gp` listing, matched by address (needs a `-lineinfo` cubin)."""
    lines = _addressed_lines(_nvdisasm(cubin, ["-c", "-gp"]))
    out: dict[str, list[LiveCount]] = {}
    current: list[LiveCount] | None = None
    where: dict[int, int] = {}
    fields: list[str | None] = []
    for raw in _nvdisasm(cubin, ["-c", "-plr", "-lrm", "count"]).splitlines():
        columns = _COLUMNS.search(raw)
        cells = [c.strip() for c in columns.group(1).split("|")] if columns else []
        if section := _TEXT_SECTION.match(raw):
            current, where = out.setdefault(section.group(1), []), lines.get(section.group(1), {})
        elif "GPR" in cells:
            fields = [_LIVE_FIELDS.get(c) for c in cells]
        elif current is not None and columns and (address := _ADDRESS.match(raw)):
            at = int(address.group(1), 16)
            counts = {f: int(c) for f, c in zip(fields, cells, strict=False) if f and c.isdigit()}
            current.append(LiveCount(at, **counts, ptx_line=where.get(at, 0)))
    if any(out.values()) and "gpr" not in fields:
        raise EnvironmentProblem("nvdisasm -plr printed life ranges without the GPR column ptxtool reads")
    return out


def live_by_line(counts: list[LiveCount]) -> dict[int, int]:
    """The most general registers live at any SASS instruction of each PTX line (instructions without a line are
    left out): the series to set beside the estimated pressure curve."""
    out: dict[int, int] = {}
    for c in counts:
        if c.ptx_line:
            out[c.ptx_line] = max(out.get(c.ptx_line, 0), c.gpr)
    return dict(sorted(out.items()))

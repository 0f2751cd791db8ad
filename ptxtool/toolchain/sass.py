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
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ptxtool.errors import EnvironmentProblem
from ptxtool.isa.targets import Target
from ptxtool.toolchain.compile import cache_dir
from ptxtool.toolchain.discover import find_tool, run_tool

# The one table of SASS opcode classes, by mnemonic (the opcode before its first dot); a mnemonic may be in several.
# "ordering": what a memory access must not be moved across (barriers, fences, atomics, waits, async copies, calls
# whose callee may do any of these); "control": what shapes the control flow. Statistics, the optimize checks and
# the order analysis below all read this table.
CLASSES: dict[str, frozenset[str]] = {
    name: frozenset(members.split())
    for name, members in {
        "global": "LDG STG ATOMG RED REDG LDGSTS LDGMC UBLKCP UBLKRED UBLKPF UTMALDG UTMASTG UTMAREDG UTMAPF",
        "local": "LDL STL",
        "shared": "LDS STS LDSM STSM ATOMS LDGSTS",
        "generic": "LD ST ATOM ATOMC",
        "texture": "TEX TLD TLD4 TMML TXD TXQ SULD SUST SUATOM SURED",
        "barrier": "BAR BARRIER SYNCS UCGABAR_ARV UCGABAR_WAIT MEMBAR ERRBAR CGAERRBAR",
        "ordering": "BAR BARRIER SYNCS UCGABAR_ARV UCGABAR_WAIT MEMBAR ERRBAR CGAERRBAR FENCE CCTL CCTLL CCTLT "
        "ATOM ATOMG ATOMS ATOMC RED REDG REDAS SUATOM SURED ACQBULK ACQSHMINIT DEPBAR LDGDEPBAR ARRIVES WARPSYNC "
        "UTMALDG UTMASTG UTMAREDG UTMAPF UTMACCTL UTMACMDFLUSH UBLKCP UBLKRED UBLKPF CALL",
        "control": "BRA BRX BRXU JMP JMX JMXU CALL RET EXIT KILL BSSY BSYNC BREAK BPT",
        "tensor": "HMMA IMMA DMMA BMMA QMMA OMMA HGMMA IGMMA QGMMA BGMMA UTCHMMA UTCIMMA UTCQMMA UTCOMMA UTCMMA",
    }.items()
}
MEMORY = CLASSES["global"] | CLASSES["local"] | CLASSES["shared"] | CLASSES["generic"] | CLASSES["texture"]
GLOBAL_MEMORY, LOCAL_MEMORY = CLASSES["global"], CLASSES["local"]
BARRIERS, TENSOR_CORE = CLASSES["barrier"], CLASSES["tensor"]
# A memory access with one of these modifiers is itself ordered (volatile, relaxed/acquire/release, MMIO).
STRONG = frozenset(("STRONG", "MMIO", "VOLATILE"))


@dataclass(frozen=True, slots=True)
class SassInstruction:
    """One SASS instruction: full opcode with modifiers (`LDG.E.128.CONSTANT`), operands, and guard (`@P0`)."""

    opcode: str
    operands: str = ""
    predicate: str = ""

    @property
    def mnemonic(self) -> str:
        return self.opcode.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class SassMark:
    """An instruction a proof looks for in a function's SASS: `pattern` (a regex over `OPCODE OPERANDS`, from the
    start), or where it is empty the opcode `name` with any further modifiers (`SYNCS.ARRIVE` finds
    `SYNCS.ARRIVE.TRANS64.A1T0`). `name` is what a missing mark is called."""

    name: str
    pattern: str = ""

    def matches(self, i: SassInstruction) -> bool:
        if not self.pattern:
            return i.opcode == self.name or i.opcode.startswith(self.name + ".")
        return re.match(self.pattern, f"{i.opcode} {i.operands}") is not None


def missing(marks: Sequence[SassMark], instructions: Sequence[SassInstruction]) -> list[str]:
    """The names of the marks no instruction matches, in the marks' order."""
    return [m.name for m in marks if not any(m.matches(i) for i in instructions)]


@dataclass(frozen=True, slots=True)
class MbarrierSass:
    """What ptxas makes of mbarrier operations on one SASS generation: a phase wait (try_wait or test_wait), an
    arrival, and cp.async.mbarrier.arrive (the arrival when a thread's copies land)."""

    wait: tuple[SassMark, ...]
    arrive: tuple[SassMark, ...]
    copies_arrive: tuple[SassMark, ...]


# By SASS generation, the first target number of each (read from the wheel's ptxas 13.5 on the warp-role splits of
# tests/data/warp_roles and the benchmark kernels, S = 2 and 3, P = N/32 and 1). sm_80..sm_89 (Ampere, Ada) have no
# SYNCS unit: mbarrier.init is a plain STS.64 of the initial state, an arrival a release fence and a shared-memory
# atomic (`MEMBAR.ALL.CTA`, `ATOMS.ARRIVE.64`), a wait a load of the mbarrier's upper word (`LDS`, through `R2UR`
# where the phase is uniform) and a test of its phase bit, bit 63, against the parity
# (`LOP3.LUT P0,RZ,R3,0x80000000,R2,0x48,!PT` or its uniform `ULOP3.LUT UP0,...`): that test is the wait's only
# mark of its own. sm_90 and later (sm_100, sm_120 alike) have SYNCS: `SYNCS.EXCH.64` initialises,
# `SYNCS.ARRIVE.TRANS64.A1T0` arrives, `SYNCS.PHASECHK.TRANS64.TRYWAIT` waits. The copies' arrival is
# `ARRIVES.LDGSTSBAR.64` (`.ARVCNT` from sm_90).
MBARRIER_SASS: dict[int, MbarrierSass] = {
    80: MbarrierSass(
        wait=(SassMark("LOP3.LUT P,RZ,R,0x80000000 (phase bit)", r"U?LOP3\.LUT U?P\d,U?RZ,U?R\d+,0x80000000,"),),
        arrive=(SassMark("MEMBAR.ALL.CTA"), SassMark("ATOMS.ARRIVE")),
        copies_arrive=(SassMark("ARRIVES.LDGSTSBAR"),),
    ),
    90: MbarrierSass(
        wait=(SassMark("SYNCS.PHASECHK"),),
        arrive=(SassMark("SYNCS.ARRIVE"),),
        copies_arrive=(SassMark("ARRIVES.LDGSTSBAR"),),
    ),
}


def mbarrier_sass(arch: str) -> MbarrierSass | None:
    """The mbarrier marks of the SASS generation of target `arch` (`sm_86`), or None below sm_80 (no mbarrier)."""
    target = Target.parse(arch)
    number = target.number if target else 0
    generation = max((g for g in MBARRIER_SASS if g <= number), default=None)
    return MBARRIER_SASS[generation] if generation is not None else None


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
    mnemonics = [i.mnemonic for i in instructions]
    for i, mnemonic in zip(instructions, mnemonics, strict=True):
        for name, members in classes.items():
            if mnemonic in members:
                counters[name][i.opcode] += 1
    return SassStats(
        len(instructions),
        _sorted(Counter(mnemonics)),
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
    """A line of an annotated listing: a SASS instruction's text, the PTX line it came from (0: unknown) and its
    offset in the function's code (None for a label)."""

    text: str
    ptx_line: int = 0
    address: int | None = None


# The lines of a listing that say something, one alternative each (a line matches at most one; the rest is skipped
# inside the regex engine): a function's section, a PTX line mark, a label, an instruction at its address.
_LISTING_LINE = re.compile(
    r"^(?:\.text\.(?P<section>\S+):"
    r'|[ \t]*//## File "[^"\n]*", line (?P<line>\d+).*'
    r"|[ \t]*(?P<label>\.L_\w+):[ \t]*"
    r"|[ \t]*/\*(?P<address>[0-9a-f]+)\*/(?P<text>.*))$",
    re.M,
)


def _sass_text(written: str) -> str:
    """An instruction as written after its address, without padding and the closing `;`."""
    text = written.strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def listing(cubin: bytes, with_ptx_lines: bool) -> dict[str, list[ListingLine]]:
    """Per function, its instructions and labels as nvdisasm prints them, each tagged with its PTX line."""
    functions: dict[str, list[ListingLine]] = {}
    current: list[ListingLine] | None = None
    line = 0
    for found in _LISTING_LINE.finditer(_nvdisasm(cubin, ["-c", *(["-gp"] * with_ptx_lines)])):
        kind = found.lastgroup
        if kind == "section":
            current = functions.setdefault(found["section"], [])
            line = 0
        elif current is None:
            continue
        elif kind == "text":
            current.append(ListingLine(_sass_text(found["text"]), line, int(found["address"], 16)))
        elif kind == "line":
            line = int(found["line"])
        else:
            current.append(ListingLine(found["label"] + ":"))
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


def life_ranges(cubin: bytes) -> dict[str, list[LiveCount]]:
    """Per function, the live-register counts at each SASS instruction (`nvdisasm -plr -lrm count`), without PTX
    lines: nvdisasm ignores line info when it prints life ranges (`with_lines` adds them from a `-gp` listing)."""
    out: dict[str, list[LiveCount]] = {}
    current: list[LiveCount] | None = None
    fields: list[str | None] = []
    for raw in _nvdisasm(cubin, ["-c", "-plr", "-lrm", "count"]).splitlines():
        if raw.startswith(".text.") and (section := _TEXT_SECTION.match(raw)):
            current = out.setdefault(section.group(1), [])
        elif raw.lstrip().startswith("/*"):  # an instruction (the header and labels do not start so)
            columns = _COLUMNS.search(raw)
            if current is not None and columns and (address := _ADDRESS.match(raw)):
                cells = [c.strip() for c in columns.group(1).split("|")]
                counts = {f: int(c) for f, c in zip(fields, cells, strict=False) if f and c.isdigit()}
                current.append(LiveCount(int(address.group(1), 16), **counts))
        elif "GPR" in raw and (columns := _COLUMNS.search(raw)):
            cells = [c.strip() for c in columns.group(1).split("|")]
            if "GPR" in cells:
                fields = [_LIVE_FIELDS.get(c) for c in cells]
    if any(out.values()) and "gpr" not in fields:
        raise EnvironmentProblem("nvdisasm -plr printed life ranges without the GPR column ptxtool reads")
    return out


def with_lines(counts: dict[str, list[LiveCount]], lines: dict[str, list[ListingLine]]) -> dict[str, list[LiveCount]]:
    """The counts with the PTX line of each instruction, matched by address in a `-gp` listing of the same cubin."""
    out = {}
    for name, live in counts.items():
        where = {entry.address: entry.ptx_line for entry in lines.get(name, ()) if entry.address is not None}
        out[name] = [
            LiveCount(c.address, c.gpr, c.predicates, c.uniform, c.uniform_predicates, where.get(c.address, 0))
            for c in live
        ]
    return out


def instructions(lines: dict[str, list[ListingLine]]) -> dict[str, list[SassInstruction]]:
    """Instructions per function read from a listing: the opcodes and guards of `disassemble` (one nvdisasm run
    fewer where a caller has the listing anyway); operands as the listing spells them (`R1, R2`, not `R1,R2`)."""
    out = {}
    for name, entries in lines.items():
        ops = [parse_op(e.text) for e in entries if e.address is not None]
        out[name] = [SassInstruction(op.opcode, op.operands, op.predicate) for op in ops]
    return out


def live_by_line(counts: list[LiveCount]) -> dict[int, int]:
    """The most general registers live at any SASS instruction of each PTX line (instructions without a line are
    left out): the series to set beside the estimated pressure curve."""
    out: dict[int, int] = {}
    for c in counts:
        if c.ptx_line:
            out[c.ptx_line] = max(out.get(c.ptx_line, 0), c.gpr)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- control flow and order over a listing


@dataclass(frozen=True, slots=True)
class SassOp:
    """One instruction of a `-gp` listing: guard (`@!P0`), full opcode, operands and the PTX line it came from."""

    opcode: str
    operands: str = ""
    predicate: str = ""
    ptx_line: int = 0

    @property
    def mnemonic(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def is_memory(self) -> bool:
        return self.mnemonic in MEMORY

    @property
    def is_ordering(self) -> bool:
        """A barrier, fence, atomic, wait or call; or an access that is itself ordered (`LDG.E.STRONG.GPU`)."""
        return self.mnemonic in CLASSES["ordering"] or (self.is_memory and not STRONG.isdisjoint(self.modifiers))

    @property
    def counted(self) -> str | None:
        """The key this instruction counts under when two builds are compared: memory by full opcode, ordering and
        control flow by mnemonic; None for the rest (arithmetic, moves, descriptor loads, NOPs)."""
        if self.is_memory:
            return self.opcode
        if self.mnemonic in CLASSES["ordering"] or self.mnemonic in CLASSES["control"]:
            return self.mnemonic
        return None


def parse_op(text: str, ptx_line: int = 0) -> SassOp:
    """`@!P0 BRA `(.L_x_3)` -> SassOp('BRA', '`(.L_x_3)', '@!P0')."""
    words = text.split(None, 2 if text.startswith("@") else 1)
    predicate = words.pop(0) if text.startswith("@") else ""
    return SassOp(words[0], words[1] if len(words) > 1 else "", predicate, ptx_line)


_TARGET = re.compile(r"`\((\.L_\w+)\)")
_BRANCHES = frozenset(("BRA", "JMP"))
_INDIRECT = frozenset(("BRX", "BRXU", "JMX", "JMXU"))
_ENDS_BLOCK = _BRANCHES | _INDIRECT | frozenset(("EXIT", "RET", "KILL"))


def instructions_and_labels(lines: Sequence[ListingLine]) -> tuple[list[SassOp], dict[str, int]]:
    """One function's listing lines as its instructions, and each label with the index of the instruction it names."""
    ops: list[SassOp] = []
    labels: dict[str, int] = {}
    for entry in lines:
        if entry.text.endswith(":"):
            labels[entry.text[:-1]] = len(ops)
        else:
            ops.append(parse_op(entry.text, entry.ptx_line))
    return ops, labels


def basic_blocks(ops: Sequence[SassOp], labels: dict[str, int]) -> tuple[list[int], list[set[int]]]:
    """One function's basic-block starts (op indices) and each block's successors: a block ends at a label or after
    a branch, exit or return; a branch whose target the listing does not name (`BRX`, `JMX`) may go to any label."""
    leaders = {0, *labels.values()} | {n + 1 for n, op in enumerate(ops) if op.mnemonic in _ENDS_BLOCK}
    starts = sorted(n for n in leaders if n < len(ops))
    block_at = {start: b for b, start in enumerate(starts)}
    successors: list[set[int]] = []
    for b, end in enumerate([*starts[1:], len(ops)] if starts else []):
        last = ops[end - 1]
        out: set[int] = set()
        if last.predicate == "@!PT" or last.mnemonic not in _ENDS_BLOCK or last.predicate not in ("", "@PT"):
            out |= {b + 1} if b + 1 < len(starts) else set()  # falls through
        if last.predicate != "@!PT" and last.mnemonic in _BRANCHES | _INDIRECT:
            target = _TARGET.search(last.operands)
            known = labels.get(target.group(1)) if target and last.mnemonic in _BRANCHES else None
            heads = [known] if known is not None else list(labels.values())
            out |= {block_at[h] for h in heads if h in block_at}
        successors.append(out)
    return starts, successors


# An ordering instruction's identity across two builds of the same PTX: (PTX line, mnemonic, n-th such instruction).
OrderKey = tuple[int, str, int]


@dataclass
class SassCode:
    """One function's SASS as basic blocks. A block ends at a label or after a branch, exit or return; `reach[b]`
    is the bit set of blocks reachable from b by one edge or more (b itself only through a cycle)."""

    ops: list[SassOp]
    block_of: list[int]
    reach: list[int]
    keys: dict[int, OrderKey]  # op index -> identity, for ordering instructions
    _across: dict[int, tuple] = field(default_factory=dict, repr=False)  # per block: `around`'s parts, once

    @classmethod
    def of(cls, lines: list[ListingLine]) -> SassCode:
        ops, labels = instructions_and_labels(lines)
        starts, successors = basic_blocks(ops, labels)
        block_of = [0] * len(ops)
        for b, start in enumerate(starts):
            for i in range(start, starts[b + 1] if b + 1 < len(starts) else len(ops)):
                block_of[i] = b
        edges = [sum(1 << t for t in out) for out in successors]
        seen: Counter[tuple[int, str]] = Counter()
        keys = {}
        for i, op in enumerate(ops):
            if op.is_ordering:
                keys[i] = (op.ptx_line, op.mnemonic, seen[op.ptx_line, op.mnemonic])
                seen[op.ptx_line, op.mnemonic] += 1
        return cls(ops, block_of, _closure(edges), keys)

    @cached_property
    def memory_by_line(self) -> dict[int, list[int]]:
        """The indices of the memory instructions made from each PTX line."""
        out: dict[int, list[int]] = {}
        for i, op in enumerate(self.ops):
            if op.is_memory:
                out.setdefault(op.ptx_line, []).append(i)
        return out

    @cached_property
    def ordering(self) -> dict[OrderKey, str]:
        """Each ordering instruction's identity and full opcode."""
        return {key: self.ops[i].opcode for i, key in self.keys.items()}

    def around(self, index: int) -> tuple[frozenset[OrderKey], frozenset[OrderKey]]:
        """The ordering instructions on some path into `index` and on some path out of it: earlier (later) in its
        block, or in a block that reaches its block (that its block reaches)."""
        block = self.block_of[index]
        if block not in self._across:
            inside = [(i, key) for i, key in self.keys.items() if self.block_of[i] == block]
            into = {k for i, k in self.keys.items() if self.reach[self.block_of[i]] >> block & 1}
            out = {k for i, k in self.keys.items() if self.reach[block] >> self.block_of[i] & 1}
            self._across[block] = (inside, frozenset(into), frozenset(out))
        inside, into, out = self._across[block]
        return into | {k for i, k in inside if i < index}, out | {k for i, k in inside if i > index}


def _closure(edges: list[int]) -> list[int]:
    """Transitive closure of a successor bit-set graph (one edge or more)."""
    reach = list(edges)
    changed = True
    while changed:
        changed = False
        for b, bits in enumerate(reach):
            grown, rest = bits, bits
            while rest:
                low = rest & -rest
                grown |= reach[low.bit_length() - 1]
                rest ^= low
            if grown != bits:
                reach[b], changed = grown, True
    return reach


@dataclass(frozen=True, slots=True)
class Crossing:
    """A memory instruction of a PTX line that, in the second build, moved above (or below) an ordering
    instruction it stayed below (above) in the first."""

    ptx_line: int
    opcode: str
    ordering: str
    ordering_line: int
    above: bool

    def __str__(self) -> str:
        way = "above" if self.above else "below"
        return f"ptxas moved {self.opcode} {way} {self.ordering} (PTX line {self.ordering_line})"


def crossings(first: SassCode, second: SassCode, ptx_line: int) -> list[Crossing]:
    """How the memory instructions made from `ptx_line` crossed ordering instructions between two builds.

    An ordering instruction X (identified by its PTX line, mnemonic and occurrence) counts as before a memory
    instruction M when some path reaches M from X (see `SassCode.around`). Every M of the second build must keep
    before it each X that was before every M of the first build, and after it each X that was after every M of the
    first; X that only one build has are not compared. Where there is no M on either side (ptxas removed the
    access) nothing can cross.
    """
    old, new = first.memory_by_line.get(ptx_line, []), second.memory_by_line.get(ptx_line, [])
    if not old or not new:
        return []
    common = first.ordering.keys() & second.ordering.keys()
    sides = [first.around(i) for i in old]
    must_before = frozenset.intersection(*(b for b, _ in sides)) & common
    must_after = frozenset.intersection(*(a for _, a in sides)) & common
    names = second.ordering
    found = []
    for i in new:
        before, after = second.around(i)
        op = second.ops[i]
        found += [Crossing(ptx_line, op.opcode, names[k], k[0], True) for k in sorted(must_before - before)]
        found += [Crossing(ptx_line, op.opcode, names[k], k[0], False) for k in sorted(must_after - after)]
    return found

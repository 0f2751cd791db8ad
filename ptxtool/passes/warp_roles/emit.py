"""The PTX the split writes: statements from text, bodies rebuilt op by op, shared accesses moved into the ring
slot of the trip, and the slot, parity and mbarrier wait of trip %wr_k, in the forms the file's .version and
.target have (the ISA tables decide: `Forms`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ptxtool import isa
from ptxtool.analysis.legality import unmet_requirements
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.targets import Target, Version, version
from ptxtool.syntax import ast, parse

RING, FULL, EMPTY = "__wr_ring", "__wr_full", "__wr_empty"


def copied_label(key: str, name: str) -> str:
    """The pass's copy of input label `name` for `key` (which copy: `p`, `c`, `s1p`, `q0`: letters and digits),
    `$__wr_<key>` then the name: `$L` -> `$__wr_p$L`, `L` -> `$__wr_p_$L`, `%L` -> `$__wr_p_$$L`. A copy holds a
    `$` after the prefix, where the pass's own labels (`$__wr_producer`, `$__wr_staging1`, `$__wr_run3`) hold only
    letters, digits and `_`, and its key ends at that `$`: the copies are one to one over (key, label) and apart
    from the pass's own labels by construction."""
    assert key.isalnum() and key.isascii(), key
    if name.startswith("$"):
        return f"$__wr_{key}{name}"
    return f"$__wr_{key}_$${name[1:]}" if name.startswith("%") else f"$__wr_{key}_${name}"


def statements(body: str, target: Target | str = "sm_90") -> tuple[ast.Statement, ...]:
    """PTX statements from text (the pass writes its additions as PTX, not as node constructors)."""
    module = parse(f".version 8.0\n.target {target}\n.address_size 64\n.entry _wr() {{\n{body}\n}}\n")
    return module.functions[0].body.statements


def mapped(
    block: ast.Block,
    edit: Callable[[int, ast.Instruction], tuple[ast.Statement, ...]],
    labels: dict,
    start: int = 0,
) -> ast.Block:
    """Rebuild a body: each instruction (numbered as the Linear form numbers ops, the first `start`) replaced by
    `edit`'s statements, each label renamed through `labels`."""
    counter = [start]

    def walk(b: ast.Block) -> ast.Block:
        out: list[ast.Statement] = []
        for s in b.statements:
            if isinstance(s, ast.Instruction):
                out.extend(edit(counter[0], s))
                counter[0] += 1
            elif isinstance(s, ast.Block):
                out.append(walk(s))
            elif isinstance(s, ast.Label):
                out.append(replace(s, name=labels.get(s.name, s.name)))
            else:
                out.append(s)
        return replace(b, statements=tuple(out))

    return walk(block)


def rename_operand(operand: ast.Operand, names: dict[str, ast.Operand]) -> ast.Operand:
    """An operand with names replaced (labels, %tid.x, ring members), inside addresses and lists too."""
    if isinstance(operand, ast.Name):
        return names.get(operand.text, operand)
    if isinstance(operand, ast.Address) and isinstance(operand.base, ast.Name) and operand.base.text in names:
        new = names[operand.base.text]
        if isinstance(new, ast.SymbolOffset):  # [tile+8] -> [__wr_ring+(off+8)]
            extra = int(operand.offset.value) * (1 if operand.plus else -1) if operand.offset is not None else 0
            total = int(new.offset.value) + extra
            return ast.Address(new.symbol, ast.Immediate(str(abs(total))) if total else None, total >= 0)
        return replace(operand, base=new)
    if isinstance(operand, ast.Vector | ast.ParenList):
        return replace(operand, items=tuple(rename_operand(x, names) for x in operand.items))
    if isinstance(operand, ast.SymbolOffset) and operand.symbol.text in names:
        new = names[operand.symbol.text]
        if isinstance(new, ast.SymbolOffset):
            total = int(new.offset.value) + int(ast.constant_value(operand.offset))
            return ast.SymbolOffset(new.symbol, ast.Immediate(str(total)))
    return operand


def renamed(i: ast.Instruction, names: dict[str, ast.Operand]) -> ast.Instruction:
    return replace(i, operands=tuple(rename_operand(x, names) for x in i.operands))


def relocated(i: ast.Instruction, wide: Callable[[str], bool], offset: str = "%wr_off") -> tuple[ast.Statement, ...]:
    """A shared access moved into the current ring slot: each shared address plus the slot's offset (`offset`),
    through a scratch register of its own per operand."""
    out: list[ast.Statement] = []
    operands = list(i.operands)
    shared = [a for a, _, s in isa.memory_accesses(i) if s.startswith("shared")]
    for n, operand in enumerate(operands):
        if not isinstance(operand, ast.Address) or not any(a is operand for a in shared):
            continue
        base = operand.base.text
        if wide(base):
            out += statements(f"cvt.u64.u32 %wr_wide, {offset};\nadd.u64 %wr_ad{n}, {base}, %wr_wide;")
            operands[n] = replace(operand, base=ast.Name(f"%wr_ad{n}"))
        else:  # a 32-bit register or the ring's symbol
            out += statements(f"mov.u32 %wr_a{n}, {base};\nadd.u32 %wr_a{n}, %wr_a{n}, {offset};")
            operands[n] = replace(operand, base=ast.Name(f"%wr_a{n}"))
    return (*out, replace(i, operands=tuple(operands)))


def ring_layout(found: StagedLoop) -> tuple[dict[str, int], int]:
    """Each staged buffer's offset in one ring slot, and the slot's size (a multiple of 16: every slot aligned)."""
    offsets, total = {}, 0
    for b in found.buffers:
        total = -(-total // b.align) * b.align
        offsets[b.name] = total
        total += b.size
    return offsets, -(-total // 16) * 16


def slot_code(stages: int, stage_bytes: int, which: str) -> str:
    """PTX computing the slot of trip %wr_k, its parity, its ring offset and its `which` mbarrier's address."""
    return (
        f"rem.u32 %wr_slot, %wr_k, {stages};\ndiv.u32 %wr_ph, %wr_k, {stages};\nand.b32 %wr_ph, %wr_ph, 1;\n"
        f"mul.lo.u32 %wr_off, %wr_slot, {stage_bytes};\nmov.u32 %wr_bar, {which};\n"
        f"mad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;"
    )


@dataclass(frozen=True, slots=True)
class Forms:
    """How the split spells its mbarrier operations for one file: `wait` is `try_wait` (sm_90+: the thread may
    sleep in it) or `test_wait` (sm_80+: a probe; both are spun on until the phase completes, both acquire at CTA
    scope), `space` is `shared::cta` (PTX ISA 7.8+) or `shared` (the same state space, spelled as before 7.8)."""

    target: Target
    ptx: Version
    targets: tuple[Target, ...]
    wait: str
    space: str

    @classmethod
    def of(cls, module: ast.Module, target: Target) -> Forms:
        """The newest forms the ISA tables allow for the module's .version and .target list."""
        ptx = version(module.version or "") or (0, 0)
        targets = tuple(t for t in map(Target.parse, module.targets) if t is not None)
        plain = cls(target, ptx, targets, "test_wait", "shared")
        arrive = "mbarrier.arrive.{}.b64 %wr_state, [%wr_bar];"
        older = not plain.legal(arrive.format("shared::cta")) and plain.legal(arrive.format("shared"))
        space = "shared" if older else "shared::cta"  # where neither is legal, the refusal names the instruction
        trying = plain.legal(f"mbarrier.try_wait.parity.{space}.b64 %wr_done, [%wr_bar], 0;")
        wait = "try_wait" if trying else "test_wait"
        return cls(target, ptx, targets, wait, space)

    def unmet(self, i: ast.Instruction, known: frozenset[str] = frozenset()) -> str | None:
        """Why the file may not hold instruction `i` (what it needs and the file lacks), or None; requirements in
        `known` (the input's own) are the file's business, not the pass's."""
        unmet = unmet_requirements(i, self.ptx, self.targets)
        return next((why for what, why in unmet.items() if what not in known), None)

    def legal(self, text: str) -> bool:
        (i,) = statements(text, self.target)
        assert isinstance(i, ast.Instruction), text
        return self.unmet(i) is None

    def wait_code(self, label: str, parity: str) -> str:
        """Spin on the `%wr_bar` mbarrier until the phase of parity `parity` has completed."""
        return (
            f"{label}:\nmbarrier.{self.wait}.parity.{self.space}.b64 %wr_done, [%wr_bar], {parity};\n"
            f"@!%wr_done bra {label};"
        )

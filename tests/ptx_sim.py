"""A small CTA simulator for the PTX subset of the staged test kernels and what the warp-role pipeline makes of
them: a CPU oracle comparing a kernel's outputs before and after, bit for bit. Threads run one at a time up to
each CTA barrier; cp.async copies are held back until a wait makes them complete (in an order drawn from a seeded
RNG, reading their source then), so a missing wait or a wrong group count reads stale shared memory."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

from ptxtool.analysis.cfg import build_cfg
from ptxtool.syntax import ast, parse

_INT = {"b", "u", "s"}


def _bits(word: str) -> int | None:
    return int(word[1:]) if word[:1] in ("b", "u", "s", "f") and word[1:] in ("8", "16", "32", "64") else None


def _type(i: ast.Instruction) -> str:
    return next((m for m in reversed(i.modifiers) if _bits(m) or m == "pred"), "b32")


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _to_float(value: int, bits: int) -> float:
    return struct.unpack("<f" if bits == 32 else "<d", value.to_bytes(bits // 8, "little"))[0]


def _from_float(value: float, bits: int) -> int:
    return int.from_bytes(struct.pack("<f" if bits == 32 else "<d", value), "little")


@dataclass
class _Thread:
    tid: int
    regs: dict[str, int | bool] = field(default_factory=dict)
    pc: int = 0
    done: bool = False
    groups: list[list[tuple[int, int, int, int]]] = field(default_factory=list)  # committed groups of copies
    open: list[tuple[int, int, int, int]] = field(default_factory=list)  # (shared, global, size, src-size)


class Cta:
    """One CTA of `kernel` in `module_text`: `run(params, memory)` writes global memory (a bytearray at base 0)."""

    def __init__(self, module_text: str, threads: int, ctaid: int, seed: int = 0) -> None:
        module = parse(module_text)
        self.function = module.kernels[0]
        self.linear = build_cfg(self.function).linear
        self.threads, self.ctaid = threads, ctaid
        self.rng = random.Random(seed)
        self.symbols: dict[str, int] = {}
        size = 0
        for d in (n for n in ast.walk(self.function.body) if isinstance(n, ast.Declaration) and n.has(".shared")):
            for x in d.declarators:
                size = -(-size // 16) * 16
                self.symbols[x.name] = size
                bits = next(_bits(a.word.lstrip(".")) for a in d.attributes if _bits(a.word.lstrip(".")))
                size += int(ast.constant_value(x.dims[0])) * bits // 8
        self.shared = bytearray(size + 16)

    def value(self, t: _Thread, operand: ast.Operand, bits: int, params: dict[str, int]) -> int | bool:
        if isinstance(operand, ast.Immediate):
            v = ast.literal_value(operand.text)
            return _from_float(v, bits) if isinstance(v, float) else v & ((1 << bits) - 1)
        if isinstance(operand, ast.SymbolOffset):
            return self.symbols[operand.symbol.text] + int(ast.constant_value(operand.offset))
        assert isinstance(operand, ast.Name), operand
        text = operand.text
        if text == "%tid.x":
            return t.tid
        if text == "%ctaid.x":
            return self.ctaid
        if text == "%ntid.x":
            return self.threads
        if text in self.symbols:
            return self.symbols[text]
        if text in params:
            return params[text]
        return t.regs.get(text, 0)

    def address(self, t: _Thread, operand: ast.Address, params: dict[str, int]) -> int:
        base = self.value(t, operand.base, 64, params)
        extra = int(ast.constant_value(operand.offset)) if operand.offset is not None else 0
        return int(base) + (extra if operand.plus else -extra)

    def complete(self, t: _Thread, keep: int, memory: bytearray) -> None:
        """Complete all but the `keep` newest committed groups (their copies in a random order)."""
        while len(t.groups) > keep:
            group = t.groups.pop(0)
            self.rng.shuffle(group)
            for dst, src, size, read in group:
                assert dst + size <= len(self.shared) and src + read <= len(memory), "a copy out of bounds"
                self.shared[dst : dst + size] = bytes(memory[src : src + read]) + bytes(size - read)

    def step(self, t: _Thread, params: dict[str, int], memory: bytearray) -> str | None:
        """Run one instruction; "bar" at a CTA barrier, "ret" at the end."""
        op = self.linear.ops[t.pc]
        i = op.instruction
        t.pc += 1
        if i.guard is not None:
            taken = bool(t.regs.get(i.guard.predicate.text, False)) != i.guard.negated
            if not taken:
                return None
        kind = _type(i)
        bits = _bits(kind) or 1
        ops = i.operands
        name = i.opcode

        def get(n: int, width: int = bits) -> int:
            return int(self.value(t, ops[n], width, params))

        def put(v: int | bool) -> None:
            t.regs[ops[0].text] = v if kind == "pred" else int(v) & ((1 << bits) - 1)

        if name == "bra":
            t.pc = self.linear.labels[ops[0].text]
        elif name in ("ret", "exit"):
            return "ret"
        elif name == "bar":
            return "bar"
        elif name == "cp" and "async" in i.modifiers:
            mods = set(i.modifiers)
            if "commit_group" in mods:
                t.groups.append(t.open)
                t.open = []
            elif "wait_group" in mods:
                self.complete(t, get(0, 32), memory)
            elif "wait_all" in mods:
                t.groups.append(t.open)
                t.open = []
                self.complete(t, 0, memory)
            else:
                size = get(2, 32)
                read = get(3, 32) if len(ops) > 3 else size
                t.open.append((self.address(t, ops[0], params), self.address(t, ops[1], params), size, read))
        elif name == "ld":
            where = self.address(t, ops[1], params)
            if "param" in i.modifiers:
                put(params[ops[1].base.text])
            else:
                space = self.shared if "shared" in i.modifiers else memory
                assert 0 <= where and where + bits // 8 <= len(space), "a load out of bounds"
                put(int.from_bytes(space[where : where + bits // 8], "little"))
        elif name == "st":
            where = self.address(t, ops[0], params)
            space = self.shared if "shared" in i.modifiers else memory
            assert 0 <= where and where + bits // 8 <= len(space), "a store out of bounds"
            space[where : where + bits // 8] = (get(1) & ((1 << bits) - 1)).to_bytes(bits // 8, "little")
        elif name in ("mov", "cvta"):
            put(self.value(t, ops[1], bits, params) if kind == "pred" else get(1))
        elif name == "not" and kind == "pred":
            put(not self.value(t, ops[1], 1, params))
        elif name in ("and", "or") and kind == "pred":
            a, b = (bool(self.value(t, ops[k], 1, params)) for k in (1, 2))
            put(a and b if name == "and" else a or b)
        elif name == "selp":
            put(get(1) if self.value(t, ops[3], 1, params) else get(2))
        elif name == "setp":
            compare, word = i.modifiers[0], i.modifiers[-1]
            a, b = get(1, _bits(word)), get(2, _bits(word))
            if word[0] == "s":
                a, b = _signed(a, _bits(word)), _signed(b, _bits(word))
            elif word[0] == "f":
                a, b = _to_float(a, _bits(word)), _to_float(b, _bits(word))
            table = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}
            t.regs[ops[0].text] = table[compare]
        elif kind[0] == "f":
            args = [_to_float(get(k), bits) for k in range(1, len(ops))]
            result = {"fma": lambda: args[0] * args[1] + args[2], "add": lambda: args[0] + args[1]}
            result |= {"mul": lambda: args[0] * args[1], "sub": lambda: args[0] - args[1]}
            put(_from_float(struct.unpack("<f", struct.pack("<f", result[name]()))[0], bits))
        else:
            width = 2 * bits if "wide" in i.modifiers else bits
            args = [get(k) for k in range(1, len(ops))]
            if kind[0] == "s":
                args = [_signed(a, bits) for a in args]
            result = {
                "add": lambda: args[0] + args[1],
                "sub": lambda: args[0] - args[1],
                "mul": lambda: args[0] * args[1],
                "mad": lambda: args[0] * args[1] + args[2],
                "shl": lambda: args[0] << args[1],
                "shr": lambda: args[0] >> args[1],
                "and": lambda: args[0] & args[1],
                "or": lambda: args[0] | args[1],
                "xor": lambda: args[0] ^ args[1],
                "min": lambda: min(args[0], args[1]),
                "max": lambda: max(args[0], args[1]),
                "rem": lambda: args[0] - int(args[0] / args[1]) * args[1],
                "div": lambda: int(args[0] / args[1]),
            }[name]()
            t.regs[ops[0].text] = result & ((1 << width) - 1)
        return None

    def run(self, params: dict[str, int], memory: bytearray, limit: int = 1_000_000) -> None:
        threads = [_Thread(tid) for tid in range(self.threads)]
        steps = 0
        while not all(t.done for t in threads):
            for t in threads:
                while not t.done:
                    steps += 1
                    assert steps < limit, "the simulated CTA does not finish"
                    said = self.step(t, params, memory)
                    if said == "ret":
                        assert not t.open and not any(t.groups), f"thread {t.tid}: copies in flight at its exit"
                        t.done = True
                    if said == "bar":
                        break


def run_grid(
    module_text: str, threads: int, blocks: int, params: list[int], memory: bytearray, seed: int = 0, limit: int = 10**6
) -> None:
    """Run every CTA of a 1-D grid, one after the other, on one global memory (`params` in the kernel's order),
    each within `limit` instructions (AssertionError past it)."""
    names = [p.name for p in parse(module_text).kernels[0].params]
    given = dict(zip(names, params, strict=True))
    for ctaid in range(blocks):
        Cta(module_text, threads, ctaid, seed + ctaid).run(given, memory, limit)

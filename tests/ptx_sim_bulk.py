"""tests/ptx_sim_roles.py's CTA with what the bulk producers add: `cp.async.bulk ... complete_tx` (the copy
lands as late as allowed: when a thread would otherwise spin; its bytes then count down the mbarrier's tx-count),
`mbarrier.expect_tx` and `mbarrier.arrive.expect_tx`, and the warp collectives `bar.warp.sync` and `vote.sync.all`
as real warp barriers (a lane waits until all 32 of its warp reach it). A bulk copy asserts its alignment (16-byte
source, destination and size), so a trip that should have fallen back to cp.async fails loudly."""

from __future__ import annotations

from ptx_sim import _Thread
from ptx_sim_roles import RolesCta

from ptxtool.syntax import ast, parse


class BulkCta(RolesCta):
    def __init__(self, module_text: str, threads: int, ctaid: int, seed: int = 0) -> None:
        super().__init__(module_text, threads, ctaid, seed)
        self.tx: dict[int, int] = {}  # mbarrier address -> transaction bytes still expected
        self.bulk: list[tuple[int, int, int, int]] = []  # copies in flight: dst, src, size, mbarrier
        self.issued = 0  # bulk copies issued: the trips that took the bulk path, not the fallback
        self.warps: dict[tuple[int, int], list] = {}  # (warp, generation) -> lanes arrived, vote values

    def arrive(self, address: int) -> None:
        barrier = self.barriers[address]
        barrier[1] -= 1
        assert barrier[1] >= 0, f"more arrivals than the mbarrier at {address} expects"
        self.complete_phase(address)

    def complete_phase(self, address: int) -> None:
        barrier = self.barriers[address]
        if barrier[1] == 0 and self.tx.get(address, 0) == 0:
            barrier[0], barrier[1] = barrier[0] + 1, barrier[2]

    def land_bulk(self, memory: bytearray) -> None:
        dst, src, size, address = self.bulk.pop(self.rng.randrange(len(self.bulk)))
        self.shared[dst : dst + size] = memory[src : src + size]
        self.tx[address] -= size
        self.complete_phase(address)

    def collective(self, t: _Thread, value: bool) -> bool | None:
        """Lane `t` at a warp collective: None while some lane of its warp has not reached it, then the AND of the
        values they brought."""
        generation = getattr(t, "generation", 0)
        key = (t.tid // 32, generation)
        entry = self.warps.setdefault(key, [set(), True])
        if t.tid not in entry[0]:
            entry[0].add(t.tid)
            entry[1] = entry[1] and value
        if len(entry[0]) < 32:
            return None
        t.generation = generation + 1  # type: ignore[attr-defined]
        return entry[1]

    def step(self, t: _Thread, params: dict[str, int], memory: bytearray) -> str | None:
        i = self.linear.ops[t.pc].instruction
        family = self.families[t.pc]
        ops = i.operands
        ours = family.startswith(("mbarrier", "cp.async.bulk"))
        if i.guard is not None and ours:
            taken = bool(t.regs.get(i.guard.predicate.text, False)) != i.guard.negated
            if not taken:
                t.pc += 1
                return None
            i = ast.Instruction(i.opcode, i.modifiers, i.operands)  # the guard is decided
        if family in ("bar.warp.sync", "vote.sync"):
            value = bool(self.value(t, ops[1], 1, params)) if family == "vote.sync" else True
            result = self.collective(t, value)
            if result is None:
                if self.bulk and self.rng.random() < 0.5:
                    self.land_bulk(memory)
                return "bar"  # yield and retry
            if family == "vote.sync":
                t.regs[ops[0].text] = result
            t.pc += 1
            return None
        if family == "mbarrier.expect_tx":
            t.pc += 1
            address = self.address(t, ops[0], params)
            self.tx[address] = self.tx.get(address, 0) + int(self.value(t, ops[1], 32, params))
            return None
        if family == "mbarrier.arrive" and "expect_tx" in i.modifiers:
            t.pc += 1
            address = self.address(t, ops[1], params)
            self.tx[address] = self.tx.get(address, 0) + int(self.value(t, ops[2], 32, params))
            self.arrive(address)
            return None
        if family == "mbarrier.arrive":
            t.pc += 1
            self.arrive(self.address(t, ops[1], params))
            return None
        if family == "cp.async.bulk":
            t.pc += 1
            dst, src = self.address(t, ops[0], params), self.address(t, ops[1], params)
            size, barrier = int(self.value(t, ops[2], 32, params)), self.address(t, ops[3], params)
            assert dst % 16 == 0 and src % 16 == 0 and size % 16 == 0, ("a misaligned bulk copy", dst, src, size)
            assert self.tx.get(barrier, 0) > 0, "a bulk copy before its bytes were expected"
            self.bulk.append((dst, src, size, barrier))
            self.issued += 1
            return None
        if family in ("mbarrier.try_wait", "mbarrier.test_wait"):
            parity = int(self.value(t, ops[2], 32, params)) & 1
            if self.barriers[self.address(t, ops[1], params)][0] % 2 == parity and self.bulk:
                self.land_bulk(memory)  # the wait would fail: a copy in flight may land now
            return super().step(t, params, memory)
        if family.startswith("fence.proxy"):
            t.pc += 1
            return None
        if i.opcode == "cvt" and i.guard is None:
            t.pc += 1
            bits = int(i.modifiers[0][1:])
            t.regs[ops[0].text] = int(self.value(t, ops[1], 64, params)) & ((1 << bits) - 1)
            return None
        return super().step(t, params, memory)


def run_grid(
    module_text: str,
    threads: int,
    blocks: int,
    params: list[int],
    memory: bytearray,
    seed: int = 0,
    limit: int = 400_000,
) -> int:
    """Every CTA of a 1-D grid, one after the other; each must finish within `limit` instructions with no copy or
    arrival left in flight. Returns the bulk copies issued."""
    names = [p.name for p in parse(module_text).kernels[0].params]
    given = dict(zip(names, params, strict=True))
    issued = 0
    for ctaid in range(blocks):
        cta = BulkCta(module_text, threads, ctaid, seed + ctaid)
        cta.run(given, memory, limit)
        assert not any(cta.arrivals.values()), "asynchronous arrivals pending after the CTA finished"
        assert not cta.bulk, "bulk copies in flight after the CTA finished"
        issued += cta.issued
    return issued

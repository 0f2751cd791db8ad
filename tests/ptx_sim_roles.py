"""tests/ptx_sim.py's CTA simulator with the split's mbarriers: `mbarrier.init`, `mbarrier.arrive`, a failing
`mbarrier.try_wait.parity` or (sm_80) `mbarrier.test_wait.parity` (the thread yields and retries), and
`cp.async.mbarrier.arrive.noinc` (the arrival fires once all of the thread's earlier cp.asyncs have landed). Copies
land as late as the PTX ISA allows: only when a thread would otherwise spin (one random thread's oldest pending
arrival, its copies in a random order) or at that thread's `cp.async.wait_all`; so a consumer that read a slot before
its copies landed, a count that never completes a phase (the run does not finish), or a missing wait gives other bits
than the input's."""

from __future__ import annotations

from ptx_sim import Cta, _Thread

from ptxtool import isa
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.syntax import parse


class RolesCta(Cta):
    def __init__(self, module_text: str, threads: int, ctaid: int, seed: int = 0) -> None:
        super().__init__(module_text, threads, ctaid, seed)
        self.barriers: dict[int, list[int]] = {}  # address -> [phase, pending arrivals, expected arrivals]
        self.arrivals: dict[int, list[tuple[list[tuple[int, int, int, int]], int]]] = {}  # tid -> (copies, barrier)
        self.families = [isa.family(op.instruction) for op in self.linear.ops]

    def arrive(self, address: int) -> None:
        barrier = self.barriers[address]
        barrier[1] -= 1
        assert barrier[1] >= 0, f"more arrivals than the mbarrier at {address} expects"
        if barrier[1] == 0:
            barrier[0], barrier[1] = barrier[0] + 1, barrier[2]

    def land(self, tid: int, memory: bytearray) -> None:
        """Thread `tid`'s oldest pending asynchronous arrival: its copies land (in a random order), then it arrives."""
        copies, address = self.arrivals[tid].pop(0)
        self.rng.shuffle(copies)
        for dst, src, size, read in copies:
            self.shared[dst : dst + size] = bytes(memory[src : src + read]) + bytes(size - read)
        self.arrive(address)

    def step(self, t: _Thread, params: dict[str, int], memory: bytearray) -> str | None:
        i, family = self.linear.ops[t.pc].instruction, self.families[t.pc]
        if not family.startswith(("mbarrier", "cp.async.mbarrier", "cp.async.wait_all")):
            return super().step(t, params, memory)
        assert i.guard is None, i
        t.pc += 1
        ops = i.operands
        if family == "mbarrier.init":
            count = int(self.value(t, ops[1], 32, params))
            self.barriers[self.address(t, ops[0], params)] = [0, count, count]
        elif family == "mbarrier.arrive":
            self.arrive(self.address(t, ops[1], params))
        elif family == "cp.async.mbarrier.arrive":
            assert "noinc" in i.modifiers, i  # without it the arrival also adds one pending arrival: not modelled
            self.arrivals.setdefault(t.tid, []).append((t.open, self.address(t, ops[0], params)))
            t.open = []
        elif family in ("mbarrier.try_wait", "mbarrier.test_wait"):
            parity = int(self.value(t, ops[2], 32, params)) & 1
            done = self.barriers[self.address(t, ops[1], params)][0] % 2 != parity  # that phase has completed
            t.regs[ops[0].text] = done
            if not done:
                waiting = sorted(tid for tid, pending in self.arrivals.items() if pending)
                if waiting:
                    self.land(self.rng.choice(waiting), memory)
                return "bar"  # yield: the thread retries when it runs again
        else:  # cp.async.wait_all: this thread's copies have landed, those an arrival tracks too
            while self.arrivals.get(t.tid):
                self.land(t.tid, memory)
            t.pc -= 1
            return super().step(t, params, memory)
        return None


def run_grid(
    module_text: str,
    threads: int,
    blocks: int,
    params: list[int],
    memory: bytearray,
    seed: int = 0,
    limit: int = 200_000,
) -> None:
    """Run every CTA of a 1-D grid of `threads` threads (the split's grown block), one after the other, each within
    `limit` instructions (a CTA that does not finish fails an assertion)."""
    names = [p.name for p in parse(module_text).kernels[0].params]
    given = dict(zip(names, params, strict=True))
    for ctaid in range(blocks):
        cta = RolesCta(module_text, threads, ctaid, seed + ctaid)
        cta.run(given, memory, limit)
        assert not any(cta.arrivals.values()), "asynchronous arrivals pending after the CTA finished"


def block_threads(module_text: str) -> int:
    """The block the split kernel declares (`.reqntid N, 1, 1`)."""
    return block_bounds(parse(module_text).kernels[0]).dims[0]

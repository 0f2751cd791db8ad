"""The bytes one trip stages, as runs a `cp.async.bulk` can copy: every thread's staging writes of a trip (fills.py
runs the staging part for each thread of the block), laid out in a ring slot and grouped into runs of contiguous
shared bytes, each 16-byte aligned and a multiple of 16 bytes long (the ISA's rule for bulk copies).

What is proven here is the shared side alone: every thread writes the same bytes on every trip (fills.py), no two
writes of a trip share a byte (a bulk copy writes each byte once), and the runs tile those bytes exactly. That each
run's global source is contiguous, 16-byte aligned and read on the load path (not zero-filled) is not known from the
PTX (parameters, %ctaid, loop-carried pointers, 32-bit indices that may wrap): the producers check it at run time on
every trip and fall back to cp.async for a trip where it does not hold (bulk_producers.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.staging import StagedLoop
from ptxtool.isa.targets import BULK_COPY_ALIGN, MBARRIER_TX_COUNT_MAX
from ptxtool.passes.warp_roles.copies import staging_trace
from ptxtool.passes.warp_roles.emit import ring_layout
from ptxtool.passes.warp_roles.fills import Refused

NO_RUN = 0xFFFFFFFF  # a granule of the slot that no run covers (never looked up: no staging write lands there)


@dataclass(frozen=True)
class Run:
    """A run of `size` contiguous bytes from `start` in a ring slot, inside shared buffer `buffer`."""

    buffer: str
    start: int
    size: int


@dataclass(frozen=True)
class Footprint:
    """A trip's staged bytes as runs, in slot order, and which run each 16-byte granule of the slot belongs to."""

    runs: tuple[Run, ...]
    granules: tuple[int, ...]

    @property
    def total(self) -> int:
        """The bytes of one trip: what full[slot] expects on a bulk trip."""
        return sum(r.size for r in self.runs)


def footprint(cfg: CFG, found: StagedLoop) -> Footprint | tuple[int, str]:
    """The runs of one trip's staging writes over all threads, or (line, why they are not bulk-copyable)."""
    offsets, slot = ring_layout(found)
    trace, threads = staging_trace(cfg, found)
    words: list[tuple[int, int, str, int, int]] = []  # slot offset, size, buffer, thread, store op
    for tid in range(threads):
        try:
            writes = trace.writes(tid)
        except Refused as refused:
            return refused.line, refused.why
        words += [(offsets[w.buffer] + w.offset, w.size, w.buffer, tid, w.store) for w in writes]
    if not words:
        return cfg.linear.ops[found.stores[0]].line, "the staging stores write no bytes on a trip"
    words.sort()
    line = cfg.linear.ops
    for (a, n, buffer, t, at), (b, _, _, u, bt) in zip(words, words[1:], strict=False):
        if b < a + n:
            return line[bt].line, (
                f"the staging stores at lines {line[at].line} (thread {t}) and {line[bt].line} (thread {u}) write the "
                f"same bytes of {buffer} in one trip: a bulk copy writes each byte once"
            )
    segments: list[list] = []  # [buffer, start, end]
    for offset, size, buffer, _, _ in words:
        if segments and segments[-1][0] == buffer and segments[-1][2] == offset:
            segments[-1][2] += size
        else:
            segments.append([buffer, offset, offset + size])
    runs: list[Run] = []
    for buffer, start, end in segments:
        if start % BULK_COPY_ALIGN or end % BULK_COPY_ALIGN:
            at = next(w[4] for w in words if w[0] >= start)
            return line[at].line, (
                f"the staged bytes {start - offsets[buffer]}..{end - offsets[buffer] - 1} of {buffer} do not start "
                f"and end on {BULK_COPY_ALIGN}-byte boundaries of the ring slot: cp.async.bulk copies aligned "
                f"multiples of {BULK_COPY_ALIGN} bytes"
            )
        runs.append(Run(buffer, start, end - start))
    total = sum(r.size for r in runs)
    if total > MBARRIER_TX_COUNT_MAX:
        return line[words[0][4]].line, (
            f"a trip stages {total} bytes, more than an mbarrier's tx-count holds ({MBARRIER_TX_COUNT_MAX})"
        )
    granules = [NO_RUN] * (slot // BULK_COPY_ALIGN)
    for r, run in enumerate(runs):
        for g in range(run.start // BULK_COPY_ALIGN, (run.start + run.size) // BULK_COPY_ALIGN):
            granules[g] = r
    return Footprint(tuple(runs), tuple(granules))

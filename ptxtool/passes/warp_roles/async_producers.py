"""The split with cp.async producers (`--variant split-async`): the staging stores become cp.async as the pipeline
converts them (copies.py: every shared write of the staging part converts, one trip's copies write disjoint bytes
in each thread, zero-fill where the input stored zero), and each producer thread announces a trip with

    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [full+8*slot];

which arrives when all of the thread's earlier cp.asyncs have landed: a producer thread issues its loads and goes
on to the next trip's (up to S trips in flight) instead of waiting for each load before its st.shared.

`.noinc` makes that asynchronous arrival one of the arrivals full's init count expects (without it the instruction
first adds a pending arrival, which the thread would have to pay with a second, ordinary arrive), so the count stays
the producer threads, one arrival each per trip. The consumers' acquire wait on the completed phase sees the
copied bytes (PTX ISA, cp.async.mbarrier.arrive; the hand-written references' `cp_async_arrive`, ws.cuh). Producers
`cp.async.wait_all` before they return, so no copy of theirs outlives them.
"""

from __future__ import annotations

from collections.abc import Callable

from ptxtool.analysis.cfg import CFG
from ptxtool.analysis.dataflow.liveness import def_use
from ptxtool.analysis.loops import find_loops
from ptxtool.analysis.staging import StagedLoop
from ptxtool.passes.warp_roles.copies import AsyncCopy, async_copies, copying
from ptxtool.passes.warp_roles.emit import relocated
from ptxtool.passes.warp_roles.producers import Staging
from ptxtool.toolchain.sass import SassMark

VARIANT = "split-async"
ARRIVE = "cp.async.mbarrier.arrive.noinc.{space}.b64 [%wr_bar];"  # .shared before PTX ISA 7.8 (Forms)
SASS_PROOF = (SassMark("LDGSTS"),)  # the copies (their arrival: the generation's, toolchain.sass.MBARRIER_SASS)


def producer_copies(cfg: CFG, found: StagedLoop) -> tuple[AsyncCopy, ...] | tuple[int, str]:
    """The cp.async of every staging store (copies.py's conversion and proofs), or (line, why the producers cannot
    copy asynchronously)."""
    du = def_use(cfg)
    copies = async_copies(cfg, du, find_loops(cfg, du), found)
    if copies and isinstance(copies[0], int):
        line, why = copies
        return line, f"cp.async producers: {why}"
    return copies


def declarations(copies: tuple[AsyncCopy, ...]) -> str:
    """The registers the copies use: each one's source address, zero-fill flag and source size."""
    n = len(copies)
    return f".reg .pred %wr_cp<{n}>;\n.reg .b32 %wr_n<{n}>;\n.reg .b64 %wr_src<{n}>;"


def async_staging(copies: tuple[AsyncCopy, ...], wide: Callable[[str], bool], registers: frozenset[str]) -> Staging:
    """The producers' staging with cp.async: each load only takes its address (and, where the input may store a
    zero instead, sets the copy's flag), each store becomes the copy into the slot; arrival and exit as above."""
    return Staging(copying(copies, registers, lambda i: relocated(i, wide)), ARRIVE, "cp.async.wait_all;")

"""Definitions evaluated sources first, once each: the walk both thread evaluators (copies.py per thread, sources.py
for all threads at once) make over a definition's sources."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import TypeVar

V = TypeVar("V")


def memoized(
    at: int,
    memo: MutableMapping[int, V | None],
    sources: Callable[[int], list[int] | None],
    evaluate: Callable[[int], V | None],
) -> V | None:
    """`memo[at]`, after evaluating each definition it reads that `memo` lacks, sources first, with a stack of our
    own (address chains run deeper than Python's recursion limit). `sources(d)` is None where `d` has no value to
    evaluate; a source still in progress when `evaluate` reads it is a cycle, and reads as missing from `memo`."""
    work, started = [at], set()
    while work:
        top = work[-1]
        if top in memo:
            work.pop()
            continue
        needed = sources(top)
        if needed is None:
            memo[top] = None
            continue
        waiting = [d for d in needed if d not in memo and d not in started]
        if waiting and top not in started:
            started.add(top)
            work.extend(waiting)
            continue
        work.pop()
        memo[top] = evaluate(top)
    return memo[at]

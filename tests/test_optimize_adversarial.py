"""Adversarial kernels against `ptxtool optimize`'s promises (issue 10): each shape is one someone hunting
miscompiles would write — pointers swapped around a loop, polls the CFG does not show as loops, splices of odd
layouts — run with default settings and with `--noalias '*'` (tests/data/adversarial/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxtool.passes.cache_operators import Settings, cache_operators
from ptxtool.syntax import parse

DATA = Path(__file__).parent / "data" / "adversarial"
DEFAULT, NOALIAS = Settings(), Settings(noalias=("*",))
BOTH = pytest.mark.parametrize("settings", [DEFAULT, NOALIAS], ids=["default", "noalias"])


def _nc_added(text: str, settings: Settings) -> dict[str, list[int]]:
    """Per kernel, the lines whose load gained `.nc`."""
    _, report = cache_operators(parse(text), settings)
    out: dict[str, list[int]] = {}
    for r in report.rewrites:
        if ".nc." in r.after and ".nc." not in r.before:
            out.setdefault(r.kernel, []).append(r.line)
    return out


def _line(text: str, needle: str) -> int:
    """The 1-based line of the only line holding needle."""
    (line,) = [n for n, t in enumerate(text.splitlines(), 1) if needle in t]
    return line


# ---------------------------------------------------------------- what the kernel may write


@BOTH
def test_pointers_swapped_around_a_loop(settings: Settings) -> None:
    """Ping-pong buffers: the loop reads one pointer and writes the other, then swaps them, so both buffers are
    written; the load's base is not the parameter it started from (with `--noalias` it used to become `.nc`)."""
    assert _nc_added((DATA / "swap.ptx").read_text(), settings) == {}


def test_pointer_moved_in_a_loop_keeps_its_base() -> None:
    """The near miss: a pointer bumped by a loaded amount each trip stays in its buffer, and `.nc` stays."""
    text = (DATA / "swap.ptx").read_text()
    text = text.replace("\tmov.u64 \t%rd3, %rd4;\n", "\tadd.s64 \t%rd3, %rd3, %rd5;\n")
    text = text.replace("\tmov.u64 \t%rd4, %rd8;\n", "\tadd.s64 \t%rd4, %rd4, %rd5;\n")
    assert _nc_added(text, NOALIAS) == {"pingpong": [_line(text, "ld.global.f32")]}


@BOTH
def test_register_shadowed_by_an_inner_block(settings: Settings) -> None:
    """An inner `{ .reg .b64 %rd4; ... }` does not make the outer %rd4 (the written param_1) look like param_0."""
    assert _nc_added((DATA / "shadow.ptx").read_text(), settings) == {}


# ---------------------------------------------------------------- polls the CFG does not show as a loop


@BOTH
@pytest.mark.parametrize(
    "name",
    [
        "recpoll",  # wait() { if (!flag[0]) wait(); }: tail recursion, no loop in any CFG
        "brxpoll",  # the spin's exit is brx.idx on the flag: no guarded branch depends on it
        "smempoll",  # if (tid == 0) s = flag[0]; __syncthreads(); while (s == 0): through shared memory
        "callpoll",  # while (read_flag(flag) == 0): the load is in a non-inlined callee, the loop in the kernel
    ],
)
def test_polls_block_nc(name: str, settings: Settings) -> None:
    """Each kernel spins on a flag another grid sets, then reads data that grid wrote: no `.nc` anywhere in it
    (the flag load itself became `.nc` in brxpoll and smempoll: the spin would never end)."""
    assert _nc_added((DATA / f"{name}.ptx").read_text(), settings) == {}


def test_recursion_without_loads_is_no_poll() -> None:
    """The near miss of recpoll: a recursive callee that reads no memory cannot wait for anyone."""
    text = (DATA / "recpoll.ptx").read_text().replace("\tld.global.u32 \t%r1, [%rd2];\n", "\tmov.u32 \t%r1, 0;\n")
    assert _nc_added(text, NOALIAS) == {"consumer": [_line(text, "ld.global.f32")]}

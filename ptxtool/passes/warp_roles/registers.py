"""setmaxnreg for the split (sm_90a and the other targets the opcode table gives it): registers move from
producer warpgroups to consumer warpgroups within the CTA's pool."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.isa.opcodes import OPCODES
from ptxtool.isa.targets import (
    MAX_REGISTERS_PER_THREAD,
    REGISTERS_PER_CTA,
    SETMAXNREG_RANGE,
    SETMAXNREG_STEP,
    WARPGROUP_WARPS,
    Target,
    version,
)
from ptxtool.syntax import ast

PRODUCER_REGISTERS = (40, 32, 24)  # what producers keep, most first (CUTLASS and DeepGEMM keep 40, others 24)


@dataclass(frozen=True)
class RegisterSplit:
    """The kernel launches with `launch` registers per thread (`.maxnreg`); producers `setmaxnreg.dec` to
    `producers`, consumers `setmaxnreg.inc` to `consumers`, within the CTA's pool."""

    launch: int
    producers: int
    consumers: int


def launch_registers(threads: int) -> int:
    """The registers per thread a block of `threads` may launch with, a multiple of setmaxnreg's step."""
    return min(REGISTERS_PER_CTA // threads, MAX_REGISTERS_PER_THREAD) // SETMAXNREG_STEP * SETMAXNREG_STEP


def register_split(
    module: ast.Module, function: ast.Function, consumers: int, producers: int, registers: int | None
) -> RegisterSplit | str:
    """The setmaxnreg split for `consumers` + `producers` threads (consumers needing ptxas's `registers` of the
    input), or why there is none. Warpgroup-aligned roles, a target with setmaxnreg, no register directive of the
    kernel's own, and consumers x C + producers x D within launch x threads (else `.inc` would wait forever)."""
    low, high = SETMAXNREG_RANGE
    total = consumers + producers
    launch = launch_registers(total)
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    ptx = version(module.version or "") or (0, 0)
    need = OPCODES["setmaxnreg"].needs
    if arch is None or not any(n.target_ok(arch) and ptx >= n.ptx for n in need):
        return f"setmaxnreg needs {' or '.join(f'{n.target} (PTX ISA {n.ptx[0]}.{n.ptx[1]})' for n in need)}"
    group = 32 * WARPGROUP_WARPS
    if consumers % group or producers % group:
        return (
            f"setmaxnreg needs roles of whole warpgroups ({WARPGROUP_WARPS} warps): "
            f"{consumers // 32} consumer warps + {producers // 32} producer warps"
        )
    own = [d.word for d in function.directives if d.word in (".maxnreg", ".minnctapersm")]
    if own:
        return f"the kernel declares {own[0]}, which setmaxnreg's launch count would override"
    floor = max(registers or 0, launch + SETMAXNREG_STEP)
    for keep in PRODUCER_REGISTERS:
        room = (launch * total - producers * keep) // consumers
        given = min(high, room // SETMAXNREG_STEP * SETMAXNREG_STEP)
        if keep <= launch and given >= floor:
            return RegisterSplit(launch, keep, given)
    best = min(high, (launch * total - producers * low) // consumers // SETMAXNREG_STEP * SETMAXNREG_STEP)
    what = f"consumers need {registers}" if registers and registers > launch else f"consumers launch with {launch}"
    return f"setmaxnreg cannot make room: {what}, producers at {low} leave them {best}"

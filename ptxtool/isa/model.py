"""The shapes of ISA facts: operand roles, side effects, memory accesses, and what one instruction family needs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, Flag, auto

from ptxtool.isa.targets import Need


class Role(Enum):
    """What an instruction does with an operand. Names that are not registers (labels, symbols) are ignored by
    the analyses, so a role only says what happens *if* the operand is a register."""

    DEF = "def"  # written
    USE = "use"  # read (addresses are uses: `st [a], b` reads both a and b)
    DEF_USE = "def+use"  # read and written (wgmma accumulators)
    TARGET = "target"  # a branch target label or `.branchtargets` list: never a register


class Effect(Flag):
    """Side effects an optimizer must respect beyond the registers an instruction defines."""

    NONE = 0
    BARRIER = auto()  # waits for other threads (bar, barrier.cluster, mbarrier waits)
    FENCE = auto()  # orders memory (fence, membar, wgmma.fence, fence.proxy)
    ATOMIC = auto()  # read-modify-write (atom, red, mbarrier arrive)
    ASYNC = auto()  # starts or completes work outside the thread's program order (async proxy, cp.async, wgmma)
    COLLECTIVE = auto()  # all threads of a warp (or warpgroup) must execute it together (.sync.aligned, shfl.sync)
    BRANCH = auto()  # transfers control (bra, brx.idx)
    CALL = auto()  # calls a function
    RETURN = auto()  # leaves the function or the thread (ret, exit)
    TRAP = auto()  # stops the program (trap, brkpt)
    RESOURCE = auto()  # changes the thread's resources (setmaxnreg, alloca, stackrestore, tcgen05.alloc)


class Mode(Enum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read+write"


@dataclass(frozen=True, slots=True)
class Access:
    """A memory access made through operand `operand`: read and/or written, in the state space named by the
    `slot`-th state-space modifier (0 = the first, the destination of a copy; 1 = the second, its source)."""

    operand: int
    mode: Mode
    slot: int = 0


@dataclass(frozen=True, slots=True)
class InstructionInfo:
    """Everything the tables know about one instruction family (`ld`, `mbarrier.try_wait`, `wgmma.mma_async`).

    `roles` is a pattern over the operands: one Role per position, the last one repeating for the rest.
    `space` is the state space when no modifier names one (`generic` for ld/st, None when not a memory op).
    """

    family: str
    roles: tuple[Role, ...]
    effects: Effect = Effect.NONE
    accesses: tuple[Access, ...] = ()
    space: str | None = None
    needs: tuple[Need, ...] = ()

    @property
    def writes_memory(self) -> bool:
        return any(a.mode is not Mode.READ for a in self.accesses)


@dataclass(frozen=True, slots=True)
class Feature:
    """A modifier (or special register, or directive) that needs more than its instruction: `.shared::cluster`,
    `.L2::cache_hint`, `.e4m3`, `%cluster_ctarank`. `families` limits it to some instruction families (empty: any)."""

    name: str
    needs: tuple[Need, ...]
    families: tuple[str, ...] = ()

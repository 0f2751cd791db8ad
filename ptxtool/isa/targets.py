"""PTX ISA versions and `.target` architectures, and the rule that decides whether a target has a feature.

A feature needs `sm_N` (any target numbered N or above), `sm_Na` (exactly that architecture-specific target) or
`sm_Nf` (a family-specific or architecture-specific target of the same family, numbered N or above).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.syntax.names import TARGET

Version = tuple[int, int]

# The most threads a block may have in x, y and z, and in all: CUDA's limits on every target ptxas still accepts.
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024


@dataclass(frozen=True, slots=True)
class Target:
    """One `.target` architecture such as `sm_90a`: its number and suffix (`""`, `"a"` or `"f"`)."""

    number: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> Target | None:
        match = TARGET.fullmatch(text)
        return cls(int(match[1]), match[2]) if match else None

    @property
    def family(self) -> int:
        """The family a target belongs to: sm_100 and sm_103 share one, sm_120 and sm_121 another."""
        return self.number // 10

    def __str__(self) -> str:
        return f"sm_{self.number}{self.suffix}"


@dataclass(frozen=True, slots=True)
class Need:
    """One way to get a feature: this PTX ISA version and this target (`sm_80`, `sm_90a`, `sm_100f`)."""

    ptx: Version
    target: str

    def target_ok(self, target: Target) -> bool:
        need = Target.parse(self.target)
        if need is None:
            raise ValueError(f"bad target in ISA table: {self.target}")
        if need.suffix == "a":
            return target == need
        if need.suffix == "f":
            return target.suffix in ("a", "f") and target.family == need.family and target.number >= need.number
        return target.number >= need.number

    def __str__(self) -> str:
        return f"PTX ISA {self.ptx[0]}.{self.ptx[1]} and .target {self.target}"


def version(text: str) -> Version | None:
    """`"8.0"` -> (8, 0); None when the text is not a version."""
    major, _, minor = text.partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def version_text(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


# The PTX ISA version that introduced each target ptxas 13 still accepts (the `a` and `f` variants included).
TARGET_INTRODUCED: dict[str, Version] = {
    "sm_75": (6, 3),
    "sm_80": (7, 0),
    "sm_86": (7, 1),
    "sm_87": (7, 4),
    "sm_88": (9, 0),
    "sm_89": (7, 8),
    "sm_90": (7, 8),
    "sm_90a": (8, 0),
    "sm_100": (8, 6),
    "sm_100a": (8, 6),
    "sm_100f": (8, 8),
    "sm_103": (8, 8),
    "sm_103a": (8, 8),
    "sm_103f": (8, 8),
    "sm_107": (9, 4),
    "sm_107a": (9, 4),
    "sm_107f": (9, 4),
    "sm_110": (9, 0),
    "sm_110a": (9, 0),
    "sm_110f": (9, 0),
    "sm_120": (8, 7),
    "sm_120a": (8, 7),
    "sm_120f": (8, 8),
    "sm_121": (8, 8),
    "sm_121a": (8, 8),
    "sm_121f": (8, 8),
}

# The most shared memory one block may use (bytes, opted in beyond 48 KB), by target number: CUDA C Programming
# Guide, "Technical Specifications per Compute Capability".
SHARED_PER_BLOCK: dict[int, int] = {
    75: 65536,
    80: 166912,
    86: 101376,
    87: 166912,
    89: 101376,
    90: 232448,
    100: 232448,
    103: 232448,
    120: 101376,
    121: 101376,
}


# ptxas's limit on the `.shared` variables of one kernel (static shared memory) on every target: more must be
# dynamic shared memory (`.extern .shared`, opted in at launch).
STATIC_SHARED_PER_BLOCK = 48 * 1024


def shared_limit(target: Target) -> int | None:
    """The shared memory one block of this target may use, or None for a target the table does not know."""
    return SHARED_PER_BLOCK.get(target.number)


# setmaxnreg (PTX ISA, "Miscellaneous Instructions: setmaxnreg"): the new per-thread count is an immediate, a
# multiple of 8 in 24..256; every warp of a warpgroup (4 consecutive warps) must execute the same setmaxnreg; the
# registers an `.inc` takes come from the CTA's pool, which only `.dec`s fill (the launch count x threads in all).
SETMAXNREG_RANGE = (24, 256)
SETMAXNREG_STEP = 8
WARPGROUP_WARPS = 4
REGISTERS_PER_CTA = 65536  # the register file one block may use (sm_50 and later)
MAX_REGISTERS_PER_THREAD = 255

# cp.async.bulk (global -> shared, PTX ISA "cp.async.bulk"): source and destination 16-byte aligned, a size that is a
# multiple of 16; an mbarrier's tx-count holds at most 2^20 - 1 pending bytes ("mbarrier: tx-count").
BULK_COPY_ALIGN = 16
MBARRIER_TX_COUNT_MAX = (1 << 20) - 1

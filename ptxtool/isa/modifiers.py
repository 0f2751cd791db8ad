"""Every modifier some instruction families may carry (the PTX ISA manual's syntax blocks), so `parse --check` can
reject one a family does not have at all (`redux.sync.umax`), as ptxas does. Families not listed go unchecked.

Each entry lists the words that may follow the family's own name; `TYPES` marks a family that also takes any
fundamental type (the type is not checked: only words that are neither a listed modifier nor a type are flagged).
"""

from __future__ import annotations

from ptxtool.isa.caching import LOAD_CACHE_OPERATORS, STORE_CACHE_OPERATORS

TYPES = "<type>"

FUNDAMENTAL_TYPES = frozenset(f"{kind}{bits}" for kind in "subf" for bits in (8, 16, 32, 64, 128)) | frozenset(
    ("pred", "f16x2", "bf16", "bf16x2", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2", "e2m1x2", "e2m3x2", "e3m2x2")
    + ("ue8m0x2", "s2f6x2", "e4m3x4", "e5m2x4", "e2m1x4", "e2m3x4", "e3m2x4")
)

_SEM = ("relaxed", "acquire", "release", "acq_rel")
_SCOPE = ("cta", "cluster", "gpu", "sys")
_ATOMIC_SPACE = ("global", "shared", "shared::cta", "shared::cluster")
_BARRIER = ("cta", "sync", "arrive", "red", "popc", "and", "or", "u32", "pred")
_MEMORY_SPACE = ("const", "global", "local", "param", "param::entry", "param::func", *_ATOMIC_SPACE[1:])
_EVICTION = ("L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate")
_L2 = ("L2::evict_normal", "L2::evict_first", "L2::evict_last", "L2::cache_hint", "L2::64B", "L2::128B", "L2::256B")
_LDST = (*_MEMORY_SPACE, "weak", "volatile", "relaxed", "mmio", *_SCOPE, *_EVICTION, *_L2, "v2", "v4", "v8")
_CMP = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")
_CMP_FLOAT = ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")

# family: the modifiers it may carry after its own name, in the manual's order
MODIFIERS: dict[str, tuple[str, ...]] = {
    "ld": (*_LDST, "acquire", *sorted(LOAD_CACHE_OPERATORS), "nc", TYPES),
    "st": (*_LDST, "release", *sorted(STORE_CACHE_OPERATORS), TYPES),
    "redux.sync": ("add", "min", "max", "and", "or", "xor", "abs", "NaN", "u32", "s32", "b32", "f32"),
    "vote": ("all", "any", "uni", "ballot", "pred", "b32"),
    "vote.sync": ("all", "any", "uni", "ballot", "pred", "b32"),
    "shfl": ("up", "down", "bfly", "idx", "b32"),
    "shfl.sync": ("up", "down", "bfly", "idx", "b32"),
    "bar": _BARRIER,  # `bar.sync.aligned` is rejected: only `barrier` takes .aligned
    "bar.red": ("popc", "and", "or", "u32", "pred"),
    "bar.warp.sync": (),
    "barrier": (*_BARRIER, "aligned"),
    "barrier.red": ("popc", "and", "or", "u32", "pred", "aligned"),
    "barrier.cluster": ("arrive", "wait", "release", "relaxed", "acquire", "aligned"),
    "cvt": ("rn", "rz", "rm", "rp", "rna", "rs", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "satfinite", "relu", TYPES),
    "setp": (*_CMP, *_CMP_FLOAT, "and", "or", "xor", "ftz", TYPES),
    "atom": (*_SEM, *_SCOPE, *_ATOMIC_SPACE, "and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max")
    + ("noftz", "L2::cache_hint", "v2", "v4", "v8", TYPES),
    "red": (*_SEM, *_SCOPE, *_ATOMIC_SPACE, "and", "or", "xor", "add", "inc", "dec", "min", "max")
    + ("noftz", "L2::cache_hint", "v2", "v4", "v8", TYPES),
}


def unknown(family: str, modifiers: tuple[str, ...]) -> list[str]:
    """The modifiers (after the family's own name) that the family does not have; [] for an unchecked family."""
    allowed = MODIFIERS.get(family)
    if allowed is None:
        return []
    rest = modifiers[family.count(".") :]
    return [m for m in rest if m not in allowed and not (TYPES in allowed and m in FUNDAMENTAL_TYPES)]

"""What may be computed again elsewhere with the same result: instruction families whose integer result depends
only on their operands (no memory, no state, no rounding), and special registers that keep one value per thread
for a whole launch. A rematerializing pass recomputes only these (loads are a memory question, not listed here).
"""

from __future__ import annotations

from ptxtool.isa.caching import TYPE_BITS

# Exact integer and address arithmetic (with an integer type only: `add.f32` rounds, and is never recomputed).
PURE_INTEGER = frozenset(
    (
        *("mov", "cvta", "cvt", "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "neg", "abs", "min", "max"),
        *("shl", "shr", "shf", "and", "or", "xor", "not", "cnot", "bfe", "bfi", "prmt", "bmsk", "szext"),
        *("popc", "clz", "brev"),
    )
)
# Modifiers that make one of them read or write state beyond its operands (the carry flag of `add.cc`/`addc`).
STATEFUL = frozenset(("cc",))

# One value per thread for the launch (not %smid, %warpid: a preempted warp may move; nor clocks and counters).
INVARIANT_SPECIAL_REGISTERS = frozenset(
    (
        *(f"%{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid", "cluster_ctaid", "cluster_nctaid") for d in "xyz"),
        *(f"%{r}.{d}" for r in ("clusterid", "nclusterid") for d in "xyz"),
        "%tid",
        "%ntid",
        "%ctaid",
        "%nctaid",
        "%laneid",
        "%gridid",
        "%cluster_ctarank",
        "%cluster_nctarank",
        "%is_explicit_cluster",
        *(f"%lanemask_{m}" for m in ("eq", "le", "lt", "ge", "gt")),
        "%dynamic_smem_size",
        "%total_smem_size",
        "%aggr_smem_size",
    )
)


def integer_type(word: str) -> bool:
    """Whether a type word (without the dot) is a signed, unsigned or untyped integer of 8 to 64 bits."""
    return word[:1] in ("s", "u", "b") and word[1:].isdigit() and TYPE_BITS.get(word, 0) in (8, 16, 32, 64)

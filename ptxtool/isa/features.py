"""Modifiers, types, special registers and directives that need a newer PTX ISA or target than their instruction.

Each row: the modifier as written without its dot (or several adjacent ones joined by dots: `f32.bf16`), the
instruction families it applies to (empty: any), and the Need alternatives (syntax as in opcodes.py). A family
matches a row when it equals one listed or starts with it and a dot (`mbarrier` covers `mbarrier.arrive`).
"""

from __future__ import annotations

from ptxtool.isa.model import Feature
from ptxtool.isa.opcodes import needs

_ARITH = ("add", "sub", "mul", "fma", "neg", "abs")
_MEM = ("ld", "st", "atom", "red")
_SM100_A = "8.6 sm_100a | 8.6 sm_120a | 8.8 sm_100f | 8.8 sm_120f | 9.0 sm_110f"
_SM100_ONLY = "8.6 sm_100a | 9.0 sm_110a | 8.8 sm_100f | 9.0 sm_110f"

_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # memory consistency model: semantics and scopes
    *((sem, ("ld", "st"), "6.0 sm_70") for sem in ("relaxed", "acquire", "release", "volatile_sc")),
    *((scope, ("ld", "st"), "6.0 sm_70") for scope in ("cta", "gpu", "sys")),
    *((sem, ("atom", "red"), "6.0 sm_70") for sem in ("relaxed", "acquire", "release", "acq_rel")),
    *((scope, ("atom", "red"), "5.0 sm_60") for scope in ("cta", "gpu", "sys")),
    ("cluster", (), "7.8 sm_90"),
    ("mmio", ("ld", "st"), "8.2 sm_70"),
    ("alias", ("fence",), "7.5 sm_70"),
    ("shared::cluster", (), "7.8 sm_90"),
    ("shared::cta", (), "7.8 sm_10"),
    # cache and eviction hints
    ("L2::cache_hint", (*_MEM, "cp.async", "prefetch"), "7.4 sm_80"),
    ("L2::64B", ("ld", "cp.async"), "7.4 sm_75"),
    ("L2::128B", ("ld", "cp.async"), "7.4 sm_75"),
    ("L2::256B", ("ld", "cp.async"), "7.4 sm_80"),
    *((hint, ("ld", "st"), "7.4 sm_70") for hint in ("L1::evict_normal", "L1::evict_unchanged")),
    *((hint, ("ld", "st"), "7.4 sm_70") for hint in ("L1::evict_first", "L1::evict_last", "L1::no_allocate")),
    *((hint, ("prefetch",), "7.4 sm_80") for hint in ("L2::evict_last", "L2::evict_normal")),
    ("nc", ("ld",), "3.1 sm_32"),
    ("v8", ("ld", "st"), "8.8 sm_100"),
    # floating-point types and modes in arithmetic
    *((t, _ARITH, "4.2 sm_53") for t in ("f16", "f16x2")),
    *((t, ("min", "max"), "7.0 sm_80") for t in ("f16", "f16x2")),  # half min/max came with sm_80, not sm_53
    *((t, ("add", "sub", "min", "max"), "8.0 sm_90") for t in ("u16x2", "s16x2")),  # packed 16-bit integer SIMD
    *(("f32x2", (op,), "8.6 sm_100") for op in ("add", "sub", "mul", "fma")),
    *((f"f32.{t}", ("add", "sub", "fma"), "8.6 sm_100") for t in ("f16", "bf16")),  # mixed precision (Triton)
    *((t, ("fma", "neg", "abs", "min", "max"), "7.0 sm_80") for t in ("bf16", "bf16x2")),
    *((t, ("add", "sub", "mul", "ex2"), "7.8 sm_90") for t in ("bf16", "bf16x2")),
    ("relu", ("fma", "min", "max", "cvt"), "7.0 sm_80"),
    *((f"relu.{t}", ("min", "max"), "8.0 sm_90") for t in ("s16x2", "s32")),
    ("NaN", ("min", "max"), "7.0 sm_80"),
    ("xorsign", ("min", "max"), "7.2 sm_86"),
    ("oob", ("fma",), "8.1 sm_90"),
    # conversions
    *((t, ("cvt",), "7.8 sm_89") for t in ("e4m3x2", "e5m2x2")),
    *((t, ("cvt",), _SM100_A) for t in ("e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2")),
    *((t, ("cvt",), "7.0 sm_80") for t in ("bf16", "bf16x2", "tf32", "f16x2")),
    ("f32.bf16", ("cvt",), "7.1 sm_80"),
    *((f"{r}.tf32.f32", ("cvt",), "7.8 sm_90") for r in ("rn", "rz")),
    ("param", ("cvta", "isspacep"), "7.7 sm_70"),
    ("rs", ("cvt",), "8.7 sm_100a | 8.8 sm_103a"),
    # PTX ISA 9.5
    ("2pi", ("sin", "cos"), "9.5 sm_80"),
    ("commit_group", ("fabric.submit",), "9.5 sm_100"),
    ("sync_restrict::read", ("fabric.wait", "fence"), "9.5 sm_90"),
    ("sync_restrict::proxy::async", ("cp.async.bulk.wait_group",), "9.5 sm_90"),
    # atomics
    ("f64", ("atom", "red"), "5.0 sm_60"),
    *((t, ("atom", "red"), "6.3 sm_70") for t in ("f16", "f16x2")),
    *((t, ("atom", "red"), "7.8 sm_90") for t in ("bf16", "bf16x2")),
    ("b128", ("atom",), "8.3 sm_90"),
    *((v, ("atom", "red"), "8.1 sm_90") for v in ("v2", "v4", "v8")),
    # warp-level matrix multiply: shapes and types
    ("m8n8k4", ("mma",), "6.4 sm_70"),
    *((shape, ("mma",), "6.5 sm_75") for shape in ("m16n8k8", "m8n8k16", "m8n8k32", "m8n8k128")),
    *((shape, ("mma",), "7.0 sm_80") for shape in ("m16n8k16", "m16n8k32", "m16n8k64", "m16n8k128", "m16n8k4")),
    ("m16n8k256", ("mma",), "7.0 sm_80"),
    *((t, ("mma",), "8.4 sm_89") for t in ("e4m3", "e5m2")),
    ("f64", ("mma",), "7.0 sm_80"),
    ("bf16", ("mma", "wmma"), "7.0 sm_80"),
    ("tf32", ("mma", "wmma"), "7.0 sm_80"),
    *((m, ("wmma",), "7.0 sm_80") for m in ("f64", "m8n8k4", "m16n16k8")),  # double and tf32 wmma (stores too)
    *((shape, ("ldmatrix",), _SM100_A) for shape in ("m8n16", "m16n16")),
    # mbarrier and asynchronous copies
    ("expect_tx", ("mbarrier.arrive",), "8.0 sm_90"),
    ("parity", ("mbarrier.test_wait",), "7.1 sm_80"),
    ("release", ("mbarrier.arrive", "mbarrier.arrive_drop"), "8.0 sm_90"),
    ("relaxed", ("mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.test_wait", "mbarrier.try_wait"), "8.6 sm_90"),
    ("mbarrier::complete_tx::bytes", (), "8.0 sm_90"),
    ("bulk_group", (), "8.0 sm_90"),
    ("multicast::cluster", (), "8.0 sm_90"),
    ("read", ("cp.async.bulk.wait_group",), "8.0 sm_90"),
    ("relaxed", ("barrier.cluster",), "8.0 sm_90"),
    *((g, (), _SM100_ONLY) for g in ("cta_group::1", "cta_group::2")),
    # warp collectives
    ("f32", ("redux.sync",), "8.6 sm_100a | 8.8 sm_100f"),
)

FEATURES: tuple[Feature, ...] = tuple(Feature(name, needs(spec), families) for name, families, spec in _ROWS)

# Special registers newer than the base ISA (name as written, with %).
SPECIAL_REGISTERS: dict[str, Feature] = {
    name: Feature(name, needs(spec))
    for name, spec in (
        *(
            (name, "7.8 sm_90")
            for name in (
                "%cluster_ctarank",
                "%cluster_nctarank",
                "%cluster_ctaid",
                "%cluster_nctaid",
                "%clusterid",
                "%nclusterid",
                "%is_explicit_cluster",
            )
        ),
        ("%aggr_smem_size", "8.1 sm_90"),
        ("%locality_domain_id", "9.5 sm_100"),
        ("%globaltimer", "3.1 sm_30"),
        ("%globaltimer_lo", "3.1 sm_30"),
        ("%globaltimer_hi", "3.1 sm_30"),
        ("%current_graph_exec", "8.0 sm_50"),
        *((f"%reserved_smem_offset_{s}", "7.6 sm_80") for s in ("begin", "end", "cap", "0", "1")),
    )
}

# Function directives (performance tuning, clusters) newer than the base ISA, by their word with the dot.
DIRECTIVES: dict[str, Feature] = {
    word: Feature(word, needs(spec))
    for word, spec in (
        (".explicitcluster", "7.8 sm_90"),
        (".reqnctapercluster", "7.8 sm_90"),
        (".maxclusterrank", "7.8 sm_90"),
        (".blocksareclusters", "9.0 sm_90"),
        (".noreturn", "6.4 sm_30"),
        (".reqntid", "2.1 sm_10"),
        (".minnctapersm", "2.0 sm_10"),
        (".abi_preserve", "9.0 sm_10"),
        (".abi_preserve_control", "9.0 sm_10"),
    )
}

# `.pragma "..."` strings newer than the base ISA: enable_smem_spilling came with PTX ISA 9.0 (CUDA 13; the wheel's
# ptxas 13.5 takes it from .version 8.7, and on sm_75 reports negative spill bytes with it, so sm_80 is the floor).
PRAGMAS: dict[str, Feature] = {
    word: Feature(word, needs(spec)) for word, spec in (("enable_smem_spilling", "9.0 sm_80"),)
}

# Directives of a fixed shape, and those that may follow a function's or prototype's parameters.
STATEMENT_DIRECTIVES = frozenset(
    (".version", ".target", ".address_size", ".file", ".loc", ".pragma", ".alias", ".branchtargets", ".calltargets")
)
FUNCTION_DIRECTIVES = frozenset(
    (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".noreturn", ".pragma")
    + (".explicitcluster", ".reqnctapercluster", ".maxclusterrank", ".blocksareclusters")
    + (".abi_preserve", ".abi_preserve_control")
)

# Constructs outside instructions, checked by the legality service where it meets them.
CONSTRUCTS: dict[str, Feature] = {
    key: Feature(what, needs(spec))
    for key, what, spec in (
        ("inlined_at", "line information of inlined functions (.loc ... inlined_at)", "7.0 sm_10"),
        ("section_label", "a label inside a .section", "7.0 sm_10"),
        ("mask_initializer", "a mask operator in an initializer", "7.1 sm_10"),
        ("b128_declaration", "a .b128 declaration", "8.3 sm_10"),
    )
}

# Forms told apart by their operand count: (family, operands) -> the Feature (three-input min/max.f32).
OPERAND_FORMS: dict[tuple[str, int], Feature] = {
    (op, 4): Feature("three inputs", needs("8.8 sm_100"), (op,)) for op in ("min", "max")
}

# Families that newer targets dropped: (PTX version, target) from which a file may no longer use them, and the fix.
REMOVED: dict[str, tuple[tuple[int, int], int, str]] = {
    "shfl": ((6, 4), 70, "use shfl.sync"),
    "vote": ((6, 4), 70, "use vote.sync"),
}

"""Every instruction family of PTX ISA 9.x as one row of data: operand roles, effects, memory accesses, and the PTX
version and target each family first appeared in (the PTX ISA manual's "PTX ISA Notes" and "Target ISA Notes").

Row syntax, kept terse so the whole ISA fits on a few screens:
- roles: one letter per operand, the last repeating: D def, U use, B def+use, T target label ("DU": first operand
  defined, the rest used; "U": all used; "": no operands).
- accesses: "OPERAND MODE[:SLOT]" items, MODE r / w / rw, SLOT the state-space modifier that applies (0 first).
- needs: "PTX TARGET" alternatives separated by "|", e.g. "8.0 sm_90a | 8.6 sm_100a | 8.8 sm_100f".
A family is looked up by the longest prefix of `opcode.modifier...` that names a row (`mbarrier.try_wait`).
"""

from __future__ import annotations

from ptxtool.isa.model import Access, Effect, InstructionInfo, Mode, Role
from ptxtool.isa.targets import Need, version

E = Effect
_ROLE = {"D": Role.DEF, "U": Role.USE, "B": Role.DEF_USE, "T": Role.TARGET}
_MODE = {"r": Mode.READ, "w": Mode.WRITE, "rw": Mode.READ_WRITE}


def needs(spec: str) -> tuple[Need, ...]:
    """Parse "7.8 sm_90 | 8.6 sm_100a" into Need alternatives."""
    out = []
    for alternative in spec.split("|"):
        ptx, target = alternative.split()
        parsed = version(ptx)
        if parsed is None:
            raise ValueError(f"bad PTX version in ISA table: {ptx}")
        out.append(Need(parsed, target))
    return tuple(out)


def _accesses(spec: str) -> tuple[Access, ...]:
    out = []
    for item in spec.split(","):
        if not item.strip():
            continue
        where, _, slot = item.strip().partition(":")
        operand = int(where.rstrip("rw"))
        out.append(Access(operand, _MODE[where[len(str(operand)) :]], int(slot or 0)))
    return tuple(out)


def _row(roles: str, need: str, effects: Effect = E.NONE, access: str = "", space: str | None = None) -> tuple:
    return (tuple(_ROLE[c] for c in roles), needs(need), effects, _accesses(access), space)


_SYNC = E.COLLECTIVE
_ASYNC_COPY = E.ASYNC

# family: (roles, needs, effects, accesses, default state space)
_ROWS: dict[str, tuple] = {
    # ---- integer and floating-point arithmetic (types and rounding modifiers are checked in features.py)
    **{op: _row("DU", "1.0 sm_10") for op in ("add", "sub", "mul", "mad", "div", "rem", "abs", "neg", "min", "max")},
    **{op: _row("DU", "1.0 sm_10") for op in ("mul24", "mad24", "sad", "rcp", "sqrt", "rsqrt", "sin", "cos")},
    **{op: _row("DU", "1.0 sm_10") for op in ("lg2", "ex2", "set", "setp", "selp", "slct", "cvt", "mov")},
    **{op: _row("DU", "1.0 sm_10") for op in ("and", "or", "xor", "not", "cnot", "shl", "shr")},
    **{op: _row("DU", "1.2 sm_10") for op in ("addc", "subc")},
    "madc": _row("DU", "3.0 sm_20"),
    **{op: _row("DU", "2.0 sm_20") for op in ("popc", "clz", "bfind", "brev", "bfe", "bfi", "prmt")},
    **{op: _row("DU", "2.0 sm_20") for op in ("testp", "copysign", "fma", "isspacep", "cvta")},
    **{op: _row("DU", "7.6 sm_70") for op in ("szext", "bmsk")},
    **{op: _row("DU", "5.0 sm_61") for op in ("dp4a", "dp2a")},
    "tanh": _row("DU", "7.0 sm_75"),
    "fns": _row("DU", "6.0 sm_30"),
    "lop3": _row("DU", "4.3 sm_50"),
    "shf": _row("DU", "3.1 sm_32"),
    "cvt.pack": _row("DU", "6.5 sm_72"),
    "istypep": _row("DU", "1.5 sm_10"),
    # ---- video instructions
    **{op: _row("DU", "2.0 sm_20") for op in ("vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vmad")},
    "vset": _row("DU", "2.0 sm_20"),
    **{
        f"{op}{n}": _row("DU", "3.0 sm_30")
        for op in ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax", "vset")
        for n in (2, 4)
    },
    # ---- data movement and memory
    "ld": _row("DU", "1.0 sm_10", access="1r", space="generic"),
    "ldu": _row("DU", "2.0 sm_20", access="1r", space="generic"),
    "st": _row("U", "1.0 sm_10", access="0w", space="generic"),
    "st.async": _row("U", "8.1 sm_90", E.ASYNC, "0w", "shared::cluster"),
    "st.bulk": _row("U", "8.6 sm_100", E.ASYNC, "0w", "shared::cta"),
    "multimem.ld_reduce": _row("DU", "8.1 sm_90", access="1r", space="global"),
    "multimem.st": _row("U", "8.1 sm_90", access="0w", space="global"),
    "multimem.red": _row("U", "8.1 sm_90", E.ATOMIC, "0rw", "global"),
    "prefetch": _row("U", "2.0 sm_20", space="generic"),
    "prefetchu": _row("U", "2.0 sm_20", space="generic"),
    "applypriority": _row("U", "7.4 sm_80", space="global"),
    "discard": _row("U", "7.4 sm_80", access="0w", space="global"),
    "createpolicy": _row("DU", "7.4 sm_80"),
    "mapa": _row("DU", "7.8 sm_90"),
    "getctarank": _row("DU", "7.8 sm_90"),
    "shfl": _row("DU", "3.0 sm_30", _SYNC),
    "shfl.sync": _row("DU", "6.0 sm_30", _SYNC),
    "cp.async": _row("U", "7.0 sm_80", _ASYNC_COPY, "0w,1r:1", "shared"),
    "cp.async.commit_group": _row("", "7.0 sm_80", E.ASYNC),
    "cp.async.wait_group": _row("U", "7.0 sm_80", E.ASYNC | E.FENCE),
    "cp.async.wait_all": _row("", "7.0 sm_80", E.ASYNC | E.FENCE),
    "cp.async.mbarrier.arrive": _row("U", "7.0 sm_80", E.ASYNC | E.ATOMIC, "0rw", "generic"),
    "cp.async.bulk": _row("U", "8.0 sm_90", _ASYNC_COPY, "0w,1r:1", "shared::cluster"),
    "cp.async.bulk.tensor": _row("U", "8.0 sm_90", _ASYNC_COPY, "0w,1r:1", "shared::cluster"),
    "cp.async.bulk.prefetch": _row("U", "8.0 sm_90", E.ASYNC, space="global"),
    "cp.async.bulk.prefetch.tensor": _row("U", "8.0 sm_90", E.ASYNC, space="global"),
    "cp.reduce.async.bulk": _row("U", "8.0 sm_90", _ASYNC_COPY | E.ATOMIC, "0rw,1r:1", "global"),
    "cp.reduce.async.bulk.tensor": _row("U", "8.0 sm_90", _ASYNC_COPY | E.ATOMIC, "0rw,1r:1", "global"),
    "cp.async.bulk.commit_group": _row("", "8.0 sm_90", E.ASYNC),
    "cp.async.bulk.wait_group": _row("U", "8.0 sm_90", E.ASYNC | E.FENCE),
    "tensormap.replace": _row(
        "U", "8.3 sm_90a | 8.6 sm_100a | 8.8 sm_100f | 9.0 sm_110f | 8.7 sm_120a | 8.8 sm_120f", access="0rw"
    ),
    "tensormap.cp_fenceproxy": _row("U", "8.3 sm_90", E.FENCE | E.ASYNC, "0w,1r:1", "global"),
    # ---- textures and surfaces
    "tex": _row("DU", "1.0 sm_10", access="1r", space="tex"),
    "tld4": _row("DU", "2.2 sm_20", access="1r", space="tex"),
    "txq": _row("DU", "1.5 sm_10"),
    "suld": _row("DU", "1.5 sm_20", access="1r", space="surf"),
    "sust": _row("U", "1.5 sm_20", access="0w", space="surf"),
    "sured": _row("U", "1.5 sm_20", E.ATOMIC, "0rw", "surf"),
    "suq": _row("DU", "1.5 sm_20"),
    # ---- control flow
    "bra": _row("T", "1.0 sm_10", E.BRANCH),
    "brx.idx": _row("UT", "6.0 sm_30", E.BRANCH),
    "call": _row("U", "1.0 sm_10", E.CALL),  # operand lists are resolved by call_roles()
    "ret": _row("", "1.0 sm_10", E.RETURN),
    "exit": _row("", "1.0 sm_10", E.RETURN),
    "trap": _row("", "1.0 sm_10", E.TRAP),
    "brkpt": _row("", "1.0 sm_11", E.TRAP),
    "pmevent": _row("U", "1.4 sm_10"),
    "nanosleep": _row("U", "6.3 sm_70"),
    # ---- synchronization, atomics, warp votes
    "bar": _row("U", "1.0 sm_10", E.BARRIER | E.FENCE | _SYNC),
    "bar.red": _row("DU", "2.0 sm_20", E.BARRIER | E.FENCE | _SYNC),
    "bar.warp.sync": _row("U", "6.0 sm_30", E.BARRIER | _SYNC),
    "barrier": _row("U", "6.0 sm_30", E.BARRIER | E.FENCE),
    "barrier.red": _row("DU", "6.0 sm_30", E.BARRIER | E.FENCE),
    "barrier.cluster": _row("", "7.8 sm_90", E.BARRIER | E.FENCE),
    "membar": _row("", "1.4 sm_10", E.FENCE),
    "fence": _row("", "6.0 sm_70", E.FENCE),
    "fence.proxy.async": _row("", "8.0 sm_90", E.FENCE | E.ASYNC),
    "fence.proxy.tensormap": _row("U", "8.3 sm_90", E.FENCE | E.ASYNC),
    "fence.mbarrier_init": _row("", "8.0 sm_90", E.FENCE),
    "atom": _row("DU", "1.2 sm_11", E.ATOMIC, "1rw", "generic"),
    "red": _row("U", "1.2 sm_11", E.ATOMIC, "0rw", "generic"),
    "red.async": _row("U", "8.1 sm_90", E.ATOMIC | E.ASYNC, "0rw", "shared::cluster"),
    "vote": _row("DU", "1.2 sm_12", _SYNC),
    "vote.sync": _row("DU", "6.0 sm_30", _SYNC),
    "match": _row("DU", "6.0 sm_70", _SYNC),
    "activemask": _row("D", "6.2 sm_30"),
    "redux.sync": _row("DU", "7.0 sm_80", _SYNC),
    "elect.sync": _row("DU", "8.0 sm_90", _SYNC),
    "griddepcontrol": _row("", "7.8 sm_90", E.BARRIER),
    "clusterlaunchcontrol.try_cancel": _row("U", "8.6 sm_100", E.ASYNC, "0w", "shared::cta"),
    "clusterlaunchcontrol.query_cancel": _row("DU", "8.6 sm_100"),
    # ---- mbarrier: the state operand is defined, waits define their completion predicate
    "mbarrier.init": _row("U", "7.0 sm_80", access="0w", space="generic"),
    "mbarrier.inval": _row("U", "7.0 sm_80", access="0w", space="generic"),
    "mbarrier.arrive": _row("DU", "7.0 sm_80", E.ATOMIC, "1rw", "generic"),
    "mbarrier.arrive_drop": _row("DU", "7.0 sm_80", E.ATOMIC, "1rw", "generic"),
    "mbarrier.test_wait": _row("DU", "7.0 sm_80", E.BARRIER, "1r", "generic"),
    "mbarrier.try_wait": _row("DU", "7.8 sm_90", E.BARRIER, "1r", "generic"),
    "mbarrier.pending_count": _row("DU", "7.0 sm_80"),
    "mbarrier.expect_tx": _row("U", "8.0 sm_90", E.ATOMIC, "0rw", "generic"),
    "mbarrier.complete_tx": _row("U", "8.0 sm_90", E.ATOMIC, "0rw", "generic"),
    # ---- warp- and warpgroup-level matrix instructions
    "wmma.load": _row("DU", "6.0 sm_70", _SYNC, "1r", "generic"),
    "wmma.store": _row("U", "6.0 sm_70", _SYNC, "0w", "generic"),
    "wmma.mma": _row("DU", "6.0 sm_70", _SYNC),
    "mma": _row("DU", "6.4 sm_70", _SYNC),
    "mma.sp": _row("DU", "7.1 sm_80", _SYNC),
    "mma.sp::ordered_metadata": _row("DU", "8.5 sm_80", _SYNC),
    "ldmatrix": _row("DU", "6.5 sm_75", _SYNC, "1r", "generic"),
    "stmatrix": _row("U", "7.8 sm_90", _SYNC, "0w", "generic"),
    "movmatrix": _row("DU", "7.8 sm_75", _SYNC),
    "wgmma.mma_async": _row("BU", "8.0 sm_90a", E.ASYNC | _SYNC, "1r,2r", "shared"),
    "wgmma.mma_async.sp": _row("BU", "8.2 sm_90a", E.ASYNC | _SYNC, "1r,2r", "shared"),
    "wgmma.fence": _row("", "8.0 sm_90a", E.FENCE | E.ASYNC | _SYNC),
    "wgmma.commit_group": _row("", "8.0 sm_90a", E.ASYNC | _SYNC),
    "wgmma.wait_group": _row("U", "8.0 sm_90a", E.ASYNC | E.FENCE | _SYNC),
    # ---- tcgen05 (tensor memory); `a` targets of sm_100/sm_101, then the family targets
    **{
        f"tcgen05.{op}": _row(roles, "8.6 sm_100a | 9.0 sm_110a | 8.8 sm_100f | 9.0 sm_110f", effects, access, space)
        for op, roles, effects, access, space in (
            ("alloc", "U", E.RESOURCE | _SYNC, "0w", "shared::cta"),
            ("dealloc", "U", E.RESOURCE | _SYNC, "", None),
            ("relinquish_alloc_permit", "", E.RESOURCE | _SYNC, "", None),
            ("ld", "DU", E.ASYNC | _SYNC, "", None),
            ("st", "U", E.ASYNC | _SYNC, "", None),
            ("wait", "", E.ASYNC | E.FENCE, "", None),
            ("cp", "U", E.ASYNC, "", None),
            ("shift", "U", E.ASYNC, "", None),
            ("mma", "U", E.ASYNC, "", None),
            ("commit", "U", E.ASYNC | E.ATOMIC, "0rw", "shared::cta"),
            ("fence", "", E.FENCE | E.ASYNC, "", None),
        )
    },
    # ---- PTX ISA 9.1-9.5 (release notes, versions and targets checked with the wheel's ptxas 13.5)
    "multimem.cp.async.bulk": _row("U", "9.1 sm_90", E.ASYNC, "0w,1r:1", "global"),
    "multimem.cp.reduce.async.bulk": _row("U", "9.1 sm_90", E.ASYNC | E.ATOMIC, "0rw,1r:1", "global"),
    "multimem.st.async": _row("U", "9.3 sm_100", E.ASYNC, "0w", "global"),
    "multimem.red.async": _row("U", "9.3 sm_100", E.ASYNC | E.ATOMIC, "0rw", "global"),
    "clmad": _row("DU", "9.3 sm_80"),
    "mbarrier.check_layout": _row("DU", "9.3 sm_90", access="1r", space="generic"),
    # fabric operations move data between GPUs through handles (not addresses of this GPU's memory): they write
    # or read shared memory and complete on an mbarrier, asynchronously
    "fabric.try_get": _row("U", "9.3 sm_100", E.ASYNC | E.ATOMIC, "0w,3rw", "shared::cta"),
    "fabric.try_put": _row("U", "9.3 sm_100", E.ASYNC | E.ATOMIC, "1r,3rw", "shared::cta"),
    "fabric.try_red": _row("U", "9.3 sm_100", E.ASYNC | E.ATOMIC, "1r,3rw", "shared::cta"),
    "fabric.try_pullred": _row("U", "9.3 sm_100", E.ASYNC | E.ATOMIC, "0w,3rw", "shared::cta"),
    "fabric.wait": _row("U", "9.3 sm_100", E.BARRIER | E.ASYNC),
    "fabric.submit": _row("", "9.3 sm_100", E.ASYNC | E.FENCE),
    "spcompress": _row("DU", "9.4 sm_107a"),
    "spdecompress": _row("DU", "9.4 sm_107a"),
    "applypriority.async.bulk": _row("U", "9.4 sm_107a", E.ASYNC, space="global"),
    "tensormap.query": _row("DU", "9.5 sm_90a | 9.5 sm_100f | 9.5 sm_110f | 9.5 sm_120f", access="1r", space="global"),
    # ---- stack, resources, misc
    "stacksave": _row("D", "7.3 sm_52", E.RESOURCE),
    "stackrestore": _row("U", "7.3 sm_52", E.RESOURCE),
    "alloca": _row("DU", "7.3 sm_52", E.RESOURCE),
    "setmaxnreg": _row(
        "U", "8.0 sm_90a | 8.6 sm_100a | 8.8 sm_100f | 9.0 sm_110f | 8.7 sm_120a | 8.8 sm_120f", E.RESOURCE | _SYNC
    ),
}

OPCODES: dict[str, InstructionInfo] = {
    family: InstructionInfo(family, roles, effects, accesses, space, need)
    for family, (roles, need, effects, accesses, space) in _ROWS.items()
}

"""The staged tile loop that warp-role splitting transforms, found from the CFG, loops, def-use chains, divergence
and memory facts (never from nvcc's text): an outermost loop whose every trip (1) stages data from global into
shared memory, (2) waits at a CTA barrier, (3) computes from shared memory, (4) waits at a CTA barrier again
before the next refill, then (5) steps its induction variables and branches back.

What the split needs proven, and what refuses it (one line each): the trip count is the same in every thread of
the CTA; nothing leaves the function inside the loop; both barriers are reached by every thread; the staging
addresses depend on no loaded value and its loads read memory the kernel never writes (producers see the same
bytes the consumers would have); nothing in the loop observes other agents, and nothing before it that the
producers could not replay defines a register; shared buffers' addresses are used only as shared accesses'
addresses, and those are computed from them; no CTA barrier is reached after some threads exited; the S-stage ring
of every shared variable fits the target's shared memory; the grown block fits 1,024 threads and 65,536 registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool import isa
from ptxtool.analysis.cfg import CFG, build_cfg
from ptxtool.analysis.dataflow.liveness import ENTRY, DefUse, def_use
from ptxtool.analysis.divergence import ThreadDependence, ThreadOffsets, divergent_region, post_dominators
from ptxtool.analysis.launch_bounds import block_bounds
from ptxtool.analysis.linear import Op
from ptxtool.analysis.loops import Loop, find_loops
from ptxtool.analysis.memory import Space, memory_facts, variable_spaces
from ptxtool.isa import Effect, Mode, Role
from ptxtool.isa.caching import observes_other_agents, type_bits
from ptxtool.isa.targets import MAX_BLOCK_THREADS, REGISTERS_PER_CTA, STATIC_SHARED_PER_BLOCK, Target, shared_limit
from ptxtool.syntax import ast

# special registers the split changes or cannot keep apart per role: the block's shape, the warp numbering, and
# the block's shared memory (the ring of S slots and its mbarriers replace the kernel's own `.shared` variables)
# (matched by the name before any `.x`/`.y`/`.z`: `%tid` read whole, as a vector, is refused too; %tid.x alone is not)
SHARED_SIZE_SPECIALS = ("%total_smem_size", "%aggr_smem_size")  # the pipeline's ring changes these as well
SHAPE_SPECIALS = ("%ntid", "%warpid", "%nwarpid", *SHARED_SIZE_SPECIALS)


def shape_special(name: str) -> bool:
    """Whether a special register name is one the grown block changes: all of SHAPE_SPECIALS, %tid but %tid.x."""
    base, _, component = name.partition(".")
    return base in SHAPE_SPECIALS or (base == "%tid" and component != "x")


def _tid_x_width(i: ast.Instruction) -> int | None:
    """The width (bits) other than 32 at which `i` reads %tid.x, which the producers' 32-bit copy could not
    replace (`mov.u16 %rs1, %tid.x`); None when it reads %tid.x as 32 bits or not at all."""
    if not any(n.text == "%tid.x" for operand in i.operands for n in isa.operand_names(operand)):
        return None
    widths = [b for m in i.modifiers if (b := type_bits(m))]
    source = widths[-1:] if i.opcode in ("cvt", "cvta") else widths
    return next((b for b in source if b != 32), None)


@dataclass(frozen=True, slots=True)
class SharedBuffer:
    """A `.shared` variable the loop stages into: its name, size in bytes and alignment."""

    name: str
    size: int
    align: int


@dataclass(frozen=True, slots=True)
class StagedLoop:
    """A staged tile loop of `kernel`: op-index ranges of its staging part (loop header up to the `filled`
    barrier), compute part (between the barriers) and tail (after the `released` barrier to the back branch), the
    global reads and shared writes that stage, the shared buffers, and the declared block size `threads`."""

    kernel: str
    loop: Loop
    kind: str  # "ld+st", "cp.async" or "bulk"
    threads: int
    staging: range
    filled: int
    compute: range
    released: int
    tail: range
    loads: tuple[int, ...]
    stores: tuple[int, ...]
    buffers: tuple[SharedBuffer, ...]
    kept: frozenset[int] = frozenset()  # staging ops consumers keep (kept_by_consumers)

    @property
    def shared_bytes(self) -> int:
        """Bytes of one stage: every buffer, each at its alignment."""
        total = 0
        for b in self.buffers:
            total = -(-total // b.align) * b.align + b.size
        return total


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a kernel is left as it is, in one line, at the input line that decides it."""

    kernel: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.kernel}:{self.line}: {self.reason}"


def full_barrier(i: ast.Instruction) -> bool:
    """`bar.sync 0` / `barrier.sync 0` (with `.aligned`/`.cta` spellings), unguarded, without a thread count."""
    words = tuple(m for m in i.modifiers if m not in ("cta", "aligned"))
    if isa.family(i) not in ("bar", "barrier") or words not in ((), ("sync",)) or i.guard is not None:
        return False
    return len(i.operands) == 1 and isinstance(i.operands[0], ast.Immediate) and i.operands[0].value == 0


def _replayed_wait(i: ast.Instruction) -> bool:
    """A wait for other agents that touches no memory, defines nothing and involves no other thread (fence,
    membar, griddepcontrol.wait): the producers replay it before the loop, so their loads stay after it as the
    consumers' would."""
    effects = isa.effects(i)
    alone = not effects & (Effect.ATOMIC | Effect.COLLECTIVE) and not isa.memory_accesses(i)
    defines = any(role is Role.DEF or role is Role.DEF_USE for _, role in isa.operand_roles(i))
    return bool(effects & (Effect.FENCE | Effect.BARRIER)) and alone and not defines and bool(observes_other_agents(i))


def dropped_by_producers(i: ast.Instruction) -> bool:
    """Whether the producers' copy of the code before the loop leaves `i` out: a write (but to their own local
    memory), a barrier of the consumers', an atomic or an ordered access (the waits they replay aside)."""
    writes = any(m is not Mode.READ and s != "local" for _, m, s in isa.memory_accesses(i))
    effects = isa.effects(i) & (Effect.BARRIER | Effect.ATOMIC | Effect.FENCE)
    return not _replayed_wait(i) and (writes or bool(effects))


def _unreplayable(ops: tuple[Op, ...] | list[Op]) -> tuple[Op, str] | None:
    """An op before the loop the producers can neither drop nor replay, and why: one they drop that defines a
    register, or one that may read another value than the consumers' (an ordered load, a `ld.volatile` trip count,
    an `ld.acquire` spin flag), or a resource change (setmaxnreg) they would make as well as the split's own."""
    for op in ops:
        i = op.instruction
        if op.defs and (dropped_by_producers(i) or observes_other_agents(i)):
            return op, "defines a register the producers could not replay (an atomic, ordered or barrier access)"
        if isa.effects(i) & Effect.RESOURCE:
            return op, "changes the thread's resources (producers replay it)"
    return None


def _barrier(i: ast.Instruction) -> bool:
    return bool(isa.effects(i) & Effect.BARRIER)


def _writes_shared(i: ast.Instruction) -> bool:
    return any(m is not Mode.READ and s.startswith("shared") for _, m, s in isa.memory_accesses(i))


def _reads(i: ast.Instruction, space: str) -> bool:
    return any(m is not Mode.WRITE and s.startswith(space) for _, m, s in isa.memory_accesses(i))


def _read_by_others(i: ast.Instruction) -> bool:
    """Whether i reads memory that other threads or agents may write (not param, const, local or shared)."""
    private = ("param", "const", "local", "shared")
    return any(m is not Mode.WRITE and not s.startswith(private) for _, m, s in isa.memory_accesses(i))


def _buffers(module: ast.Module, function: ast.Function) -> tuple[SharedBuffer, ...] | str:
    """Every `.shared` variable the function can name, with its size; a reason when one has no fixed size."""
    decls = [d for d in module.items if isinstance(d, ast.Declaration)]
    decls += [n for n in ast.walk(function.body) if isinstance(n, ast.Declaration)]
    out = []
    for d in decls:
        if not d.has(".shared"):
            continue
        bits = next((type_bits(a.word.lstrip(".")) for a in d.attributes if type_bits(a.word.lstrip("."))), None)
        align = next((int(a.number.value) for a in d.attributes if a.word == ".align" and a.number), None)
        vector = next((int(a.word[2:]) for a in d.attributes if a.word in (".v2", ".v4", ".v8")), 1)
        for x in d.declarators:
            if bits is None or any(n is None for n in x.dims):
                return f"shared variable {x.name} has no fixed size (dynamic shared memory)"
            count = vector
            for n in x.dims:
                count *= int(ast.constant_value(n))
            size = count * bits // 8
            out.append(SharedBuffer(x.name, size, align or max(1, bits * vector // 8)))
    return tuple(out)


class _Finder:
    """The checks, in the order a reader would make them; each returns a reason or None."""

    def __init__(self, module: ast.Module, function: ast.Function, cfg: CFG) -> None:
        self.module, self.function, self.cfg = module, function, cfg
        self.ops = cfg.linear.ops
        self.du: DefUse = def_use(cfg)
        self.loops = find_loops(cfg, self.du)
        self.varying = ThreadDependence(cfg)
        self.offsets = ThreadOffsets(cfg, self.varying)
        self.pdom = post_dominators(cfg)

    def divergent_blocks(self) -> dict[int, Op]:
        """Blocks that only some threads may reach, each with the branch that decides it."""
        out: dict[int, Op] = {}
        for op in self.ops:
            i = op.instruction
            divergent = self.offsets.divergent_guard(op) or (i.opcode == "brx" and self.varying.any_used(op))
            if isa.family(i) in ("bra", "brx.idx") and "uni" not in i.modifiers and divergent:
                for b in divergent_region(self.cfg, self.cfg.block_of[op.index], self.pdom):
                    out.setdefault(b, op)
            elif isa.effects(i) & Effect.RETURN and self.offsets.divergent_guard(op):
                after = self.cfg.block_of[op.index] + 1  # some threads leave here: later blocks see fewer
                out.update((b, op) for b in range(after, len(self.cfg.blocks)) if b not in out)
        return out

    def loop_ops(self, loop: Loop) -> list[Op]:
        return [op for b in sorted(loop.blocks) for op in self.cfg.ops(self.cfg.blocks[b])]

    def loaded_source(self, op: int, key: str, seen: set[tuple[int, str]]) -> Op | None:
        """A load (other than of a kernel parameter) that register `key`, as op reads it, is computed from (a
        worklist, not recursion: a chain of thousands of definitions is as deep)."""
        work = [(op, key)]
        while work:
            at, register = work.pop()
            for d in self.du.defs_of.get((at, register), ()):
                if d == ENTRY or (d, register) in seen:
                    continue
                seen.add((d, register))
                source = self.ops[d]
                i = source.instruction
                if isa.memory_accesses(i) and not (i.opcode == "ld" and "param" in i.modifiers):
                    return source
                if isa.effects(i) & (Effect.ATOMIC | Effect.CALL):
                    return source
                work.extend((d, u) for u in source.uses)
        return None


def find_staged_loop(
    module: ast.Module,
    function: ast.Function,
    *,
    stages: int = 2,
    extra_threads: int = 0,
    registers: int | None = None,
    cfg: CFG | None = None,
    roles: bool = True,
) -> StagedLoop | Refusal:
    """The staged tile loop of a kernel, or why the split is refused. `stages` ring slots, `extra_threads`
    producer threads added to the block, `registers` per thread from ptxas (None: not checked); `roles` False for
    the pipeline, which keeps the block and runs no replayed copy in other threads: the checks that only the split's
    grown block, producers' replay and counted barriers need are skipped."""
    name = function.name
    cfg = cfg or build_cfg(function)
    f = _Finder(module, function, cfg)
    ops = f.ops

    def refuse(line: int, reason: str) -> Refusal:
        return Refusal(name, line, reason)

    candidates = [
        loop for loop in f.loops if loop.depth == 1 and sum(_barrier(op.instruction) for op in f.loop_ops(loop)) >= 2
    ]
    if not candidates:
        return refuse(function.line, "no loop waits at a CTA barrier twice per trip (no staged tile loop)")
    bounds = block_bounds(function)
    shape = bounds.dims if bounds else ()
    if roles and (not shape or any(n != 1 for n in shape[1:])):
        return refuse(function.line, "the block size is not declared one-dimensional (.reqntid/.maxntid N, 1, 1)")
    n_threads = shape[0] if shape else 0
    if n_threads % 32 and roles:
        return refuse(function.line, f"the block of {n_threads} threads is not a whole number of warps")
    for op in ops:
        for operand in op.instruction.operands:
            for n in isa.operand_names(operand):
                if shape_special(n.text) and (roles or n.text in SHARED_SIZE_SPECIALS):
                    grown = "grown block" if roles else "ring"
                    return refuse(op.line, f"reads {n.text}, which the {grown} would change")
        if roles and (bits := _tid_x_width(op.instruction)):
            return refuse(op.line, f"reads %tid.x as a {bits}-bit value, which the producers' copy could not")
        if isa.effects(op.instruction) & Effect.CALL:
            return refuse(op.line, "calls a function (its effects on the roles are unknown)")
        if isa.find(op.instruction) is None:
            return refuse(op.line, f"{op.instruction.mnemonic} is an instruction the ISA tables do not know")
        i = op.instruction
        if (
            i.opcode == "cvta"
            and "to" not in i.modifiers
            and any(m.startswith(("shared", "local")) for m in i.modifiers)
        ):
            space = "shared" if any(m.startswith("shared") for m in i.modifiers) else "local"
            return refuse(op.line, f"a generic pointer into {space} memory (cvta): the roles could not keep it apart")
        if roles and _barrier(i) and i.opcode in ("bar", "barrier") and not full_barrier(i):
            return refuse(op.line, f"{i.mnemonic} is not a plain CTA barrier (named barriers are the pass's own)")
    loop = candidates[0]
    body = f.loop_ops(loop)
    header = cfg.blocks[loop.header]
    lo, hi = body[0].index, body[-1].index + 1
    if [op.index for op in body] != list(range(lo, hi)) or header.start != lo:
        return refuse(ops[header.start].line, "the loop's blocks are not laid out from its header down")
    for op in body:
        if isa.effects(op.instruction) & (Effect.RETURN | Effect.TRAP):
            return refuse(op.line, f"{op.instruction.mnemonic} inside the loop")
    for op in body:
        exits = [s for s in cfg.blocks[cfg.block_of[op.index]].successors if s not in loop.blocks]
        is_last = op.index == cfg.blocks[cfg.block_of[op.index]].end - 1
        if is_last and exits and isa.effects(op.instruction) & Effect.BRANCH and f.offsets.divergent_guard(op):
            return refuse(
                op.line, "trip count not uniform across the CTA: the loop's exit branch depends on the thread"
            )
    divergent = f.divergent_blocks()
    if loop.header in divergent:
        return refuse(divergent[loop.header].line, "the loop is entered by only some threads of the CTA")
    barriers = [op for op in body if _barrier(op.instruction)]
    for op in barriers:
        if cfg.block_of[op.index] in divergent:
            why = divergent[cfg.block_of[op.index]]
            return refuse(op.line, f"barrier under divergent control (thread-dependent branch at line {why.line})")
    if roles and (stuck := _barrier_after_exits(f, divergent, range(lo, hi))) is not None:
        return refuse(
            stuck.line,
            "a CTA barrier outside the loop some threads may have left before (exit/ret): the "
            "consumers' counted copy (bar.sync 1, N) is not released by exits and would wait forever",
        )
    plain = [op for op in barriers if full_barrier(op.instruction)]
    if len(barriers) != 2 or len(plain) != 2:
        return refuse(ops[lo].line, f"the loop waits {len(barriers)} times per trip; the split needs exactly 2")
    filled, released = plain[0].index, plain[1].index
    for op in plain:
        if any(loop.index != inner.index and cfg.block_of[op.index] in inner.blocks for inner in f.loops):
            return refuse(op.line, "barrier inside an inner loop")
        if not all(cfg.dominates(cfg.block_of[op.index], latch) for latch in loop.latches):
            return refuse(op.line, "barrier not reached on every trip")
    staging, compute, tail = range(lo, filled), range(filled + 1, released), range(released + 1, hi)
    if (why := _regions(f, loop, staging, compute, tail, "producers" if roles else "staging")) is not None:
        return why
    loads = tuple(o for o in staging if _reads(ops[o].instruction, "global"))
    stores = tuple(o for o in staging if _writes_shared(ops[o].instruction))
    if not loads or not stores:
        return refuse(ops[lo].line, "the part before the first barrier stages nothing from global into shared memory")
    if not any(_reads(ops[o].instruction, "shared") for o in compute):
        return refuse(ops[filled].line, "the part between the barriers reads no shared memory")
    kind = "bulk" if any(isa.family(ops[o].instruction).startswith("cp.async.bulk") for o in stores) else None
    kind = kind or ("cp.async" if any(isa.family(ops[o].instruction) == "cp.async" for o in stores) else "ld+st")
    if (why := _producer_inputs(f, module, function, staging, hi, roles)) is not None:
        return why
    buffers = _buffers(module, function)
    if isinstance(buffers, str):
        return refuse(function.line, buffers)
    if roles and (unreplayable := _unreplayable(ops[:lo])) is not None:
        op, why = unreplayable
        return refuse(op.line, f"{op.instruction.mnemonic} at line {op.line} before the loop {why}")
    if (escape := _escaping_address(f, buffers)) is not None:
        return refuse(
            escape.line,
            f"{escape.instruction.mnemonic} takes a value computed from a shared buffer's address other than as the "
            "address of a shared access (a wgmma descriptor, say), or a shared address computed from something "
            "else: it would not follow the ring slot",
        )
    kept = kept_by_consumers(f, staging)
    result = StagedLoop(
        name, loop, kind, n_threads, staging, filled, compute, released, tail, loads, stores, buffers, kept
    )
    arch = next((t for t in map(Target.parse, module.targets) if t), None)
    target_limit = shared_limit(arch) if arch else None
    limit = min(target_limit or STATIC_SHARED_PER_BLOCK, STATIC_SHARED_PER_BLOCK)  # the ring is static shared
    ring = stages * result.shared_bytes + (16 * stages if roles else 0)  # the split adds its mbarriers
    if ring > limit:
        return refuse(
            function.line,
            f"shared memory does not fit {stages} stages: {ring} bytes > {limit} bytes of .shared variables per block",
        )
    total = n_threads + extra_threads
    if total > MAX_BLOCK_THREADS:
        return refuse(function.line, f"the grown block of {total} threads exceeds {MAX_BLOCK_THREADS}")
    if registers is not None and registers * total > REGISTERS_PER_CTA:
        return refuse(
            function.line,
            f"registers do not fit: {registers} per thread x {total} threads > {REGISTERS_PER_CTA} per CTA",
        )
    return result


_IMPURE = Effect.BRANCH | Effect.BARRIER | Effect.ATOMIC | Effect.FENCE | Effect.ASYNC | Effect.CALL | Effect.RESOURCE
_IMPURE |= Effect.RETURN | Effect.TRAP | Effect.COLLECTIVE


def _escaping_address(f: _Finder, buffers: tuple[SharedBuffer, ...]) -> Op | None:
    """An op that takes a value computed from a shared buffer's address (through register arithmetic) other than
    in the address of a shared access, or a shared access whose address is not computed from one (a loaded
    value): the split moves exactly those addresses into the trip's ring slot."""
    symbols = {b.name for b in buffers}
    registers = f.cfg.linear.registers
    derived: set[int] = set()  # ops whose results are computed from a buffer's address
    changed = True
    while changed:
        changed = False
        for op in f.ops:
            if op.index in derived:
                continue
            names = {registers[k].name for k in op.uses if derived & set(f.du.defs_of.get((op.index, k), ()))}
            names |= {n.text for x in op.instruction.operands for n in isa.operand_names(x) if n.text in symbols}
            if not names:
                continue
            i = op.instruction
            if isa.family(i) in ("setp", "set") and not isa.effects(i):
                continue  # a comparison of the consumers' own (unmoved) pointers: the same outcome in every slot
            touches, effects = isa.memory_accesses(i), isa.effects(i)
            addresses = [a for a, _, s in touches if s.startswith("shared")]
            for operand, role in isa.operand_roles(i):
                moved = isinstance(operand, ast.Address) and any(a is operand for a in addresses)  # not descriptors
                read = role is not Role.DEF and any(n.text in names for n in isa.operand_names(operand))
                if not moved and read and (touches or effects):
                    return op
            if not touches and not effects:
                derived.add(op.index)
                changed = True
    for op in f.ops:  # the converse: every shared address the split moves is computed from a buffer's address
        for operand, _, space in isa.memory_accesses(op.instruction):
            if not (space.startswith("shared") and isinstance(operand, ast.Address)):
                continue
            base = operand.base.text if isinstance(operand.base, ast.Name) else None
            key = next((k for k in op.uses if registers[k].name == base), None)
            defs = f.du.defs_of.get((op.index, key), ()) if key else ()
            if base not in symbols and not (defs and all(d in derived for d in defs)):
                return op
    return None


def _barrier_after_exits(f: _Finder, divergent: dict[int, Op], loop: range) -> Op | None:
    """A full barrier outside the loop that threads may reach after others of the CTA left (a divergent `exit`
    before it, or a branch around it): the split counts it, and a counted barrier does not count exits."""
    cfg = f.cfg
    leaving = [
        op
        for op in f.ops
        if isa.effects(op.instruction) & Effect.RETURN
        and (cfg.block_of[op.index] in divergent or f.offsets.divergent_guard(op))
    ]
    for op in f.ops:
        if op.index in loop or not full_barrier(op.instruction):
            continue
        block = cfg.block_of[op.index]
        if block in divergent or any(not cfg.dominates(block, cfg.block_of[r.index]) for r in leaving):
            return op
    return None


def kept_by_consumers(f: _Finder, staging: range) -> frozenset[int]:
    """Staging ops the consumers keep: the register arithmetic of the staging blocks run once on every trip (each
    dominates the first barrier and lies in no inner loop: the header's first block, a join after nvcc's bounds
    checks), computed from nothing the staging part loads (a tile's base index, a buffer's address, say)."""
    cfg, ops = f.cfg, f.ops
    outer = next((loop for loop in f.loops if loop.header == cfg.block_of[staging.start]), None)
    inner = {b for loop in f.loops if outer is None or loop.index != outer.index for b in loop.blocks}
    barrier = cfg.block_of[staging.stop]
    kept = {
        o.index
        for o in ops[staging.start : staging.stop]
        if not isa.memory_accesses(o.instruction)
        and not isa.effects(o.instruction) & _IMPURE
        and (block := cfg.block_of[o.index]) not in inner
        and cfg.dominates(block, barrier)
    }
    changed = True
    while changed:  # an input computed by a dropped staging op makes the op useless to keep
        changed = False
        for at in sorted(kept):
            defs = [d for k in ops[at].uses for d in f.du.defs_of.get((at, k), ()) if d in staging]
            if any(d not in kept for d in defs):
                kept.discard(at)
                changed = True
    return frozenset(kept)


def _regions(
    f: _Finder, loop: Loop, staging: range, compute: range, tail: range, ahead: str = "producers"
) -> Refusal | None:
    """Control stays in its part (staging, compute, tail), leaves the loop only from the tail, and returns to the
    header only from the tail; compute writes no shared memory; staging and tail wait at nothing; no value crosses
    from one role's part to the other's (consumers keep the staging arithmetic `kept_by_consumers` names); nothing in
    the loop observes other agents (producers run up to S trips ahead of the consumers' acquires)."""
    ops, cfg, name = f.ops, f.cfg, f.function.name
    kept = kept_by_consumers(f, staging)

    def part(index: int) -> str:
        return "staging" if index in staging else "compute" if index in compute else "tail" if index in tail else ""

    for op in ops[staging.start : tail.stop]:
        where = part(op.index)
        i = op.instruction
        if isa.effects(i) & Effect.BRANCH:
            for label in op.targets:
                target = cfg.linear.labels.get(label)
                to = part(target) if target is not None else ""
                forward = (where, target) in (("staging", staging.stop), ("compute", compute.stop))  # to the barrier
                back = target == staging.start and where == "tail"
                if not (to == where or forward or back or (not to and where == "tail")):
                    return Refusal(name, op.line, f"a branch leaves the loop's {where} part")
        if where == "compute" and _writes_shared(i):
            return Refusal(name, op.line, "the compute part writes shared memory (the ring cannot hold it)")
        if where != "compute" and isa.effects(i) & (Effect.ATOMIC | Effect.FENCE | Effect.BARRIER) and not _barrier(i):
            return Refusal(name, op.line, f"{i.mnemonic} in the {where} part ({ahead} must not order or wait)")
        if where and (why := observes_other_agents(i)):  # an acquire of trip k orders trip k+1's staging loads
            return Refusal(name, op.line, f"{why} in the {where} part: {ahead} running ahead would not observe it")
        if where == "staging" and any(m is not Mode.READ and s != "shared" for _, m, s in isa.memory_accesses(i)):
            return Refusal(name, op.line, "the staging part writes memory other than shared")
        if where == "tail" and isa.memory_accesses(i):
            return Refusal(name, op.line, "the loop's tail touches memory")
        for key in op.uses:  # each role drops the other's part: no value may cross between them
            sources = {part(d) for d in f.du.defs_of.get((op.index, key), ()) if d >= 0}
            if where != "compute" and "compute" in sources:
                return Refusal(name, op.line, f"the {where} part uses {key}, which the compute part computes")
            dropped = any(d in staging and d not in kept for d in f.du.defs_of.get((op.index, key), ()))
            if where != "staging" and dropped:
                return Refusal(name, op.line, f"the {where} part uses {key}, which the staging part computes")
    for op in ops[tail.stop :]:
        for key in op.uses:
            if any(d in staging and d not in kept for d in f.du.defs_of.get((op.index, key), ())):
                return Refusal(name, op.line, f"code after the loop uses {key}, which the staging part computes")
    for op in (*ops[: staging.start], *ops[tail.stop :]):
        if any(s.startswith("shared") for _, _, s in isa.memory_accesses(op.instruction)):
            return Refusal(name, op.line, "shared memory is used outside the loop (the ring moves its contents)")
    return None


def _producer_inputs(
    f: _Finder, module: ast.Module, function: ast.Function, staging: range, end: int, roles: bool = True
) -> Refusal | None:
    """What producers recompute (everything before the loop, the staging part, the tail) must read only memory
    no thread of the kernel writes, so they see the bytes the consumers would have; staging addresses must come
    from no loaded value at all (kernel parameters aside). Without roles (the pipeline) only the staging part runs
    early (S - 1 trips ahead, in the same thread), so only its reads are checked."""
    ops, name = f.ops, function.name
    facts = memory_facts(module, function, f.cfg)
    changing = {a.op for a in facts.accesses if a.param not in facts.read_only_params}
    # a global write before or in the loop may reach a producer's load through an aliasing pointer (producers run
    # ahead and meet no barrier of the consumers); `.nc` loads (read-only while the kernel runs: PTX ISA) are safe
    writes = [a.op for a in facts.accesses if a.mode is not Mode.READ]
    early = sorted(o for o in (*writes, *facts.unknown_writes) if o < end)
    spaces = variable_spaces(module, function)
    for at in range(staging.start if not roles else 0, staging.stop):
        i = ops[at].instruction
        where = "staging part" if at in staging else "code before the loop"
        if _reads(i, "shared"):
            return Refusal(name, ops[at].line, f"the {where} reads shared memory (producers would not see it)")
        if at in changing and _reads(i, ""):
            return Refusal(name, ops[at].line, f"the {where} reads global memory the kernel may write")
        if _read_by_others(i) and "nc" not in i.modifiers and early:
            line = ops[early[0]].line
            return Refusal(
                name,
                ops[at].line,
                f"the {where} reads memory without .nc and the kernel writes global memory at line {line} "
                "(through an alias, producers running ahead would read other bytes)",
            )
        if at not in staging or not (_writes_shared(i) or _reads(i, "global")):
            continue
        for operand, _, _ in isa.memory_accesses(i):
            for n in isa.operand_names(operand):
                key = next((k for k in ops[at].uses if f.cfg.linear.registers[k].name == n.text), None)
                source = f.loaded_source(at, key, set()) if key else None
                if source is not None:
                    what = source.instruction.mnemonic
                    return Refusal(
                        name, ops[at].line, f"staging address depends on a value loaded at line {source.line} ({what})"
                    )
                if key is None and spaces.get(n.text) not in (Space.SHARED, Space.GLOBAL, None):
                    return Refusal(name, ops[at].line, f"staging address {n.text} is not a shared or global buffer")
    return None

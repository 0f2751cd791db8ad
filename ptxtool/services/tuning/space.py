"""What `ptxtool tune` chooses from: the search space (settings from `[tool.ptxtool.tune]`, the launch spec's
`[tune]` table, `--space` and the flags, checked with file and key) and the candidates it makes (docs/tune.md).

Candidates come from generators in a table: each takes the tuning context and returns candidates that change the
code (`kind = "code"`: the cache-operator policies, the register pass's bounds and rematerialization, the warp-role
split) or the launch (`kind = "launch"`: block, grid, scalar arguments). A new source of candidates is one
`register_generator` call.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ptxtool.analysis.launch_bounds import REQNTID
from ptxtool.errors import InputError
from ptxtool.isa.targets import MAX_BLOCK_THREADS
from ptxtool.passes.registers.bounds import Bounds
from ptxtool.passes.warp_roles import VARIANTS as ROLE_VARIANTS
from ptxtool.services.launch import DTYPES, FLOAT_TYPES, LaunchSpec, Scalar
from ptxtool.sources import Source
from ptxtool.syntax import ast

OBJECTIVES = ("alone", "neighbour")
MAX_VALUES = 4096  # values one range may expand to
Dims = tuple[int, int, int]

# cache-operator variants tune tries: name -> changes to the pass's defaults (readonly, streaming, stores on);
# "none" is the input itself. Never `unsafe_volatile_nc`: tune only chooses among transformations proved safe.
CACHE_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "readonly": {"streaming": False, "stores": False},
    "streaming": {"readonly": False, "stores": False},
    "stores": {"readonly": False, "streaming": False},
    "loads": {"stores": False},
    "evict-first": {"l2_evict_first": True},
    "na-stores": {"store_hint": "L1::no_allocate"},
}
# what a register-pass variant may change: a field of the bounds it sets (never the exact block), or the body
# ("remat"); tuning/registers.py tells them apart by the kernel it makes
REGISTER_KINDS = (
    *(f.name.replace("_", "-") for f in fields(Bounds) if f.name != REQNTID.lstrip(".")),
    "remat",
)
DEFAULT_PRODUCERS = "default"  # producer_warps: the pass's own choice (RoleSettings.producer_warps = None)


@dataclass(frozen=True, slots=True)
class RoleSpace:
    """The warp-role pass settings tune tries, every combination; a setting the pass refuses is a note."""

    variants: tuple[str, ...] = ROLE_VARIANTS
    producer_warps: tuple[int | None, ...] = (None, 1)  # None: the pass's default (one producer thread per consumer)
    stages: tuple[int, ...] = (2, 3, 4)

    def to_data(self) -> dict[str, Any]:
        producers = [DEFAULT_PRODUCERS if p is None else p for p in self.producer_warps]
        return {"variant": list(self.variants), "producer_warps": producers, "stages": list(self.stages)}

    def settings(self) -> list[tuple[str, int | None, int]]:
        return list(itertools.product(self.variants, self.producer_warps, self.stages))


# ---------------------------------------------------------------- the space


@dataclass(frozen=True, slots=True)
class Space:
    """Everything tune may try and how it measures; each field's default is the small, sensible space."""

    block: tuple[Dims, ...] = ()  # block sizes to try (empty: the spec's only)
    grid: tuple[Dims, ...] = ()
    args: tuple[tuple[str, tuple[int | float, ...]], ...] = ()  # scalar parameter -> values to try
    cache_operators: tuple[str, ...] = tuple(CACHE_VARIANTS)
    registers: tuple[str, ...] = REGISTER_KINDS  # kinds of register-pass variants to try (empty: none)
    warp_roles: RoleSpace = RoleSpace()
    noalias: tuple[str, ...] = ()  # kernels the user declares alias-free (as `optimize --noalias`)
    generators: tuple[str, ...] | None = None  # None: every registered generator
    combine: bool = False  # also every code candidate at every launch candidate
    max_candidates: int = 64
    prune: bool = True  # leave untimed a code candidate with new spills or lower occupancy
    objective: str = "alone"
    neighbour_mib: int = 24
    budget_s: float | None = None
    gpus: str = "1"  # "all" or a count
    launches: int = 200  # timed rounds at most (each round launches every candidate once)
    min_rounds: int = 30  # before any early stop
    warmup: int = 10
    confidence: float = 0.95  # for all comparisons together (Bonferroni)
    min_gain: float = 0.0  # a winner's interval must lie below 1 - min_gain
    kernel_slack: float = 0.05  # neighbour objective: how much slower beyond noise the kernel itself may get

    def to_data(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        data["args"] = {name: list(values) for name, values in self.args}
        data["warp_roles"] = self.warp_roles.to_data()
        return data


def _fail(where: str, key: str, message: str) -> InputError:
    return InputError.at(where, f"tune setting `{key}`: {message}")


def _positive_int(value: Any) -> bool:
    return type(value) is int and value >= 1


def _dims(value: Any, key: str, where: str) -> Dims:
    items = [value] if type(value) is int else value
    if not isinstance(items, list) or not 1 <= len(items) <= 3 or not all(_positive_int(v) for v in items):
        raise _fail(where, key, f"a value is a positive integer or a list of 1 to 3 of them; got {value!r}")
    dims = (*items, *[1] * (3 - len(items)))
    threads = math.prod(dims)
    if key == "block" and threads > MAX_BLOCK_THREADS:
        raise _fail(where, key, f"block {list(dims)} has {threads} threads; a block holds {MAX_BLOCK_THREADS} at most")
    return dims  # type: ignore[return-value]


def _expand(value: Any, key: str, where: str) -> list[Any]:
    """A list of values, or a range `{from, to, step}` / `{from, to, factor}` (inclusive of `to` when reached)."""
    if isinstance(value, list) and value:
        return value  # block = [128, 256]: two sizes (one 3-D size is [[32, 8, 1]])
    if not isinstance(value, dict):
        raise _fail(where, key, f"give a list of values or a range {{from, to, step}}; got {value!r}")
    unknown = sorted(set(value) - {"from", "to", "step", "factor"})
    if unknown or "from" not in value or "to" not in value or ("step" in value) == ("factor" in value):
        raise _fail(where, key, "a range is {from = A, to = B, step = S} or {from = A, to = B, factor = F}")
    start, stop = value["from"], value["to"]
    step, factor = value.get("step"), value.get("factor")
    numbers = (start, stop, *(v for v in (step, factor) if v is not None))
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers) or stop < start:
        raise _fail(where, key, f"a range needs numbers with from <= to; got {value!r}")
    if (step is not None and step <= 0) or (factor is not None and factor <= 1):
        raise _fail(where, key, "a range's step must be > 0 and its factor > 1")
    out, current = [], start
    while current <= stop:
        out.append(current)
        if len(out) > MAX_VALUES:
            raise _fail(where, key, f"the range has more than {MAX_VALUES} values")
        current = current + step if step is not None else current * factor
    if all(type(v) is int for v in numbers[:2]) and (step is None or type(step) is int):
        out = [int(v) for v in out]
    return out


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, key, f"a list of strings; got {value!r}")
    return tuple(value)


def _number(value: Any, key: str, where: str, low: float, high: float, integer: bool = False) -> Any:
    kind = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        raise _fail(where, key, f"a {'whole ' if integer else ''}number from {low:g} to {high:g}; got {value!r}")
    return value


def _flag(value: Any, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, key, f"true or false; got {value!r}")
    return value


def _cache_operators(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, bool):
        return tuple(CACHE_VARIANTS) if value else ()
    names = _strings(value, key, where)
    unknown = [n for n in names if n not in CACHE_VARIANTS]
    if unknown:
        raise _fail(where, key, f"unknown variant {unknown[0]!r} (known: {', '.join(CACHE_VARIANTS)})")
    return names


def _known(value: Any, key: str, where: str, known: Iterable[str], what: str) -> tuple[str, ...]:
    """A string or list of strings, each one of `known` (else the first unknown one, named as a `what`)."""
    names, known = _strings(value, key, where), tuple(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise _fail(where, key, f"unknown {what} {unknown[0]!r} (known: {', '.join(known)})")
    return names


def _registers(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, bool):
        return REGISTER_KINDS if value else ()
    return _known(value, key, where, REGISTER_KINDS, "kind")


def _warp_roles(value: Any, key: str, where: str) -> RoleSpace:
    """true (the default space), false (none), or a table narrowing `variant`, `producer_warps`, `stages`."""
    if isinstance(value, bool):
        return RoleSpace() if value else RoleSpace((), (), ())
    if not isinstance(value, dict):
        raise _fail(where, key, f"true, false or a table of variant, producer_warps, stages; got {value!r}")
    unknown = sorted(set(value) - {"variant", "producer_warps", "producer-warps", "stages"})
    if unknown:
        raise _fail(where, f"{key}.{unknown[0]}", "unknown (known: variant, producer_warps, stages)")
    space = RoleSpace()
    if "variant" in value:
        space = replace(space, variants=_known(value["variant"], f"{key}.variant", where, ROLE_VARIANTS, "variant"))
    producers = value.get("producer_warps", value.get("producer-warps"))
    if producers is not None:
        given = _expand(producers, f"{key}.producer_warps", where)
        if not all(v == DEFAULT_PRODUCERS or (type(v) is int and 1 <= v <= 32) for v in given):
            raise _fail(where, f"{key}.producer_warps", f'whole numbers from 1 to 32 or "default"; got {producers!r}')
        space = replace(space, producer_warps=tuple(None if v == DEFAULT_PRODUCERS else v for v in given))
    if "stages" in value:
        stages = _expand(value["stages"], f"{key}.stages", where)
        if not all(_positive_int(v) for v in stages):
            raise _fail(where, f"{key}.stages", f"positive whole numbers; got {value['stages']!r}")
        space = replace(space, stages=tuple(stages))
    return space


def _generators(value: Any, key: str, where: str) -> tuple[str, ...]:
    return _known(value, key, where, GENERATORS, "generator")


def _objective(value: Any, key: str, where: str) -> str:
    if value not in OBJECTIVES:
        raise _fail(where, key, f"one of {', '.join(OBJECTIVES)}; got {value!r}")
    return value


def _gpus(value: Any, key: str, where: str) -> str:
    if value == "all" or (type(value) is int and value >= 1):
        return str(value)
    if isinstance(value, str) and value.isdigit() and int(value) >= 1:
        return value
    raise _fail(where, key, f'"all" or a number of GPUs (1 or more); got {value!r}')


# key -> how to read its value (value, key, where) -> field value
_READERS: dict[str, Callable[[Any, str, str], Any]] = {
    "block": lambda v, k, w: tuple(_dims(x, k, w) for x in _expand(v, k, w)),
    "grid": lambda v, k, w: tuple(_dims(x, k, w) for x in _expand(v, k, w)),
    "cache_operators": _cache_operators,
    "registers": _registers,
    "warp_roles": _warp_roles,
    "noalias": _strings,
    "generators": _generators,
    "combine": _flag,
    "prune": _flag,
    "max_candidates": lambda v, k, w: _number(v, k, w, 1, 10_000, integer=True),
    "objective": _objective,
    "neighbour_mib": lambda v, k, w: _number(v, k, w, 0, 1 << 20, integer=True),
    "budget_s": lambda v, k, w: float(_number(v, k, w, 0.001, 1e9)),
    "gpus": _gpus,
    "launches": lambda v, k, w: _number(v, k, w, 5, 1_000_000, integer=True),
    "min_rounds": lambda v, k, w: _number(v, k, w, 5, 1_000_000, integer=True),
    "warmup": lambda v, k, w: _number(v, k, w, 0, 1_000_000, integer=True),
    "confidence": lambda v, k, w: float(_number(v, k, w, 0.5, 0.9999)),
    "min_gain": lambda v, k, w: float(_number(v, k, w, 0, 0.5)),
    "kernel_slack": lambda v, k, w: float(_number(v, k, w, 0, 10)),
}
KEYS = (*_READERS, "args")


def read_layer(space: Space, table: dict[str, Any], where: str) -> Space:
    """`space` with one layer of settings over it (config, the spec's `[tune]`, `--space`, flags): every key and
    value checked, a mistake is an InputError naming `where` and the key. `-` and `_` are the same in keys."""
    if not isinstance(table, dict):
        raise InputError.at(where, "tune settings must be a table")
    changes: dict[str, Any] = {}
    for raw, value in table.items():
        key = raw.replace("-", "_")
        if key == "args":
            changes["args"] = _args(dict(space.args), value, where)
        elif key in _READERS:
            changes[key] = _READERS[key](value, raw, where)
        else:
            raise InputError.at(where, f"unknown tune setting {raw!r} (known: {', '.join(KEYS)})")
    return replace(space, **changes)


def _args(current: dict[str, tuple], value: Any, where: str) -> tuple[tuple[str, tuple], ...]:
    if not isinstance(value, dict):
        raise _fail(where, "args", "a table: parameter name = list of values or a range")
    for name, values in value.items():
        expanded = _expand(values, f"args.{name}", where)
        if not expanded or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in expanded):
            raise _fail(where, f"args.{name}", f"a non-empty list of numbers or a range; got {values!r}")
        current[name] = tuple(expanded)
    return tuple(current.items())


def check_against_spec(space: Space, spec: LaunchSpec, where: str) -> None:
    """Each tuned argument names a scalar of the spec and each value fits its type."""
    scalars = {p.name: p for p in spec.params if isinstance(p, Scalar)}
    for name, values in space.args:
        if name not in scalars:
            known = ", ".join(scalars) or "none"
            raise _fail(where, f"args.{name}", f"the spec has no scalar parameter {name!r} (scalars: {known})")
        kind = scalars[name].type
        for v in values:
            if kind not in FLOAT_TYPES:
                info = np.iinfo(DTYPES[kind])
                if not isinstance(v, int) or not info.min <= v <= info.max:
                    raise _fail(where, f"args.{name}", f"{v!r} is not a {kind} value")


# ---------------------------------------------------------------- candidates


@dataclass(frozen=True, slots=True)
class Launch:
    """How a candidate is launched: geometry and the scalar arguments it changes."""

    grid: Dims
    block: Dims
    args: tuple[tuple[str, int | float], ...] = ()

    def spec(self, base: LaunchSpec) -> LaunchSpec:
        """The launch spec for this launch: `base` with this geometry and these scalar values."""
        values = dict(self.args)
        params = tuple(replace(p, value=values[p.name]) if p.name in values else p for p in base.params)
        return replace(base, grid=self.grid, block=self.block, params=params)

    def to_data(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "block": list(self.block), "args": dict(self.args)}


def base_launch(spec: LaunchSpec) -> Launch:
    return Launch(spec.grid, spec.block)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One variant: its PTX text, its launch, which generator made it and from what settings."""

    name: str
    origin: str
    text: str
    launch: Launch
    code_changed: bool = False
    launch_changed: bool = False  # a launch the space asked for (a code change may bring its own: warp roles' block)
    settings: tuple[tuple[str, Any], ...] = ()
    judged: bool = False  # its generator already ruled on ptxas's numbers: tune's own pruning leaves it alone

    @property
    def digest(self) -> str:
        """What identifies the candidate's work: its text and its launch."""
        return hashlib.sha256(f"{self.text}\0{self.launch}".encode()).hexdigest()

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "code_changed": self.code_changed,
            "launch_changed": self.launch_changed,
            "launch": self.launch.to_data(),
            "settings": dict(self.settings),
        }


@dataclass(frozen=True)
class Context:
    """What a generator works from: the input, its kernel (exact name) and target, the spec and the space."""

    source: Source
    module: ast.Module
    kernel: str
    arch: str
    spec: LaunchSpec
    space: Space
    notes: list[str] = field(default_factory=list)  # what generators want said (a variant that changed nothing)

    @property
    def input(self) -> Candidate:
        return Candidate("input", "input", self.source.text, base_launch(self.spec))


@dataclass(frozen=True)
class Generator:
    """A source of candidates: `kind` is "code" (same launch, new text) or "launch" (same text, new launch)."""

    name: str
    kind: str
    make: Callable[[Context], Iterable[Candidate]]


GENERATORS: dict[str, Generator] = {}


def register_generator(g: Generator) -> Generator:
    """Add a source of candidates (a second of one name is a bug)."""
    assert g.name not in GENERATORS, f"generator {g.name!r} registered twice"
    assert g.kind in ("code", "launch"), g.kind
    GENERATORS[g.name] = g
    return g


def cache_operator_candidates(context: Context) -> Iterable[Candidate]:
    """One candidate per cache-operator variant whose verified output differs from the input and from the others:
    the pass manager's output first (cheap, to drop variants that change nothing), then `optimize`'s verified,
    minimal-edit text."""
    from ptxtool.passes import run_pipeline
    from ptxtool.passes.cache_operators import NAME, POLICIES, Policy, Settings
    from ptxtool.services.optimize import Options, execute
    from ptxtool.syntax import format_module

    only = (context.kernel,)
    seen_modules: dict[str, str] = {format_module(context.module): "input"}
    seen_texts: dict[str, str] = {context.source.text: "input"}
    for variant in context.space.cache_operators:
        changes = dict(CACHE_VARIANTS[variant])
        defaults = Settings()
        policies = {
            name: Policy(
                bool(changes.pop(name, getattr(defaults, name).enabled)) and name != "unsafe_volatile_nc", only
            )
            for name in POLICIES
        }
        settings = Settings(**policies, noalias=context.space.noalias, arch=context.arch, **changes)
        optimized, _ = run_pipeline(context.module, (NAME,), {NAME: settings})
        shape = format_module(optimized)
        if shape in seen_modules:
            context.notes.append(f"cache-operators:{variant} gives the same code as {seen_modules[shape]}")
            continue
        seen_modules[shape] = variant
        result = execute(Options(passes=(NAME,), settings=settings), context.source)
        if result.text in seen_texts:
            context.notes.append(
                f"cache-operators:{variant}: after verification, the same as {seen_texts[result.text]}"
            )
            continue
        seen_texts[result.text] = variant
        used = tuple((k, v) for k, v in CACHE_VARIANTS[variant].items()) + (("noalias", context.space.noalias),)
        yield Candidate(
            f"cache-operators:{variant}",
            "cache-operators",
            result.text,
            context.input.launch,
            code_changed=True,
            settings=(("variant", variant), *used),
        )


def launch_candidates(context: Context) -> Iterable[Candidate]:
    """Every combination of the tuned block sizes, grid sizes and scalar arguments (the spec's own value always
    among them) except the spec's own launch, which is the input."""
    spec, space = context.spec, context.space
    scalars = {p.name: p.value for p in spec.params if isinstance(p, Scalar)}
    names = [name for name, _ in space.args]
    dimensions = [
        dict.fromkeys((spec.block, *space.block)),
        dict.fromkeys((spec.grid, *space.grid)),
        *(dict.fromkeys((scalars[n], *v)) for n, v in space.args),
    ]
    for block, grid, *values in itertools.product(*dimensions):
        args = tuple((n, v) for n, v in zip(names, values, strict=True) if v != scalars[n])
        launch = Launch(grid, block, args)
        if launch == context.input.launch:
            continue
        changed = (("block", block, spec.block), ("grid", grid, spec.grid))
        parts = [f"{key}={dims_text(new)}" for key, new, old in changed if new != old]
        parts += [f"{n}={v}" for n, v in args]
        yield Candidate(" ".join(parts), "launch", context.source.text, launch, launch_changed=True)


def dims_text(dims: Dims) -> str:
    used = list(dims)
    while len(used) > 1 and used[-1] == 1:
        used.pop()
    return "x".join(map(str, used))


def register_candidates(context: Context) -> Iterable[Candidate]:
    """The register pass's bounds, caps and rematerialized variants that survive its ptxas rules (registers.py)."""
    from ptxtool.services.tuning.registers import candidates

    return candidates(context)


def warp_role_candidates(context: Context) -> Iterable[Candidate]:
    """The warp-role split for every variant, P and S the space names, each at the block it needs (roles.py)."""
    from ptxtool.services.tuning.roles import candidates

    return candidates(context)


register_generator(Generator("cache-operators", "code", cache_operator_candidates))
register_generator(Generator("registers", "code", register_candidates))
register_generator(Generator("warp-roles", "code", warp_role_candidates))
register_generator(Generator("launch", "launch", launch_candidates))


def make_candidates(context: Context, where: str) -> list[Candidate]:
    """The input first, then each generator's candidates in table order (with `combine`, every code candidate that
    keeps the spec's launch at every launch candidate too); identical work (same text, same launch) once. Too many
    is an InputError."""
    chosen = context.space.generators or tuple(GENERATORS)
    made: dict[str, list[Candidate]] = {"code": [], "launch": []}
    for name in chosen:
        g = GENERATORS[name]
        made[g.kind].extend(g.make(context))
    found = [context.input, *made["code"], *made["launch"]]
    if context.space.combine:
        found += [
            Candidate(
                f"{code.name} {launch.name}",
                f"{code.origin}+{launch.origin}",
                code.text,
                launch.launch,
                code_changed=True,
                launch_changed=True,
                settings=code.settings,
            )
            for code in made["code"]
            if code.launch == context.input.launch  # a split kernel needs its own block: not another one
            for launch in made["launch"]
        ]
    unique: dict[str, Candidate] = {}
    for c in found:
        unique.setdefault(c.digest, c)
    out = list(unique.values())
    if len(out) > context.space.max_candidates:
        raise InputError.at(
            where,
            f"the space has {len(out)} candidates; max_candidates is {context.space.max_candidates} "
            "(narrow the space, or raise max_candidates)",
        )
    return out


def read_space_file(path: str) -> dict[str, Any]:
    """A `--space` file: the settings at its top level, or in its `[tune]` table (a launch spec is a space too)."""
    from ptxtool.config import read_toml

    p = Path(path)
    if not p.is_file():
        raise InputError.at(path, "no such space file" if not p.exists() else "not a file")
    data = read_toml(p)
    return data["tune"] if "tune" in data else data

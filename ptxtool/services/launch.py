"""Launch specs: the TOML that says how to launch one kernel and what its buffers hold (docs/run.md).

A spec is checked when it is read, so a mistake is a clear `spec.toml: error: ...` before any GPU work, and
`fill` makes each buffer's contents on the host from a seed, the same bytes on every machine.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ptxtool.errors import InputError, UsageError
from ptxtool.isa.targets import MAX_BLOCK, MAX_BLOCK_THREADS
from ptxtool.isa.types import TYPE_BYTES
from ptxtool.sources import Source, Unreadable, parse_source
from ptxtool.syntax import ast
from ptxtool.toolchain.gpu import Gpu

DEFAULT_POISON = 0x5A
DEFAULT_TRIALS = 3
DEFAULT_SEED = 1

# Element and scalar types, spelled as in PTX without the dot. bf16 is held as its 16 raw bits.
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(code)
    for name, code in {
        "u8": "<u1",
        "s8": "<i1",
        "b8": "<u1",
        "u16": "<u2",
        "s16": "<i2",
        "b16": "<u2",
        "u32": "<u4",
        "s32": "<i4",
        "b32": "<u4",
        "u64": "<u8",
        "s64": "<i8",
        "b64": "<u8",
        "f16": "<f2",
        "bf16": "<u2",
        "f32": "<f4",
        "f64": "<f8",
    }.items()
}
FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
INITS = ("random", "iota", "constant", "zeros", "npy")
POINTER_BYTES = 8

_SPEC_KEYS = {
    "kernel",
    "ptx",
    "grid",
    "block",
    "shared_bytes",
    "cooperative",
    "seed",
    "trials",
    "poison",
    "param",
    "tune",
}
_SCALAR_KEYS = {"name", "type", "value"}
_BUFFER_KEYS = {"name", "type", "count", "init", "range", "value", "start", "step", "file", "output", "rtol", "atol"}


@dataclass(frozen=True, slots=True)
class Scalar:
    """A parameter passed by value: `n`, `alpha`."""

    name: str
    type: str
    value: int | float

    @property
    def size(self) -> int:
        return DTYPES[self.type].itemsize

    def encode(self) -> bytes:
        """The parameter's bytes as the kernel reads them (bf16 rounded to nearest even)."""
        if self.type == "bf16":
            return to_bf16(np.array([self.value], dtype=np.float32)).tobytes()
        return np.array([self.value], dtype=DTYPES[self.type]).tobytes()


@dataclass(frozen=True, slots=True)
class Buffer:
    """A device buffer whose address is the parameter: element type, count, how it starts, whether it is output.

    An output with no `init` is written only by the kernel: it is poisoned before every launch, so an element the
    kernel leaves alone shows up. An output with an `init` is read and written (`y` in saxpy).
    """

    name: str
    type: str
    count: int
    init: str | None = "random"
    range: tuple[float, float] | None = None
    value: int | float = 0
    start: int | float = 0
    step: int | float = 1
    file: Path | None = None
    output: bool = False
    rtol: float = 0.0
    atol: float = 0.0

    size = POINTER_BYTES

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.type]

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @property
    def poisoned(self) -> bool:
        return self.output and self.init is None

    @property
    def exact(self) -> bool:
        """Compared bit for bit (no tolerance in the spec)."""
        return self.rtol == 0 and self.atol == 0


Param = Scalar | Buffer


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One kernel launch: geometry, dynamic shared memory, parameters in order, and how to test it."""

    path: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[Param, ...]
    kernel: str | None = None
    ptx: Path | None = None  # the PTX file that holds the kernel, when the spec names one (`ptx`, beside the spec)
    shared_bytes: int = 0
    cooperative: bool = False
    seed: int = DEFAULT_SEED
    trials: int = DEFAULT_TRIALS
    poison: int = DEFAULT_POISON
    buffers: tuple[Buffer, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(p for p in self.params if isinstance(p, Buffer)))

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if b.output)

    @property
    def nondeterministic(self) -> bool:
        """The spec gives some output a tolerance: the kernel's own result may vary (float atomics)."""
        return any(not b.exact for b in self.outputs)

    @property
    def buffer_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)


# ---------------------------------------------------------------- reading


def load_spec(path: str) -> LaunchSpec:
    """Read and check a launch spec; every problem is an InputError naming the file (and the line, for TOML)."""
    p = Path(path)
    if not p.is_file():
        raise InputError.at(path, "no such launch spec" if not p.exists() else "not a file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError.at(path, "not UTF-8 text: a launch spec is TOML") from None
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        m = re.search(r"\(at line (\d+), column (\d+)\)$", message)
        where = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        raise InputError.at(path, f"not valid TOML: {message[: m.start()].strip() if m else message}", *where) from None
    return spec_from_data(data, path, p.parent)


def spec_from_data(data: dict[str, Any], path: str, base: Path) -> LaunchSpec:
    """Build a LaunchSpec from parsed TOML; `base` is where relative .npy paths start."""

    def fail(message: str) -> InputError:
        return InputError.at(path, message)

    _no_unknown(data, _SPEC_KEYS, "the spec", fail)
    for key in ("grid", "block"):
        if key not in data:
            raise fail(f"`{key}` is missing (an integer or a list of up to three: {key} = [x, y, z])")
    raw_params = data.get("param", [])
    if not isinstance(raw_params, list) or not all(isinstance(p, dict) for p in raw_params):
        raise fail("`param` must be an array of tables: one [[param]] per kernel parameter, in order")
    params = tuple(_param(p, i, base, fail) for i, p in enumerate(raw_params))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise fail(f"parameter names repeat: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    spec = LaunchSpec(
        path=path,
        grid=_dims(data["grid"], "grid", fail),
        block=_dims(data["block"], "block", fail),
        params=params,
        kernel=_typed(data, "kernel", str, None, fail),
        ptx=_ptx_path(data, base, fail),
        shared_bytes=_count(data, "shared_bytes", 0, fail),
        cooperative=_typed(data, "cooperative", bool, False, fail),
        seed=_typed(data, "seed", int, DEFAULT_SEED, fail),
        trials=_count(data, "trials", DEFAULT_TRIALS, fail, minimum=1),
        poison=_typed(data, "poison", int, DEFAULT_POISON, fail),
    )
    if not 0 <= spec.poison <= 0xFF:
        raise fail(f"`poison` is one byte (0..255, e.g. 0x5A), not {spec.poison}")
    threads = math.prod(spec.block)
    if threads > MAX_BLOCK_THREADS or any(n > most for n, most in zip(spec.block, MAX_BLOCK, strict=True)):
        most = f"{MAX_BLOCK_THREADS} threads, at most {list(MAX_BLOCK)} in x, y, z"
        raise fail(f"block {list(spec.block)} has {threads} threads; a block holds at most {most}")
    return spec


def _param(raw: dict[str, Any], index: int, base: Path, fail) -> Param:
    name = raw.get("name", f"param{index}")
    where = f"param {index} ({name})"
    if not isinstance(name, str) or not name:
        raise fail(f"param {index}: `name` must be a non-empty string")
    kind = raw.get("type")
    if kind not in DTYPES:
        raise fail(f"{where}: `type` must be one of {', '.join(DTYPES)}; got {kind!r}")
    if "count" not in raw:
        _no_unknown(raw, _SCALAR_KEYS, where, fail)
        if "value" not in raw:
            raise fail(f"{where}: a scalar needs a `value` (or give a `count` to make it a buffer)")
        return Scalar(name, kind, _number(raw["value"], kind, f"{where}: `value`", fail))
    _no_unknown(raw, _BUFFER_KEYS, where, fail)
    output = _typed(raw, "output", bool, False, fail, where)
    init = raw.get("init", None if output else "random")
    if init not in INITS and not (init is None and output):
        raise fail(f"{where}: `init` must be one of {', '.join(INITS)}; got {init!r}")
    file = None
    count = raw["count"]
    if init == "npy":
        file = _npy_path(raw, base, where, fail)
        if count == "file":
            count = int(np.load(file, mmap_mode="r").size)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise fail(f"{where}: `count` (elements) must be a positive integer; got {count!r}")
    rng = raw.get("range")
    if rng is not None:
        ok = isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int | float) for v in rng)
        if not ok or not rng[0] < rng[1]:
            raise fail(f"{where}: `range` is [low, high) with low < high; got {rng!r}")
        rng = (rng[0], rng[1])
    tolerances = {k: raw.get(k, 0.0) for k in ("rtol", "atol")}
    for key, value in tolerances.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise fail(f"{where}: `{key}` must be a number >= 0")
        if value and not output:
            raise fail(f"{where}: `{key}` applies to outputs only (add `output = true`)")
    return Buffer(
        name=name,
        type=kind,
        count=count,
        init=init,
        range=rng,
        value=_number(raw.get("value", 0), kind, f"{where}: `value`", fail),
        start=_number(raw.get("start", 0), kind, f"{where}: `start`", fail),
        step=_number(raw.get("step", 1), kind, f"{where}: `step`", fail),
        file=file,
        output=output,
        rtol=float(tolerances["rtol"]),
        atol=float(tolerances["atol"]),
    )


def _ptx_path(data: dict[str, Any], base: Path, fail) -> Path | None:
    """`ptx = "kernels.ptx"`: the file that holds the spec's kernel, relative to the spec. Not opened here: `run`
    and `bench` take their files on the command line, and a spec copied elsewhere still launches the same kernel."""
    name = _typed(data, "ptx", str, None, fail)
    if name is not None and not name:
        raise fail("`ptx` must name a file (relative to the spec)")
    return None if name is None else (base / name).resolve()


def _npy_path(raw: dict[str, Any], base: Path, where: str, fail) -> Path:
    name = raw.get("file")
    if not isinstance(name, str):
        raise fail(f'{where}: init = "npy" needs `file = "data.npy"` (relative to the spec)')
    file = (base / name).resolve()
    if not file.is_file():
        raise fail(f"{where}: no such .npy file: {file}")
    return file


def _no_unknown(table: dict[str, Any], known: set[str], where: str, fail) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise fail(
            f"{where}: unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )


def _typed(table: dict[str, Any], key: str, kind: type, default: Any, fail, where: str = "") -> Any:
    value = table.get(key, default)
    if value is not default and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise fail(f"{where + ': ' if where else ''}`{key}` must be {kind.__name__}; got {value!r}")
    return value


def _count(table: dict[str, Any], key: str, default: int, fail, minimum: int = 0) -> int:
    value = _typed(table, key, int, default, fail)
    if value < minimum:
        raise fail(f"`{key}` must be at least {minimum}; got {value}")
    return value


def _dims(value: Any, key: str, fail) -> tuple[int, int, int]:
    items = [value] if isinstance(value, int) else value
    ok = isinstance(items, list) and 1 <= len(items) <= 3
    if not ok or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in items):
        raise fail(f"`{key}` must be a positive integer or a list of 1 to 3 of them; got {value!r}")
    return tuple(items + [1] * (3 - len(items)))


def _number(value: Any, kind: str, where: str, fail) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(f"{where} must be a number; got {value!r}")
    if kind in FLOAT_TYPES:
        return float(value)
    if not isinstance(value, int):
        raise fail(f"{where} must be an integer for type {kind}; got {value!r}")
    info = np.iinfo(DTYPES[kind])
    low = info.min if kind.startswith("s") else -(2 ** (info.bits - 1))  # -1 is a fine u32: all bits set
    if not low <= value <= info.max:
        raise fail(f"{where} {value} does not fit in {kind}")
    return value % 2**info.bits if value < 0 and info.min == 0 else value


# ---------------------------------------------------------------- contents


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, rounded to nearest even (NaN stays NaN)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def fill(buffer: Buffer, seed: int, trial: int, index: int) -> np.ndarray:
    """The buffer's starting contents as a 1-D array of its element type; random ones depend on (seed, trial, index)."""
    dtype = buffer.dtype
    if buffer.init == "npy":
        return _from_npy(buffer)
    if buffer.init in (None, "zeros"):
        return np.zeros(buffer.count, dtype)
    if buffer.init == "constant":
        if buffer.type in FLOAT_TYPES:
            return _cast(np.full(buffer.count, buffer.value, dtype=np.float64), buffer)
        return np.full(buffer.count, buffer.value, dtype=dtype)
    if buffer.init == "iota":
        values = buffer.start + buffer.step * np.arange(
            buffer.count, dtype=np.float64 if buffer.type in FLOAT_TYPES else np.int64
        )
        return _cast(values, buffer)
    rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, trial, index])
    if buffer.type in FLOAT_TYPES:
        low, high = buffer.range or (-1.0, 1.0)
        return _cast(rng.uniform(low, high, buffer.count), buffer)
    if buffer.range is None:
        return np.frombuffer(rng.bytes(buffer.nbytes), dtype=dtype).copy()
    low, high = math.ceil(buffer.range[0]), math.ceil(buffer.range[1])
    return rng.integers(low, high, buffer.count, dtype=np.int64).astype(dtype)


def _cast(values: np.ndarray, buffer: Buffer) -> np.ndarray:
    if buffer.type == "bf16":
        return to_bf16(values.astype(np.float32))
    if buffer.type in FLOAT_TYPES:
        return values.astype(buffer.dtype)
    return values.astype(np.int64).astype(buffer.dtype)  # wraps modulo 2**bits, like the integer in the register


def _from_npy(buffer: Buffer) -> np.ndarray:
    data = np.load(buffer.file, allow_pickle=False)
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.dtype.itemsize != buffer.dtype.itemsize:
        raise InputError.at(
            str(buffer.file),
            f"{flat.dtype} elements are {flat.dtype.itemsize} bytes; buffer {buffer.name} is {buffer.type}",
        )
    if flat.size < buffer.count:
        raise InputError.at(str(buffer.file), f"holds {flat.size} elements; buffer {buffer.name} needs {buffer.count}")
    return flat[: buffer.count].view(buffer.dtype).copy()


# ---------------------------------------------------------------- programs


GUARD_BYTES = 4096  # poisoned bytes after every buffer: a write past the end changes them


@dataclass(frozen=True, slots=True)
class Program:
    """One input file, ready for the driver: PTX text to JIT, or a cubin, and the kernel's exact name in it."""

    path: str
    kernel: str
    image: bytes
    ptx: bool


def load_program(
    source: Source, kernel: str | None, spec: LaunchSpec, *, ptxas: bool = False, arch: str = ""
) -> Program:
    """A PTX source (parsed, kernel found, signature checked against the spec) or a .cubin (taken as it is).

    With `ptxas`, the PTX is assembled for `arch` by ptxas instead of the driver's JIT.
    """
    wanted = kernel or spec.kernel
    if source.data:
        if not wanted:
            raise InputError.at(
                source.path, "a cubin needs --kernel (or `kernel` in the spec): its exact, mangled name"
            )
        return Program(source.path, wanted, source.data, ptx=False)
    module = parse_source(source)
    function = find_kernel(module, wanted, source.display)
    check_signature(function, spec, source.display)
    if ptxas:
        from ptxtool.toolchain.compile import compile_ptx

        suffix = "a" if any(t.endswith("a") for t in module.targets) else ""
        cubin = compile_ptx(source.text, source.display, arch + suffix).cubin
        return Program(source.display, function.name, cubin, ptx=False)
    return Program(source.display, function.name, source.text.encode(), ptx=True)


def find_kernel(module: ast.Module, wanted: str | None, path: str) -> ast.Function:
    """The kernel named `wanted`: its exact name, or a C++ kernel's name (`histogram` -> `_Z9histogram...`)."""
    from ptxtool.syntax.names import find

    kernels = module.kernels
    names = ", ".join(k.name for k in kernels) or "none"
    if not wanted:
        if len(kernels) == 1:
            return kernels[0]
        raise InputError.at(path, f"give --kernel (or `kernel` in the spec): this file has kernels {names}")
    found = find([k.name for k in kernels], wanted)
    if len(found) == 1:
        return next(k for k in kernels if k.name == found[0])
    if found:
        raise InputError.at(path, f"{wanted} names several kernels: {', '.join(found)}; give the full name")
    raise InputError.at(path, f"no kernel named {wanted}; kernels here: {names}")


def check_signature(function: ast.Function, spec: LaunchSpec, path: str) -> None:
    """The spec's parameters match the kernel's in number and size (a buffer is an 8-byte address)."""
    params = function.params or ()
    if len(params) != len(spec.params):
        raise InputError.at(
            spec.path,
            f"kernel {function.name} in {path} takes {len(params)} parameters; the spec gives {len(spec.params)}",
        )
    for i, (param, given) in enumerate(zip(params, spec.params, strict=True)):
        size = param_bytes(param)
        if size is not None and size != given.size:
            kind = "a buffer (an 8-byte address)" if isinstance(given, Buffer) else f"{given.type} ({given.size} bytes)"
            raise InputError.at(
                spec.path,
                f"param {i} ({given.name}): kernel {function.name} declares {_spelling(param)} ({size} bytes) "
                f"there; the spec gives {kind}",
            )


def param_bytes(param: ast.Param) -> int | None:
    """Bytes of a `.param` from its type and array dimensions; None when a dimension is open (`[]`)."""
    size = next((TYPE_BYTES[a.word] for a in param.attributes if a.word in TYPE_BYTES), None)
    if size is None or any(d is None for d in param.dims):
        return None
    return size * math.prod(int(d.text, 0) for d in param.dims)


def _spelling(param: ast.Param) -> str:
    words = " ".join(a.word for a in param.attributes if a.word != ".param")
    return words + "".join(f"[{d.text}]" for d in param.dims if d is not None)


# ---------------------------------------------------------------- device buffers


class Workspace:
    """The spec's buffers on the device, each followed by a poisoned guard zone, and the parameter bytes."""

    def __init__(self, gpu: Gpu, spec: LaunchSpec) -> None:
        self.gpu, self.spec = gpu, spec
        self.pointers = [gpu.alloc(b.nbytes + GUARD_BYTES) for b in spec.buffers]

    def args(self, pointers: Sequence[int] | None = None) -> list[bytes]:
        addresses = iter(pointers or self.pointers)
        return [
            next(addresses).to_bytes(8, "little") if isinstance(p, Buffer) else p.encode() for p in self.spec.params
        ]

    def prepare(self, contents: Sequence[np.ndarray], pointers: Sequence[int] | None = None) -> None:
        """Starting contents in, outputs and guard zones poisoned."""
        poison = self.spec.poison
        for buffer, ptr, data in zip(self.spec.buffers, pointers or self.pointers, contents, strict=True):
            if buffer.poisoned:
                self.gpu.fill_bytes(ptr, poison, buffer.nbytes + GUARD_BYTES)
            else:
                self.gpu.upload(ptr, data)
                self.gpu.fill_bytes(ptr + buffer.nbytes, poison, GUARD_BYTES)

    def read(self, timeout: float) -> list[np.ndarray]:
        """Every buffer's bytes and its guard zone, after the queued work."""
        return [
            self.gpu.download(p, b.nbytes + GUARD_BYTES, timeout)
            for b, p in zip(self.spec.buffers, self.pointers, strict=True)
        ]


@contextmanager
def loaded(sources: Sequence[Source], kernel: str | None, spec: LaunchSpec, ptxas: bool) -> Iterator[tuple]:
    """The GPU with each file's kernel loaded. PTX is checked against the spec before the GPU is touched; with
    `ptxas` it is assembled for the GPU's architecture, which is known only once the GPU is open."""
    programs = None if ptxas else [load_program(p, kernel, spec) for p in sources]
    with Gpu() as gpu:
        if ptxas:
            programs = [load_program(p, kernel, spec, ptxas=True, arch=gpu.info.arch.rstrip("a")) for p in sources]
        functions = [gpu.function(gpu.load(p.image, p.path, ptx=p.ptx), p.kernel) for p in programs]
        yield gpu, programs, functions


def programs_of(sources: Sequence[Source | Unreadable]) -> list[Source]:
    """The one or two inputs of `run`/`bench`, read: the first unreadable one is the error."""
    if len(sources) > 2:
        raise UsageError("give one file to run, or two (A B) to compare")
    for s in sources:
        if isinstance(s, Unreadable):
            raise InputError(list(s.diagnostics))
    return list(sources)  # type: ignore[arg-type]

"""PTX -> cubin with ptxas (the authority on resources) or in-process with nvJitLink (a quick check whose numbers
are relocatable-mode numbers), keeping ptxas's `-v` report and mapping its errors back to the input's lines.

Results are cached by content hash (ptxas path and version, options, PTX text) under `$PTXTOOL_CACHE_DIR`
(default `~/.cache/ptxtool`); `PTXTOOL_CACHE_DIR=off` turns the cache off, and a directory that cannot be used (no
home, read-only) turns it off with one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from ptxtool.cache import cache_location
from ptxtool.errors import Diagnostic, EnvironmentProblem, InputError, Location
from ptxtool.syntax.names import TARGET, target_number
from ptxtool.toolchain.discover import Tool, find_tool, run_tool
from ptxtool.toolchain.resources import FunctionResources, ToolWarning, parse_verbose, parse_warnings

_MESSAGE = re.compile(r"^ptxas (?:.*?, line (\d+); )?(error|warning|fatal)\s*: (.*)$")
_AT_LINE = re.compile(r"at line (\d+)")
_UNRESOLVED = "Unresolved extern function"
_UNKNOWN_TARGET = "is not defined for option 'gpu-name'"  # a target ptxas does not know (sm_99) or dropped (sm_52)
_NEWER_TARGET = "SM version specified by .target is higher than default SM version assumed"
_DEFAULT_ARCH_NOTE = "nvcc compiled for its default target (no --arch): a source for a newer GPU needs --arch sm_XY"
_SEPARATE_COMPILATION = "requires separate compilation mode"  # nvcc: a kernel launches a kernel (needs -rdc=true)
_TARGET_LINE = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)


@dataclass
class Compiled:
    """A cubin and what the backend said while making it."""

    cubin: bytes
    arch: str
    backend: str
    log: str
    relocatable: bool = False
    cached: bool = False
    functions: dict[str, FunctionResources] = field(default_factory=dict)
    warnings: list[ToolWarning] = field(default_factory=list)


def target_arch(targets: tuple[str, ...], path: str, override: str | None = None) -> str:
    """The `sm_XY` to compile for: `override` if given, else the module's `.target`."""
    arch = override or next((t for t in targets if t.startswith("sm_")), None)
    if arch is None:
        raise InputError.at(path, "no `.target sm_XY` in the module: give one with --arch (e.g. --arch sm_90)")
    if not TARGET.fullmatch(arch):
        raise InputError.at(path, f"not a GPU target: {arch!r} (expected sm_XY, sm_XYa or sm_XYf)")
    return arch


def _unknown_target_hint(arch: str) -> str:
    """What to give instead of a target this ptxas does not take: the targets it does (it is asked, not a table)."""
    from ptxtool.toolchain.discover import ptxas_support

    try:
        targets = ptxas_support(find_tool("ptxas"))[1]
    except EnvironmentProblem:
        return ""
    if not targets:
        return ""
    taken = f"this ptxas assembles for {', '.join(targets)}"
    oldest = targets[0]
    if (target_number(arch) or 0) < (target_number(oldest) or 0):
        return f" ({taken}; the PTX runs on newer GPUs: give --arch {oldest})"
    return f" ({taken}: give one of them with --arch)"


def _diagnostics(log: str, path: str, text: str, arch: str) -> list[Diagnostic]:
    lines = text.splitlines()
    found = []
    for raw in log.splitlines():
        match = _MESSAGE.match(raw.strip())
        if not match or match.group(3) == "Ptx assembly aborted due to errors":
            continue
        line = int(match.group(1) or (_AT_LINE.search(match.group(3)) or [0, 0])[1])
        message = f"ptxas: {match.group(3)}"
        if _UNKNOWN_TARGET in message:
            message += _unknown_target_hint(arch)
        elif _NEWER_TARGET in message and (target := _TARGET_LINE.search(text)):
            line = text.count("\n", 0, target.start()) + 1
            message = (
                f"the module's .target {target.group(1)} is newer than the target assembled for, {arch}: ptxas does "
                f"not assemble PTX for an older GPU than it targets (give --arch {target.group(1)} or a newer one, "
                "or no --arch)"
            )
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        severity = "warning" if match.group(2) == "warning" else "error"
        found.append(Diagnostic(Location(path, line, 0, source), message, severity))
    return found


_UNUSABLE: dict[Path, str] = {}  # cache directories found unusable in this process (and its forked workers): why
_USABLE: set[Path] = set()  # and those found usable (checked once: a probe file per compile would be waste)


def _usable(directory: Path) -> str | None:
    """Why a cache directory cannot be used (None: it can): it must exist or be creatable, and take a new file."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        return error.strerror or str(error)
    return None


def cache_dir() -> Path | None:
    """Where compiled and disassembled results are kept, or None when caching is off or the directory is unusable
    (no home, a path under a file, read-only): the cache is an optimization, so that is one warning, not a failure."""
    directory, why = cache_location()
    if why:
        return _unusable(directory or Path("~/.cache/ptxtool"), why)
    if directory is None:
        return None
    if directory in _UNUSABLE:
        return None
    if directory not in _USABLE:
        problem = _usable(directory)
        if problem:
            return _unusable(directory, problem)
        _USABLE.add(directory)
    return directory


def _unusable(directory: Path, why: str) -> None:
    """Say once per process that the cache is off, and why."""
    if directory not in _UNUSABLE:
        _UNUSABLE[directory] = why
        print(
            f"warning: cache directory {directory} unusable ({why}): running without the cache "
            "(set PTXTOOL_CACHE_DIR to a writable directory, or to off)",
            file=sys.stderr,
        )
    return None


def _store(cache: Path, name: str, data: bytes) -> None:
    """Put one result in the cache all at once (a reader never sees half of it); a failure only turns the cache off."""
    partial = cache / f".{name}.{os.getpid()}.tmp"
    try:
        partial.write_bytes(data)
        os.replace(partial, cache / name)
    except OSError as error:
        partial.unlink(missing_ok=True)
        _unusable(cache, error.strerror or str(error))


def _run_ptxas(text: str, path: str, arch: str, options: list[str]) -> tuple[bytes, str, bool, bool]:
    """cubin, log, relocatable, cached: ptxas on `text`, with `-c` when the module calls external functions."""
    ptxas = find_tool("ptxas")
    key = hashlib.sha256("\0".join([ptxas.path, ptxas.version, arch, *options, text]).encode()).hexdigest()
    cache = cache_dir()
    if cache and (cache / f"{key}.cubin").is_file():
        try:
            meta = json.loads((cache / f"{key}.json").read_text())
            return (cache / f"{key}.cubin").read_bytes(), meta["log"], meta["relocatable"], True
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable or damaged entry: compile again and replace it
    name = Path(path).name if path and not path.startswith("<") else "input.ptx"
    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        source, cubin = Path(tmp) / name, Path(tmp) / "out.cubin"
        source.write_text(text)
        relocatable = False
        while True:
            args = ["-v", "--warn-on-spills", f"-arch={arch}", *options, *(["-c"] * relocatable)]
            done = run_tool(ptxas, [*args, str(source), "-o", str(cubin)])
            log = done.stdout + done.stderr
            if done.returncode == 0 or relocatable or _UNRESOLVED not in log:
                break
            relocatable = True
        if done.returncode != 0:
            diagnostics = _diagnostics(log, path, text, arch)
            if not diagnostics:
                raise EnvironmentProblem(
                    f"ptxas at {ptxas.path} failed (exit {done.returncode}) without saying why: {log.strip()[:200]}"
                )
            raise InputError([d for d in diagnostics if d.severity == "error"] or diagnostics)
        data = cubin.read_bytes()
    if cache:  # the log first: a reader looks for the cubin, then reads the log beside it
        _store(cache, f"{key}.json", json.dumps({"log": log, "relocatable": relocatable}).encode())
        _store(cache, f"{key}.cubin", data)
    return data, log, relocatable, False


def _run_nvjitlink(text: str, path: str, arch: str, options: list[str]) -> tuple[bytes, str]:
    """cubin and log from nvJitLink in this process (always relocatable mode)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError as error:
        raise EnvironmentProblem(
            f"cuda.bindings.nvjitlink unavailable ({error}): pip install 'cuda-bindings>=13,<14'"
        ) from None
    flags = [f"-arch={arch}", "-Xptxas=-v", "-Xptxas=--warn-on-spills", *(f"-Xptxas={o}" for o in options)]
    try:
        handle = nvjitlink.create(len(flags), flags)
    except Exception as error:  # noqa: BLE001 - a missing libnvJitLink shows up here, as several exception types
        if "UNRECOGNIZED_ARCH" in str(error):  # it started, and the target is the user's
            raise InputError.at(path, f"nvJitLink does not know the target {arch}") from None
        raise EnvironmentProblem(
            f"nvJitLink cannot start ({type(error).__name__}: {str(error).splitlines()[0]}); "
            "install it with `pip install 'nvidia-nvjitlink>=13,<14'`, or use --backend ptxas"
        ) from None

    def log_of(size_fn, get_fn) -> str:
        buffer = bytearray(size_fn(handle))
        get_fn(handle, buffer)
        return buffer.decode(errors="replace").rstrip("\0")

    try:
        data = text.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), Path(path).name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = log_of(nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            raise InputError(_diagnostics(log, path, text, arch) or [Diagnostic(Location(path), log.strip())]) from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), log_of(nvjitlink.get_info_log_size, nvjitlink.get_info_log)
    finally:
        nvjitlink.destroy(handle)


def compile_ptx(
    text: str,
    path: str,
    arch: str,
    *,
    backend: str = "ptxas",
    lineinfo: bool = False,
) -> Compiled:
    """Assemble PTX for `arch`; InputError (exit 2) with ptxas's messages at the input's lines if it is rejected."""
    options = ["-lineinfo"] * lineinfo
    if backend == "nvjitlink":
        cubin, log = _run_nvjitlink(text, path, arch, options)
        relocatable, cached = True, False
    else:
        cubin, log, relocatable, cached = _run_ptxas(text, path, arch, options)
    return Compiled(cubin, arch, backend, log, relocatable, cached, parse_verbose(log), parse_warnings(log))


# nvcc's front end: `k.cu(12): error: ...`; the host preprocessor and compiler: `k.cu:12:10: fatal error: ...`
_NVCC_MESSAGE = re.compile(r"^(.*?)(?:\((\d+)\)|:(\d+):\d+): (error|warning|fatal error)\s*: (.*)$")
_SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<")
_HEADER_SOURCES = ("site-packages", "conda", "CUDA_PATH")
_CCCL_HINT = "`pip install 'nvidia-cuda-cccl>=13,<14'` brings the CUDA C++ headers (cuda/std, cub, thrust)"


def _cccl_include(nvcc: Tool) -> list[str]:
    """`-isystem DIR` for the CUDA C++ headers when cuda-pathfinder finds them somewhere nvcc does not look itself
    (nvcc's profile adds its own `include/cccl`, where the nvidia-cuda-cccl wheel puts them beside the nvcc wheel)."""
    if (Path(nvcc.path).resolve().parent.parent / "include" / "cccl").is_dir():
        return []
    try:
        from cuda.pathfinder import locate_nvidia_header_directory

        found = locate_nvidia_header_directory("cccl")
    except Exception:  # noqa: BLE001 - an old or absent cuda-pathfinder: nvcc keeps its own search
        return []
    # wheels, conda or $CUDA_PATH only: headers of a system CUDA of another version would not match this nvcc
    return ["-isystem", found.abs_path] if found and found.found_via in _HEADER_SOURCES else []


def cuda_to_ptx(path: str, arch: str | None, lineinfo: bool = False) -> str:
    """CUDA C++ -> PTX with nvcc (`-arch` when given, else nvcc's default; `.loc` line info with `lineinfo`). The
    file's faults (a syntax error, a
    missing `#include "local.h"`) are InputError at its lines; a missing system header or compiler is the
    environment's (EnvironmentProblem)."""
    nvcc = find_tool("nvcc")
    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        out = Path(tmp) / "out.ptx"
        options = [*_cccl_include(nvcc), *([f"-arch={arch}"] * bool(arch)), *(["-lineinfo"] * lineinfo)]
        args = ["-ptx", *options, path, "-o", str(out)]
        done = run_tool(nvcc, args)
        if done.returncode != 0 and _SEPARATE_COMPILATION in done.stdout + done.stderr:
            done = run_tool(nvcc, ["-rdc=true", *args])  # dynamic parallelism: the PTX calls the device runtime
        if done.returncode == 0:
            return out.read_text()
    log = done.stdout + done.stderr
    lines = Path(path).read_text(errors="replace").splitlines()
    diagnostics = []
    for m in map(_NVCC_MESSAGE.match, log.splitlines()):
        if not m:
            continue
        number = int(m.group(2) or m.group(3))
        text = lines[number - 1] if 0 < number <= len(lines) else ""
        if "No such file or directory" in m.group(5) and _SYSTEM_INCLUDE.match(text):
            raise EnvironmentProblem(f"nvcc could not compile {path}: {path}:{number}: {m.group(5)}; {_CCCL_HINT}")
        severity = "warning" if m.group(4) == "warning" else "error"
        diagnostics.append(Diagnostic(Location(path, number, 0, text), f"nvcc: {m.group(5)}", severity))
    if not any(d.severity == "error" for d in diagnostics):
        raise EnvironmentProblem(
            f"nvcc could not compile {path} (exit {done.returncode}): {log.strip()[:300]}; nvcc needs a host C++ "
            f"compiler (g++), and {_CCCL_HINT}"
        )
    errors = [d for d in diagnostics if d.severity == "error"]
    if not arch:  # nvcc's default target is old (sm_75 in CUDA 13): a source written for a newer GPU fails there
        errors[0] = replace(errors[0], notes=(*errors[0].notes, _DEFAULT_ARCH_NOTE))
    raise InputError(errors)

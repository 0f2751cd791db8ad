"""Finding the NVIDIA tools ptxtool drives, in a fixed order, and saying what to install when one is missing.

Order: the `PTXTOOL_<TOOL>` environment variable, then cuda-pathfinder (pip wheels, conda), then `CUDA_HOME/bin`
(or `CUDA_PATH/bin`), then PATH. A tool that is found but does not answer `--version` counts as broken.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ptxtool.errors import EnvironmentProblem
from ptxtool.syntax.names import TARGET


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What ptxtool knows about one tool: its override variable and the wheel that ships it."""

    env: str
    wheel: str


TOOLS: dict[str, ToolSpec] = {
    "ptxas": ToolSpec("PTXTOOL_PTXAS", "nvidia-cuda-nvcc"),
    "nvdisasm": ToolSpec("PTXTOOL_NVDISASM", "nvidia-cuda-nvdisasm"),
    "cuobjdump": ToolSpec("PTXTOOL_CUOBJDUMP", "nvidia-cuda-cuobjdump"),
    "nvcc": ToolSpec("PTXTOOL_NVCC", "nvidia-cuda-nvcc nvidia-cuda-cccl"),
}

_VERSION = re.compile(r"release (\d+\.\d+), V([\d.]+)")


@dataclass(frozen=True, slots=True)
class Tool:
    """A located, working tool: where it is, how it was found, and its version (`13.5.37`)."""

    name: str
    path: str
    found_by: str
    version: str


def _install_hint(name: str) -> str:
    spec = TOOLS[name]
    return (
        f"install it with `pip install '{spec.wheel.split()[0]}>=13,<14'`"
        + (f" (and `pip install {spec.wheel.split()[1]}` for its headers)" if " " in spec.wheel else "")
        + f", or point {spec.env} at one"
    )


def _pathfinder(name: str) -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        return None
    try:
        return find_nvidia_binary_utility(name)
    except Exception:  # noqa: BLE001 - pathfinder failures mean "not found here"; later steps still apply
        return None


def _cuda_home(name: str) -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    return None


_SEARCH = (("cuda-pathfinder", _pathfinder), ("CUDA_HOME", _cuda_home), ("PATH", shutil.which))


def locate(name: str) -> tuple[str, str]:
    """Where `name` is and which step found it; EnvironmentProblem when no step does."""
    spec = TOOLS[name]
    override = os.environ.get(spec.env)
    if override:
        path = shutil.which(override) or override
        if not Path(path).is_file():
            what = "a directory, not the tool" if Path(path).is_dir() else "no such file"
            raise EnvironmentProblem(f"{spec.env}={override}: {what}; {_install_hint(name)}")
        return path, f"${spec.env}"
    for step, find in _SEARCH:
        found = find(name)
        if found:
            return found, step
    raise EnvironmentProblem(
        f"{name} not found (looked in ${spec.env}, cuda-pathfinder, CUDA_HOME, PATH); " + _install_hint(name)
    )


@cache
def _probe_version(path: str) -> tuple[str | None, str]:
    """The CUDA version a tool prints for --version (None: it printed none), and the name its banner starts with."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    match = _VERSION.search(done.stdout)
    return (match.group(2) if done.returncode == 0 and match else None), done.stdout.lstrip().partition(":")[0]


def find_tool(name: str) -> Tool:
    """The working tool `name`, or EnvironmentProblem naming what to install."""
    path, found_by = locate(name)
    version, banner = _probe_version(path)
    if version is None:
        raise EnvironmentProblem(
            f"{name} at {path} (found by {found_by}) does not work: `{Path(path).name} --version` failed or "
            f"printed no CUDA version; {_install_hint(name)}"
        )
    if banner != name and banner in TOOLS:  # PTXTOOL_PTXAS=/path/to/nvdisasm: it answers, but it is the wrong tool
        raise EnvironmentProblem(f"{name} at {path} (found by {found_by}) is {banner}, not {name}")
    return Tool(name, path, found_by, version)


def run_tool(tool: Tool, args: list[str], *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a tool, turning a crash or a missing executable into EnvironmentProblem (exit code 3)."""
    try:
        return subprocess.run([tool.path, *args], capture_output=True, text=True, timeout=timeout)
    except OSError as error:
        raise EnvironmentProblem(f"cannot run {tool.name} at {tool.path}: {error.strerror or error}") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{tool.name} did not finish within {timeout:.0f} s") from None


_ISA = re.compile(r"current version is '(\d+\.\d+)'")
_ALLOWED = re.compile(r"--gpu-name.*?Allowed values for this option:(.*?)Default value", re.S)


def ptxas_support(ptxas: Tool) -> tuple[str | None, tuple[str, ...]]:
    """The newest PTX ISA version and the `sm_*` targets a ptxas accepts, probed from its own answers."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ptxtool-") as tmp:
        probe = Path(tmp) / "probe.ptx"
        probe.write_text(".version 99.9\n.target sm_75\n.address_size 64\n")
        rejected = run_tool(ptxas, ["-arch=sm_75", str(probe), "-o", str(Path(tmp) / "probe.cubin")])
    isa = _ISA.search(rejected.stdout + rejected.stderr)
    allowed = _ALLOWED.search(run_tool(ptxas, ["--help"]).stdout)
    names = re.findall(r"'(sm_\w+)'", allowed.group(1)) if allowed else []
    return (isa.group(1) if isa else None), tuple(sorted(names, key=_target_order))


def _target_order(target: str) -> tuple[int, str]:
    match = TARGET.fullmatch(target)
    return (int(match.group(1)), match.group(2)) if match else (0, target)


def gpu_driver() -> tuple[bool, str]:
    """Whether a GPU driver answers, and a one-line account: its CUDA version and device count, or why not."""
    try:
        from cuda.bindings import driver
    except Exception as error:  # noqa: BLE001 - any import failure means no usable driver bindings
        return False, f"no driver bindings ({type(error).__name__}: {error})"
    try:
        (status,) = driver.cuInit(0)
        if status != driver.CUresult.CUDA_SUCCESS:
            return False, f"no GPU driver ({status.name})"
        status, version = driver.cuDriverGetVersion()
        status, count = driver.cuDeviceGetCount()
    except Exception as error:  # noqa: BLE001 - the bindings raise RuntimeError when libcuda is absent
        return False, f"no GPU driver ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
    return count > 0, f"CUDA driver {version // 1000}.{version % 1000 // 10}, {count} device{'s' * (count != 1)}"


REQUIRED = ("ptxas", "nvdisasm")  # inspect and optimize cannot work without these; nvcc and cuobjdump are optional


def environment() -> dict:
    """What `ptxtool doctor` reports: every tool (path, version, or the problem), ptxas's range, the driver."""
    tools: dict[str, dict] = {}
    for name in TOOLS:
        try:
            tool = find_tool(name)
        except EnvironmentProblem as problem:
            tools[name] = {"ok": False, "required": name in REQUIRED, "problem": str(problem)}
            try:  # found, but it does not work: say where it is
                tools[name]["path"], tools[name]["found_by"] = locate(name)
            except EnvironmentProblem:
                pass
            continue
        tools[name] = {
            "ok": True,
            "required": name in REQUIRED,
            "path": tool.path,
            "found_by": tool.found_by,
            "version": tool.version,
        }
        if name == "ptxas":
            isa, targets = ptxas_support(tool)
            tools[name] |= {"max_ptx_isa": isa, "targets": list(targets)}
    present, detail = gpu_driver()
    return {"tools": tools, "gpu_driver": {"present": present, "detail": detail}}

"""Shared fixtures: where the corpus and samples are, and the wheel's ptxas to assemble PTX with."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CORPUS = Path(os.environ.get("PTXTOOL_CORPUS", ROOT / "tests" / "corpus"))  # real nvcc/Triton/hand-written PTX


def spec_ptx(directory: Path) -> dict[str, str]:
    """Each launch spec in a directory that names its PTX (`ptx = "..."`, read by the spec loader): stem -> file."""
    from ptxtool.services.launch import load_spec

    specs = ((p.stem, load_spec(str(p)).ptx) for p in sorted(directory.glob("*.toml")))
    return {stem: ptx.name for stem, ptx in specs if ptx is not None}


# Each sample launch spec and the corpus PTX (copied into samples/) that holds its kernel.
SPEC_PTX = spec_ptx(SAMPLES)


def ptx_files(directory: Path) -> list[Path]:
    """Every .ptx file under a directory, sorted (none when the directory is absent)."""
    return sorted(directory.rglob("*.ptx")) if directory.is_dir() else []


def ptx_params(directory: Path) -> list:
    """pytest parameters for every .ptx file under a directory, named by their path inside it."""
    return [pytest.param(p, id=str(p.relative_to(directory))) for p in ptx_files(directory)]


def target_arch(text: str) -> str:
    """The `-arch` to assemble a file for: its first `.target`, raised to sm_75 (the oldest CUDA 13 takes)."""
    match = re.search(r"^\s*\.target\s+(\w+)", text, re.M)
    assert match, "no .target in the PTX"
    number = re.fullmatch(r"sm_(\d+)[af]?", match.group(1))
    return "sm_75" if number and int(number.group(1)) < 75 else match.group(1)


@pytest.fixture(scope="session")
def ptxas() -> str:
    """The ptxas of the nvidia-cuda-nvcc wheel ($PTXAS overrides); never a system CUDA found on PATH."""
    path = os.environ.get("PTXAS")
    if not path:
        from cuda.pathfinder import find_nvidia_binary_utility

        path = find_nvidia_binary_utility("ptxas")
    if not path:
        pytest.skip("no ptxas: install the nvidia-cuda-nvcc wheel or set PTXAS")
    return str(path)


@pytest.fixture(scope="session")
def assemble(ptxas: str, tmp_path_factory) -> Callable[[str], tuple[bytes | None, str]]:
    """Assemble PTX text to a cubin with ptxas: (cubin bytes or None, ptxas's messages).
    Relocatable code (calls to unresolved externals, unified functions) is assembled with -c, as nvcc -rdc would."""
    directory = tmp_path_factory.mktemp("ptxas")
    counter = iter(range(1 << 30))

    def run(text: str) -> tuple[bytes | None, str]:
        n = next(counter)
        source, cubin = directory / f"{n}.ptx", directory / f"{n}.cubin"
        source.write_text(text, encoding="utf-8")
        command = [ptxas, f"-arch={target_arch(text)}", str(source), "-o", str(cubin)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode and ("nresolved extern" in result.stderr or "--compile-only" in result.stderr):
            result = subprocess.run([*command[:1], "-c", *command[1:]], capture_output=True, text=True)
        return (cubin.read_bytes() if result.returncode == 0 else None), result.stderr

    return run


def nc_added(text: str, settings, key: str = "after") -> dict[str, list]:
    """Per kernel, each cache-operators rewrite that made a load `.nc`, as its `key` (the mnemonic after, or `line`)."""
    from ptxtool.passes.cache_operators import cache_operators
    from ptxtool.syntax import parse

    _, report = cache_operators(parse(text), settings)
    out: dict[str, list] = {}
    for r in report.rewrites:
        if ".nc." in r.after and ".nc." not in r.before:
            out.setdefault(r.kernel, []).append(getattr(r, key))
    return out

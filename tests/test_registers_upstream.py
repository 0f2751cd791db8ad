"""benchmarks/registers_upstream.py's recipes on a small git repository made here: project headers inlined once
where included (beside the file, else at the root; system headers kept), only the pinned commit read, named kernels
made extern "C" with their launch bounds and bodies as written; and nvcc accepts what it writes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from ptxtool.errors import EnvironmentProblem
from ptxtool.toolchain.compile import cuda_to_ptx


def _module():
    spec = importlib.util.spec_from_file_location("registers_upstream", ROOT / "benchmarks" / "registers_upstream.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


HELPER = """#pragma once
#include <stdint.h>
__device__ inline uint32_t rotl(uint32_t x, int n) { return x << n | x >> (32 - n); }
"""
TABLES = '#include "cuda_helper.h"\n__constant__ uint32_t table[4] = {1, 2, 3, 4};\n'
KERNEL = """#include <stdio.h>
#include "cuda_helper.h"
#include "../x11/tables.cuh"

__global__ __launch_bounds__(128, 7) /* as written */
static void hash_64(uint32_t threads, uint32_t *g_hash)
{
	uint32_t thread = blockDim.x * blockIdx.x + threadIdx.x;
	for (int r = 0; r < 10; r++)
		if (thread < threads) g_hash[thread] = rotl(g_hash[thread], r) ^ table[r & 3];
}

__host__
void hash_64_cpu(uint32_t threads, uint32_t *d_hash) { hash_64<<<threads / 128, 128>>>(threads, d_hash); }
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def clone(tmp_path):
    repo = tmp_path / "ccminer"
    (repo / "x11").mkdir(parents=True)
    (repo / "x16").mkdir()
    (repo / "cuda_helper.h").write_text(HELPER)
    (repo / "x11" / "tables.cuh").write_text(TABLES)
    (repo / "x16" / "hash.cu").write_text(KERNEL)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pinned")
    commit = _git(repo, "rev-parse", "HEAD")
    (repo / "x16" / "hash.cu").write_text("// the work tree after the commit: never read\n")
    return repo, commit


def test_ccminer_recipe_inlines_each_project_header_once_and_names_the_kernel(clone) -> None:
    upstream = _module()
    repo, commit = clone
    source = upstream.Upstream("t", ("tpruvot/ccminer", commit, "GPL-3.0"), "x16/hash.cu", ("hash_64",), "(128, 7)")
    text = upstream.ccminer(upstream.Clone(repo, commit), source)
    assert text.count("__device__ inline uint32_t rotl") == 1  # cuda_helper.h: by hash.cu and by tables.cuh
    assert text.count("__constant__ uint32_t table[4]") == 1  # ../x11/tables.cuh, resolved beside the file
    assert "#include <stdio.h>" in text and "#include <stdint.h>" in text  # system headers stay
    assert '#include "' not in text
    assert 'extern "C" __global__ __launch_bounds__(128, 7) /* as written */\nvoid hash_64(' in text
    assert "for (int r = 0; r < 10; r++)" in text and "the work tree" not in text


def test_a_kernel_that_is_not_there_is_an_error(clone) -> None:
    upstream = _module()
    repo, commit = clone
    source = upstream.Upstream("t", ("tpruvot/ccminer", commit, "GPL-3.0"), "x16/hash.cu", ("hash_80",), "")
    with pytest.raises(ValueError, match="hash_80"):
        upstream.ccminer(upstream.Clone(repo, commit), source)


def test_what_is_written_compiles_and_keeps_the_authors_bounds(clone, tmp_path) -> None:
    upstream = _module()
    repo, commit = clone
    source = upstream.Upstream("t", ("tpruvot/ccminer", commit, "GPL-3.0"), "x16/hash.cu", ("hash_64",), "(128, 7)")
    path = tmp_path / "t.cu"
    path.write_text(upstream.header(source) + upstream.ccminer(upstream.Clone(repo, commit), source))
    try:
        ptx = cuda_to_ptx(str(path), "sm_90")
    except EnvironmentProblem as problem:  # nvcc needs a host C++ compiler
        pytest.skip(str(problem))
    assert ".entry hash_64(" in ptx and ".maxntid 128, 1, 1" in ptx and ".minnctapersm 7" in ptx


def test_every_upstream_source_has_a_recipe_and_a_launch_spec_per_kernel() -> None:
    upstream = _module()
    spec = importlib.util.spec_from_file_location("registers_benchmark", ROOT / "benchmarks" / "registers.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    specs = benchmark.specs()
    for source in upstream.UPSTREAM:
        assert source.repo in upstream.RECIPES and len(source.commit) == 40
        spilling = [k for k in source.kernels if k != "skein512_gpu_hash_80"]  # the one that does not spill
        assert all(k in specs for k in spilling), source.name

"""The issue's acceptance test: in a repository holding a `.cu` kernel (with cub headers) and a budget, the
pre-commit hooks installed from this repository's committed HEAD (a fresh environment built from ptxtool's own
dependencies: nvcc and the CUDA C++ headers come from NVIDIA's wheels, PATH holds no CUDA) pass, and fail with a
clear message once the kernel exceeds the budget."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_OFFLINE = ("Could not find a version that satisfies", "NewConnectionError", "Temporary failure in name resolution")

KERNEL = """\
#include <cub/block/block_reduce.cuh>

__global__ void __launch_bounds__(128) block_sum(const int *__restrict__ x, int *__restrict__ out) {
    using Reduce = cub::BlockReduce<int, 128>;
    __shared__ typename Reduce::TempStorage scratch;
    int v = Reduce(scratch).Sum(x[blockIdx.x * 128 + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""

CONFIG = """\
repos:
  - repo: {root}
    rev: {rev}
    hooks:
      - id: ptxtool-lint
        args: [--fail-on, warning]
      - id: ptxtool-inspect
        args: [--budget, budget.toml]
"""


def _pre_commit(project: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",  # no system CUDA on PATH
        "HOME": str(home),
        "PRE_COMMIT_HOME": str(home / "pre-commit"),
        "PTXTOOL_CACHE_DIR": str(home / "cache"),
        **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "UV_"))},  # the package index, if one is set
    }
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose", "--color", "never"]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=900)


def test_hooks_pass_on_a_cu_kernel_within_budget_and_fail_beyond_it(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of ptxtool")
    pytest.importorskip("pre_commit")
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "block_sum.cu").write_text(KERNEL)
    (project / "budget.toml").write_text('[kernels."*"]\nmax_registers = 128\nmax_spill_bytes = 0\n')
    (project / ".pre-commit-config.yaml").write_text(CONFIG.format(root=ROOT, rev=rev.strip()))
    subprocess.run(["git", "-C", str(project), "add", "."], check=True)
    done = _pre_commit(project, tmp_path)
    if done.returncode and any(words in done.stdout + done.stderr for words in _OFFLINE):
        pytest.skip("pre-commit could not install the hooks' environment (no package index?)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not checked" not in done.stdout and "nvcc is not available" not in done.stdout
    assert "ptxtool lint" in done.stdout and "ptxtool inspect --budget" in done.stdout

    (project / "budget.toml").write_text('[kernels."*"]\nmax_registers = 4\n')
    done = _pre_commit(project, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "block_sum.cu: budget/max_registers error: kernel _Z9block_sumPKiPi: " in done.stdout
    assert "registers > max_registers = 4 (budget budget.toml" in done.stdout

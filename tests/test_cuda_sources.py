"""`.cu` inputs as the README install leaves them: nvcc and the CUDA C++ headers come from the pip wheels (PATH cut
to the venv and the system's bin directories, so no system CUDA is found), findings point at the `.cu` lines, and a
file that could not be checked is never exit 0 (2: the file's fault, 3: the environment's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent
PATH = f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin"

# cub needs the nvidia-cuda-cccl wheel; the barrier under `if (i < n)` is a PTX002 finding on the .cu line 9
REDUCE = """\
#include <cub/block/block_reduce.cuh>

__global__ void block_sum(const int *x, int *out, int n) {
    using Reduce = cub::BlockReduce<int, 128>;
    __shared__ typename Reduce::TempStorage scratch;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = Reduce(scratch).Sum(i < n ? x[i] : 0);
    if (threadIdx.x < 32) {
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""


def ptxtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": PATH, "HOME": str(cwd), "PTXTOOL_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run(
        [str(VENV_BIN / "ptxtool"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_lint_cu_with_cub_headers_from_the_wheel(tmp_path):
    (tmp_path / "k.cu").write_text(REDUCE)
    done = ptxtool("lint", "--select", "PTX002", "k.cu", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("k.cu:9:") and "PTX002 error: bar.sync reachable by only some threads" in first
    assert "[generated PTX line " in first  # the PTX line, as a note on the .cu finding
    assert "branch on thread-dependent %p" in first and " at line 8 (PTX line " in first  # `if (threadIdx.x < 32)`
    assert "1 finding (1 error) in 1 file" in done.stderr


def test_inspect_cu_with_cub_headers_from_the_wheel(tmp_path):
    (tmp_path / "k.cu").write_text(REDUCE)
    done = ptxtool("inspect", "--json", "k.cu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"name": "_Z9block_sumPKiPii"' in done.stdout


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ('#include "project_header_ptxtool.h"\n__global__ void k() {}\n', 2, "k.cu:1: error: nvcc: "),
        ("__global__ void k(int *p) { *p = undefined_ptxtool; }\n", 2, "k.cu:1: error: nvcc: identifier"),
        ("#include <system_header_ptxtool.h>\n__global__ void k() {}\n", 3, "nvidia-cuda-cccl>=13,<14"),
    ],
    ids=["local-header", "syntax", "system-header"],
)
@pytest.mark.parametrize("command", ["lint", "inspect"])
def test_a_cu_file_that_cannot_be_compiled_is_never_exit_0(command, text, code, message, tmp_path):
    (tmp_path / "k.cu").write_text(text)
    done = ptxtool(command, "k.cu", cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert message in done.stderr

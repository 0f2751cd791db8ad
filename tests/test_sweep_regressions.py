"""What running every command over every file found (benchmarks/sweep.py), each pinned by the smallest input that
shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
PATH = f"{VENV_BIN}:/usr/bin:/bin"

# A source for a newer GPU than nvcc's default target (sm_75 in CUDA 13), as several of tests/corpus/fresh/src are.
NEWER_GPU = """\
__global__ void k(float *x) {
#if __CUDA_ARCH__ < 800
#error this kernel needs sm_80
#endif
    x[threadIdx.x] = 1.0f;
}
"""


def ptxtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": PATH, "HOME": str(cwd), "PTXTOOL_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run(
        [str(VENV_BIN / "ptxtool"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_cu_file_for_a_newer_gpu_says_to_give_arch(tmp_path: Path) -> None:
    """Without --arch nvcc compiles for its default target; the error says so, and --arch makes it compile."""
    (tmp_path / "k.cu").write_text(NEWER_GPU)
    done = ptxtool("inspect", "k.cu", cwd=tmp_path)
    assert done.returncode == 2 and "k.cu:3:" in done.stderr and "this kernel needs sm_80" in done.stderr
    assert "nvcc compiled for its default target (no --arch)" in done.stderr
    assert ptxtool("inspect", "--arch", "sm_80", "k.cu", cwd=tmp_path).returncode == 0


# A kernel that launches a kernel (dynamic parallelism) compiles only as relocatable device code (nvcc -rdc=true).
LAUNCHES_A_KERNEL = """\
__global__ void child(int *p) { p[threadIdx.x] += 1; }
__global__ void parent(int *p) { if (threadIdx.x == 0) child<<<1, 32>>>(p); }
"""


def test_a_cu_file_that_launches_kernels_is_compiled_as_relocatable_code(tmp_path: Path) -> None:
    """nvcc refuses `child<<<...>>>` in a kernel without -rdc=true; ptxtool retries with it, and ptxas assembles
    the PTX's calls into the device runtime as a relocatable object."""
    (tmp_path / "k.cu").write_text(LAUNCHES_A_KERNEL)
    done = ptxtool("inspect", "--json", "k.cu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"name": "_Z6parentPi"' in done.stdout and '"name": "_Z5childPi"' in done.stdout

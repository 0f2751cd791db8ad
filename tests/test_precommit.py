"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit framework (`pre-commit try-repo` against this
repository's committed HEAD) in a temporary git repository.

try-repo builds the hooks' environment afresh on every call (a pip install of ptxtool, ~30 s), so all three hooks
run in one call over one project holding a file for each case; the nvcc-required path of the hook entry is then
checked directly.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "lint"
SAMPLES = ROOT / "samples"
NO_NVCC = {"PTXTOOL_NVCC": "/nonexistent/nvcc"}
# what pip says when it cannot reach a package index (the only reason to skip once pre-commit has started)
_OFFLINE = ("Could not find a version that satisfies", "NewConnectionError", "Temporary failure in name resolution")


def _missing() -> str | None:
    """Why try-repo cannot run here, or None."""
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        return "pre-commit is not installed (pip install -e '.[test]')"
    if shutil.which("git") is None:
        return "git is not installed"
    if not (ROOT / ".git").exists():
        return "not a git checkout: try-repo needs one"
    return None


def _fmt(path: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "ptxtool", "fmt", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def hooks(tmp_path_factory) -> dict[str, str]:
    """Run every hook once with try-repo; the output of each (status line and what it printed) by hook id."""
    if _missing():
        pytest.skip(_missing())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    project = tmp_path_factory.mktemp("project")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "spin.ptx").write_text(_fmt(DATA / "PTX004_fires.ptx"))
    (project / "pressure.ptx").write_text(_fmt(SAMPLES / "pressure.sm80.ptx"))
    (project / "bad.ptx").write_text((DATA / "PTX007_ok.ptx").read_text().replace("\t", "  "))
    (project / "k.cu").write_text("__global__ void k(int *p) { p[threadIdx.x] = 1; }\n")
    (project / "notes.txt").write_text("not PTX\n")
    (project / "budget.toml").write_text('[kernels."*"]\nmax_spill_bytes = 0\n')
    (project / "pyproject.toml").write_text('[tool.ptxtool.inspect]\nbudget = "budget.toml"\n')
    names = ["spin.ptx", "pressure.ptx", "bad.ptx", "k.cu", "notes.txt", "budget.toml", "pyproject.toml"]
    subprocess.run(["git", "-C", str(project), "add", *names], check=True)
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PTXTOOL_CACHE_DIR": str(home / "cache"), **NO_NVCC}
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "--ref", head.strip()]
        + ["--all-files", "--verbose", "--color", "never"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode not in (0, 1) and any(words in done.stdout + done.stderr for words in _OFFLINE):
        pytest.skip("pre-commit could not install the hooks' environment (no package index?)")
    sections = done.stdout.split("- hook id: ")
    out = {}
    for before, section in zip(sections, sections[1:], strict=False):
        hook_id = section.split("\n", 1)[0].strip()
        out[hook_id] = before.rstrip().rsplit("\n", 1)[-1] + "\n" + section
    assert set(out) == {"ptxtool-fmt", "ptxtool-lint", "ptxtool-inspect"}, done.stdout + done.stderr
    return out


def test_fmt_hook_checks_ptx_files_only(hooks: dict[str, str]) -> None:
    fmt = hooks["ptxtool-fmt"]
    assert "Failed" in fmt and "exit code: 1" in fmt
    assert "would reformat bad.ptx" in fmt and "would reformat 1 of 3 files" in fmt


def test_lint_hook_reports_findings_and_fails_on_cuda_without_nvcc(hooks: dict[str, str]) -> None:
    lint = hooks["ptxtool-lint"]
    assert "Failed" in lint and "exit code: 3" in lint  # a file nobody checked is the environment's failure
    assert re.search(r"^spin\.ptx:\d+:\d+: PTX004 warning: loop polls", lint, re.M), lint
    assert re.search(r"^pressure\.ptx:\d+:1: PTX008 warning: ptxas: Registers are spilled", lint, re.M), lint
    assert "k.cu: notice: not checked: nvcc is not available" in lint and "1 not checked" in lint


def test_inspect_hook_applies_the_budget(hooks: dict[str, str]) -> None:
    inspect = hooks["ptxtool-inspect"]
    assert "Failed" in inspect and "exit code: 1" in inspect
    assert "long_live_ranges" in inspect and "max_spill_bytes" in inspect
    assert "notice: 1 CUDA source(s) not checked, nvcc is not available" in inspect


# ---------------------------------------------------------------- the hook entry itself (no pre-commit needed)


def hook(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptxtool.lint.hook", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_hook_entry_requires_nvcc_when_configured(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    assert hook("inspect", "k.cu", cwd=tmp_path, env=NO_NVCC).returncode == 0
    done = hook("inspect", "--require-nvcc", "k.cu", cwd=tmp_path, env=NO_NVCC)
    assert done.returncode == 3 and "need nvcc" in done.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.lint]\nrequire-nvcc = true\n")
    assert hook("inspect", "k.cu", cwd=tmp_path, env=NO_NVCC).returncode == 3


def test_hook_entry_passes_options_and_files_through(tmp_path: Path) -> None:
    shutil.copy(DATA / "PTX007_fires.ptx", tmp_path / "a.ptx")
    done = hook("lint", "--select", "PTX007", "--no-ptxas", "a.ptx", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("a.ptx:9:2: PTX007 warning:")
    assert hook(cwd=tmp_path).returncode == 2

"""A slice of benchmarks/sweep.py in the suite: the quick commands over every sample, in-process. No command may end
in a traceback or exit 4, and fmt's output must assemble and be its own fixed point. The whole sweep (every
command over every file of the tree, a user without a home, PATH cut) is `python benchmarks/sweep.py`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICK = ("parse --check", "parse --json", "fmt", "cfg", "lint --json", "inspect")
FAILED = ("BUG", "TIMEOUT", "REJECTED", "UNSTABLE")
# Bugs the sweep found in code under another owner's hands, each to leave this list in the commit that fixes it.
KNOWN: dict[tuple[str, str], str] = {}  # (command, file) -> why it fails today


def _sweep():
    spec = importlib.util.spec_from_file_location("sweep", ROOT / "benchmarks" / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def records(ptxas: str) -> list[dict]:
    sweep = _sweep()
    return [r for path in sweep.files(["samples"]) for r in sweep.sweep_file(str(path), QUICK, ptxas)]


def test_every_sample_and_quick_command_was_run(records: list[dict]) -> None:
    samples = sorted((ROOT / "samples").glob("*.ptx"))
    assert len(records) == len(samples) * len(QUICK)


def test_no_quick_command_fails_on_a_sample(records: list[dict]) -> None:
    failed = {(r["command"], r["file"]): r for r in records if r["outcome"] in FAILED}
    unexpected = [f"{r['outcome']} {key}: {r['detail'][-400:]}" for key, r in failed.items() if key not in KNOWN]
    assert not unexpected, "\n".join(unexpected)
    fixed = [key for key in KNOWN if key not in failed]
    assert not fixed, f"fixed: take them off KNOWN: {fixed}"


def test_fmt_output_was_assembled(records: list[dict]) -> None:
    """The sweep checked fmt's output with ptxas wherever ptxas takes the input (the check ran, not skipped)."""
    fmt = [r for r in records if r["command"] == "fmt"]
    assert fmt and all(r["ptxas"] in ("ok", "n/a") for r in fmt)
    assert sum(r["ptxas"] == "ok" for r in fmt) >= len(fmt) - 2

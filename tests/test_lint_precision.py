"""Lint precision on real PTX, from the labelled table of benchmarks/lint_precision.py: the rules that need no tool
find exactly the labelled findings over the corpus, samples and test data, each rule at 90 % precision or more.
(The benchmark itself also runs the ptxas rules and checks PTX005's labels against `ptxtool optimize`.)"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "lint_precision", Path(__file__).resolve().parents[1] / "benchmarks" / "lint_precision.py"
)
assert _SPEC is not None and _SPEC.loader is not None
precision = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = precision  # its dataclasses look their module up
_SPEC.loader.exec_module(precision)

RULES = ("PTX001", "PTX002", "PTX003", "PTX004", "PTX005", "PTX006")  # decided from the PTX alone


def test_rules_without_tools_match_their_labels_and_reach_90_percent(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    labels = precision.read_labels()
    found = precision.findings(precision.ROOTS, select=RULES, ptxas=False)
    keys = {(rule, file, line) for rule, file, line, _ in found}
    assert keys == {key for key in labels if key[0] in RULES}, "findings and labels differ: update the table"
    verdicts = Counter((rule, labels[rule, file, line].verdict) for rule, file, line, _ in found)
    for rule in {rule for rule, _ in verdicts}:
        assert verdicts[rule, "tp"] >= 0.9 * (verdicts[rule, "tp"] + verdicts[rule, "fp"]), rule

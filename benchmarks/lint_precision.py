#!/usr/bin/env python3
"""Lint precision on real PTX: every rule over the corpus (tests/corpus: the shared corpus and the fresh files of
other compilers), samples/ and tests/data, each finding looked up in a labelled table, printing per rule the findings,
true and false positives, findings without a label, and the precision.

The table (benchmarks/lint_labels.txt) has one line per finding: rule, `file:line`, `tp` or `fp`, and a one-line
reason. PTX005's labels are also checked against an oracle, `ptxtool optimize` itself: a PTX005 finding is true when
the verified output (ptxas accepts it, the SASS shows LDG...CONSTANT) has `.nc` on that load, with `--noalias KERNEL`
when the finding says it is needed.

Usage: python benchmarks/lint_precision.py [ROOT ...] [--check] [--missing]
  --check    exit 1 when a rule is under 90 %, a finding has no label, a label matches no finding, or the oracle
             disagrees with a label
  --missing  print a label line (reason left to write) for each finding without one
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABELS = Path(__file__).with_name("lint_labels.txt")
ROOTS = ("tests/corpus", "samples", "tests/data")
GOAL = 0.9


@dataclass(frozen=True)
class Label:
    verdict: str  # "tp" or "fp"
    reason: str


def read_labels(path: Path = LABELS) -> dict[tuple[str, str, int], Label]:
    """(rule, file, line) -> label, from lines `RULE FILE:LINE tp|fp REASON` ('#' starts a comment line)."""
    labels = {}
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip() or text.startswith("#"):
            continue
        rule, where, verdict, reason = text.split(maxsplit=3)
        file, _, line = where.rpartition(":")
        if verdict not in ("tp", "fp") or not reason.strip():
            raise SystemExit(f"{path}:{number}: want `RULE FILE:LINE tp|fp REASON`")
        labels[rule, file, int(line)] = Label(verdict, reason)
    return labels


def findings(
    roots: tuple[str, ...], select: tuple[str, ...] = (), ptxas: bool = True
) -> list[tuple[str, str, int, str]]:
    """(rule, file relative to the repository, line, message) for every finding of the selected rules (all: ptxas
    rules included)."""
    from ptxtool.lint import load_settings
    from ptxtool.services.lint import lint_files
    from ptxtool.sources import read_source

    files = sorted({p for r in roots for p in (ROOT / r).rglob("*.ptx")})
    settings = load_settings({}, "precision", select=select, ptxas=ptxas)
    results = lint_files([read_source(str(p)) for p in files], settings)
    return [
        (f.code, str(path.relative_to(ROOT)), f.location.line, f.message)
        for path, result in zip(files, results, strict=True)
        for f in result.findings
    ]


@cache
def _optimized(file: str, noalias: str | None) -> list[str]:
    """The lines `ptxtool optimize` writes for a file (its verified rewrites only)."""
    from ptxtool.passes.cache_operators import Settings
    from ptxtool.services.optimize import optimize
    from ptxtool.sources import read_source

    settings = Settings(noalias=(noalias,) if noalias else ())
    return optimize(read_source(str(ROOT / file)), settings=settings).text.splitlines()


def optimize_adds_nc(file: str, line: int, message: str) -> bool:
    """The oracle for PTX005: the verified output of `ptxtool optimize` (with `--noalias KERNEL` when the finding
    asks for it) has `.nc` on the load at `line`."""
    noalias = re.search(r"--noalias (\S+)`", message)
    return ".nc" in _optimized(file, noalias.group(1) if noalias else None)[line - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="*", default=ROOTS, help="folders (in the repository) to lint")
    parser.add_argument("--check", action="store_true", help="exit 1 on anything the table does not account for")
    parser.add_argument("--missing", action="store_true", help="print label lines for findings without one")
    args = parser.parse_args()
    os.chdir(ROOT)
    labels = read_labels()
    found = findings(tuple(args.roots))
    counts: dict[str, Counter[str]] = {}
    problems = []
    for rule, file, line, message in found:
        label = labels.get((rule, file, line))
        verdict = label.verdict if label else "unlabelled"
        counts.setdefault(rule, Counter())[verdict] += 1
        if label is None:
            problems.append(f"no label: {rule} {file}:{line} {message}")
            if args.missing:
                print(f"{rule} {file}:{line} ?? {message}")
        elif rule == "PTX005" and (label.verdict == "tp") != optimize_adds_nc(file, line, message):
            problems.append(f"optimize disagrees with the label: {rule} {file}:{line} {label.verdict}")
    seen = {(rule, file, line) for rule, file, line, _ in found}
    linted = tuple(f"{r.rstrip('/')}/" for r in args.roots)
    problems += [
        f"label matches no finding: {r} {f}:{n}" for r, f, n in labels if (r, f, n) not in seen and f.startswith(linted)
    ]
    print(f"{'rule':<8} {'findings':>8} {'TP':>4} {'FP':>4} {'unlabelled':>10} {'precision':>9}")
    for rule in sorted(counts):
        c = counts[rule]
        labelled = c["tp"] + c["fp"]
        precision = c["tp"] / labelled if labelled else 1.0
        if precision < GOAL:
            problems.append(f"{rule}: precision {precision:.0%} under {GOAL:.0%}")
        print(f"{rule:<8} {sum(c.values()):>8} {c['tp']:>4} {c['fp']:>4} {c['unlabelled']:>10} {precision:>9.0%}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())

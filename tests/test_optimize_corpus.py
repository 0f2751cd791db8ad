"""The done-test of verified optimization: every file of samples/ and the corpus (nvcc, clang, Triton, hand-written;
each assembled for its own `.target`) that the passes find candidates in is optimized with at least one rewrite
verified and kept, with default settings and with every kernel declared alias-free; and what is written differs
from the input exactly in the kept rewrites (and the lines a pass inserts), byte for byte elsewhere."""

from __future__ import annotations

import difflib
import random
import re
import time
from pathlib import Path

import pytest
from conftest import CORPUS, ROOT, SAMPLES, ptx_files

from ptxtool.passes.cache_operators import Policy, Settings
from ptxtool.services.optimize import optimize
from ptxtool.sources import Source, read_source

pytestmark = pytest.mark.usefixtures("ptxas")

FILES = [pytest.param(p, id=str(p.relative_to(ROOT))) for p in ptx_files(SAMPLES) + ptx_files(CORPUS)]
SETTINGS = {"default": Settings(), "noalias": Settings(noalias=("*",))}
# The oldest target the wheel's ptxas takes; older files are assembled for it (as `ptxtool inspect` does).
OLDEST = "sm_75"


def _arch(path: Path) -> str | None:
    """None (the file's own .target) unless ptxas no longer takes it."""
    text = path.read_text(errors="replace")
    for line in text.splitlines():
        words = line.split()
        if words[:1] == [".target"]:
            target = words[1].rstrip(",")
            digits = "".join(c for c in target.removeprefix("sm_") if c.isdigit())
            return OLDEST if target.startswith("sm_") and digits and int(digits) < 75 else None
    return None


@pytest.mark.parametrize("settings", SETTINGS, ids=list(SETTINGS))
@pytest.mark.parametrize("path", FILES)
def test_candidates_are_verified_and_the_diff_is_the_rewrites(path: Path, settings: str) -> None:
    source = read_source(str(path))
    result = optimize(source, settings=SETTINGS[settings], arch=_arch(path))
    kept = [r for report in result.reports for r in report.rewrites]
    if not kept and not result.dropped:
        assert result.text == source.text and result.exit_code == 0
        pytest.skip("no candidates")
    reasons = [f"{d.location.line}: {d.properties['after']}: {d.notes[0]}" for d in result.dropped]
    assert result.exit_code == 0, result.problems
    assert kept, f"every candidate dropped: {reasons}"
    _assert_diff_is_the_rewrites(source.text, result.text, kept, len(result.insertions))


def _assert_diff_is_the_rewrites(before: str, after: str, kept: list, inserted: int) -> None:
    """Lines removed are exactly the kept rewrites' lines; each comes back with only its opcode changed (and any
    operand the pass appends); the only other lines added are the insertions."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    removed: dict[int, str] = {}
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed.update({n + 1: old[n] for n in range(i1, i2)})
        if tag in ("replace", "insert"):
            added += new[j1:j2]
    assert set(removed) == {r.line for r in kept}
    for r in kept:
        line = removed[r.line]
        assert r.before in line, (r.line, line)
        spliced = line.replace(r.before, r.after, 1)
        appended = re.compile(r",\s*[%\w$]+(?=\s*;)")  # an operand the pass appends before the `;`
        assert any(a == spliced or appended.sub("", a, count=1) == spliced for a in added), (r.line, line)
    assert len(added) == len(removed) + inserted


# The reports with `--l2-evict-first` (the policy's descriptor load is ULDC/UMOV, LDCU on sm_100/sm_120).
EVICT_FIRST = ["samples/comm.sm90.ptx", "tests/corpus/ptx/reduce.sm80.ptx", "tests/corpus/ptx/reduce.sm90.ptx"]
EVICT_FIRST += ["tests/corpus/ptx/elementwise.sm120.ptx", "tests/corpus/triton/row_sum.sm90.ptx"]


@pytest.mark.parametrize("name", EVICT_FIRST)
def test_evict_first_policy_is_verified_and_spliced(name: str) -> None:
    source = read_source(str(ROOT / name))
    settings = Settings(noalias=("*",), l2_evict_first=Policy(True))
    result = optimize(source, settings=settings)
    kept = [r for report in result.reports for r in report.rewrites]
    assert result.exit_code == 0 and kept and not result.dropped, [d.notes for d in result.dropped]
    assert result.insertions and all("createpolicy" in i.text or ".reg .b64" in i.text for i in result.insertions)
    _assert_diff_is_the_rewrites(source.text, result.text, kept, len(result.insertions))


def _relayout(text: str, seed: int) -> str:
    """The same PTX in another layout: indentation, blank and comment lines, trailing comments, guard spacing and
    (for odd seeds) CRLF line endings, chosen by a fixed seed."""
    rng = random.Random(seed)
    out = []
    for line in text.splitlines():
        body = line.strip()
        if rng.random() < 0.2:
            out.append(rng.choice(["", "\t// a comment line", "  /* a block comment */"]))
        if body and not body.startswith("//") and rng.random() < 0.3:
            body += rng.choice(["  // trailing", "\t/* trailing */", " "])
        if body.startswith("@") and rng.random() < 0.5:
            guard, _, rest = body.partition(" ")
            body = guard + rng.choice(["  ", "\t", " \t "]) + rest.lstrip()
        out.append(rng.choice(["\t", "    ", "  \t", ""]) + body if body else body)
    return ("\r\n" if seed % 2 else "\n").join(out) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_any_layout_is_kept_byte_for_byte(seed: int) -> None:
    """Fuzzed layouts of a grid-stride copy with every edit kind (opcode, appended policy operand, inserted lines):
    the same rewrites are kept, and the output differs from the input only in them. Bounded: six small files."""
    path = ROOT / "tests" / "data" / "passes" / "cache_operators" / "grid_copy.input.ptx"
    settings = Settings(noalias=("*",), l2_evict_first=Policy(True))
    baseline = optimize(read_source(str(path)), settings=settings)
    text = _relayout(path.read_text(), seed)
    started = time.monotonic()
    result = optimize(Source("fuzz.ptx", text), settings=settings)
    assert time.monotonic() - started < 60
    kept = [r for report in result.reports for r in report.rewrites]
    assert result.exit_code == 0 and not result.dropped and len(result.insertions) == 2
    assert [r.after for r in kept] == [r.after for report in baseline.reports for r in report.rewrites]
    _assert_diff_is_the_rewrites(text, result.text, kept, len(result.insertions))

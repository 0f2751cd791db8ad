"""Lint precision on real kernel shapes (tests/data/lint/corpus, nvcc 13.5 output): each rule flags the kernels
expected.toml says it must and leaves the others alone, and PTX003/PTX007 agree with ptxas's own answers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ptxtool.lint import load_settings
from ptxtool.services.lint import lint_file
from ptxtool.sources import parse_source, read_source
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.sass import disassemble

CORPUS = Path(__file__).parent / "data" / "lint" / "corpus"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text())
CASES = [(file, rule) for file, rules in EXPECTED.items() for rule in rules]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))


def flagged(file: str, rule: str) -> set[str]:
    """The kernels with a finding of `rule`: the one whose declaration-to-end span holds the finding's line."""
    path = CORPUS / file
    result = lint_file(read_source(str(path)), load_settings({}, "test", select=(rule,)))
    assert not result.errors and not result.notices, (result.errors, result.notices)
    module = parse_source(read_source(str(path)))
    spans = [(f.line, f.body.end_line, f.name) for f in module.functions if f.body is not None]
    return {name for f in result.findings for start, end, name in spans if start <= f.location.line <= end}


@pytest.mark.parametrize(("file", "rule"), CASES, ids=[f"{f}-{r}" for f, r in CASES])
def test_rule_flags_exactly_the_expected_kernels(file: str, rule: str) -> None:
    found = flagged(file, rule)
    assert set(EXPECTED[file][rule]["true"]) <= found
    assert not found & set(EXPECTED[file][rule]["false"])


def _sass(file: str, arch: str) -> dict[str, list[str]]:
    text = (CORPUS / file).read_text()
    return {name: [i.mnemonic for i in code] for name, code in disassemble(compile_ptx(text, file, arch).cubin).items()}


@pytest.mark.parametrize(
    ("file", "kernel"), [("ptx003.sm90a.ptx", "_Z12ws_unboundedPKfPf"), ("ptx003.called.sm90a.ptx", "k")]
)
def test_setmaxnreg_findings_agree_with_the_sass(file: str, kernel: str) -> None:
    """PTX003 says 'ptxas ignores it' exactly where the SASS has no USETMAXREG (a kernel's own, or a callee's)."""
    sass = _sass(file, "sm_90a")
    ignored = {name for name, code in sass.items() if "USETMAXREG" not in code and not name.startswith("shrink")}
    assert ignored == flagged(file, "PTX003") == {kernel}


def test_local_memory_findings_agree_with_the_sass() -> None:
    """PTX007 flags exactly the kernels whose SASS loads or stores local memory."""
    sass = _sass("ptx007.sm80.ptx", "sm_80")
    local = {name for name, code in sass.items() if {"LDL", "STL"} & set(code)}
    assert local == flagged("ptx007.sm80.ptx", "PTX007") == {"_Z14runtime_windowPKfPfPKii"}


def test_ptxas_warning_without_a_function_points_at_the_kernel_declaration() -> None:
    path = CORPUS / "ptx003.sm90a.ptx"
    result = lint_file(read_source(str(path)), load_settings({}, "test", select=("PTX008",)))
    declaration = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "entry _Z12ws_unbounded" in line)
    assert [(f.location.line, "'setmaxnreg' ignored" in f.message) for f in result.findings] == [(declaration, True)]

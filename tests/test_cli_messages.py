"""Messages that said the wrong thing or nothing useful: targets ptxas does not take, PTX newer than --arch, lint
summaries of files ptxas rejects, closed pipes, a FILE left out, spill stores and loads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "lint"
COMM = str(SAMPLES / "comm.sm90.ptx")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin)


def test_unknown_target_lists_what_this_ptxas_takes(ptxas):
    result = run("inspect", "--arch", "sm_99", COMM)
    assert result.exit_code == 2
    assert "give --arch sm_75" not in result.stderr  # the advice for targets ptxas dropped, not for sm_99
    taken = re.search(r"this ptxas assembles for ((?:sm_\w+, )+sm_\w+): give one of them with --arch", result.stderr)
    assert taken, result.stderr
    help_text = subprocess.run([ptxas, "--help"], capture_output=True, text=True).stdout
    assert all(f"'{t}'" in help_text for t in taken.group(1).split(", ")) and "sm_90" in taken.group(1)


def test_ptx_newer_than_arch_is_said_in_words():
    result = run("sass", "--arch", "sm_80", COMM)
    assert result.exit_code == 2
    assert "higher than default SM version assumed" not in result.stderr
    line = next(n for n, text in enumerate(Path(COMM).read_text().splitlines(), 1) if text.startswith(".target"))
    assert (
        f"{COMM}:{line}: error: the module's .target sm_90 is newer than the target assembled for, sm_80: ptxas "
        "does not assemble PTX for an older GPU than it targets (give --arch sm_90 or a newer one, or no --arch)"
    ) in result.stderr


def test_lint_summary_of_a_file_ptxas_rejects_counts_it(tmp_path):
    """Findings of the PTX rules and ptxas's own errors: never "2 findings in 0 files"."""
    rejected = tmp_path / "rejected.ptx"
    text = (DATA / "PTX007_fires.ptx").read_text()
    rejected.write_text(text.replace("\tret;", "\tadd.u32 %r9, %r1, 1;\n\tret;"))
    result = run("lint", "--select", "PTX007,PTX008", str(rejected))
    assert result.exit_code == 2
    assert "Unknown symbol '%r9'" in result.stderr
    assert "2 findings (2 warnings) in 1 file; 1 could not be read, parsed or assembled" in result.stderr


# ---------------------------------------------------------------- closed pipes


def _big_ptx(directory: Path) -> Path:
    """A kernel whose outputs fill a pipe many times over: 20000 instructions, 3000 .local variables (PTX007 each)."""
    declarations = "".join(f"\t.local .b32 v{i};\n" for i in range(3000))
    body = "".join(f"\tadd.u32 %r1, %r1, {i};\n" for i in range(20000))
    path = directory / "big.ptx"
    path.write_text(
        ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry big()\n{\n\t.reg .b32 %r<2>;\n"
        f"{declarations}\tmov.u32 %r1, 0;\n{body}\tret;\n}}\n"
    )
    return path


def _branchy_ptx(directory: Path) -> Path:
    """A kernel of 5000 basic blocks: its CFG (one node and edge each) fills a pipe many times over."""
    body = "".join(f"\t@%p1 bra L{i};\n\tadd.u32 %r1, %r1, {i};\nL{i}:\n" for i in range(5000))
    path = directory / "branchy.ptx"
    path.write_text(
        ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry branchy()\n{\n\t.reg .b32 %r<2>;\n"
        f"\t.reg .pred %p<2>;\n\tmov.u32 %r1, 0;\n\tsetp.eq.u32 %p1, %r1, 0;\n{body}\tret;\n}}\n"
    )
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["fmt", "{big}"],
        ["parse", "--json", "{big}"],
        ["cfg", "{branchy}"],
        ["lint", "--no-ptxas", "--select", "PTX007", "{big}"],
        ["sass", str(ROOT / "tests" / "corpus" / "ptx" / "gemm_smem.sm86.O0.ptx")],
    ],
    ids=["fmt", "parse", "cfg", "lint", "sass"],
)
def test_closed_pipe_is_quiet_exit_141(args, tmp_path):
    """`ptxtool ... | head -1`: the status of a tool SIGPIPE ends (git, cat), nothing on stderr, every command."""
    big, branchy = _big_ptx(tmp_path), _branchy_ptx(tmp_path)
    command = [sys.executable, "-m", "ptxtool.cli", *(a.format(big=big, branchy=branchy) for a in args)]
    script = " ".join(f"'{c}'" for c in command) + ' 2>stderr.txt | head -1 >/dev/null; echo "${PIPESTATUS[0]}"'
    env = {"PATH": "/usr/bin:/bin", "PTXTOOL_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.strip() == "141", (tmp_path / "stderr.txt").read_text()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in stderr and "Broken pipe" not in stderr and "Exception ignored" not in stderr


# ---------------------------------------------------------------- FILE left out, spills


@pytest.mark.parametrize("command", ["parse", "fmt", "inspect", "sass", "cfg", "optimize", "lint"])
def test_file_left_out_says_how_to_read_stdin(command):
    result = run(command, stdin=(SAMPLES / "reduce.sm80.ptx").read_text())
    assert result.exit_code == 2
    assert "Give - to read standard input" in result.stderr or "- to read standard input" in result.stderr
    if command != "lint":
        assert f"`cat k.ptx | ptxtool {command} -`" in result.stderr


def test_budget_messages_show_spill_stores_and_loads_apart(tmp_path):
    """ptxas reports 'N bytes spill stores, M bytes spill loads': never their sum as 'bytes spilled'."""
    budget = tmp_path / "budget.toml"
    budget.write_text("[kernels.long_live_ranges]\nmax_spill_bytes = 0\nlocal_memory = false\n")
    result = run("inspect", "--budget", str(budget), str(SAMPLES / "pressure.sm80.ptx"))
    assert result.exit_code == 1
    assert "bytes spilled" not in result.stderr
    found = re.search(
        r"(\d+) bytes spill stores \+ (\d+) bytes spill loads = (\d+) bytes > max_spill_bytes", result.stderr
    )
    assert found and int(found[1]) + int(found[2]) == int(found[3]) and int(found[1]) != int(found[2])
    assert f"({found[1]} bytes spill stores, {found[2]} bytes spill loads, " in result.stderr

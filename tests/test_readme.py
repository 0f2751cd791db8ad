"""The README tells the truth: its two commands are what CI runs, its tour names real commands and options, its
sample output is what ptxtool prints, and its links lead somewhere."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from ptxtool.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _tour_commands() -> list[list[str]]:
    """`$ ptxtool ...` lines of the README's console blocks, split like a shell would, comments dropped."""
    lines = re.findall(r"^\$ (ptxtool .*)$", README, re.M)
    return [shlex.split(line.split("  #")[0]) for line in lines]


def test_the_two_commands_are_the_ones_ci_runs() -> None:
    commands = re.findall(r"^    \$ (.*)$", README, re.M)
    assert commands == ['python3 -m venv .venv && .venv/bin/pip install ".[test]"', ".venv/bin/pytest -q"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 's/^    \\$ //p' README.md" in ci, ".ci/run must take its commands from README.md"


def test_tour_uses_real_commands_and_options() -> None:
    tour = _tour_commands()
    assert len(tour) >= 15
    for argv in tour:
        name = argv[1]
        assert name in main.commands, f"README uses `ptxtool {name}`, which does not exist"
        options = {opt for p in main.commands[name].params for opt in (*p.opts, *p.secondary_opts)}
        for arg in argv[2:]:
            if arg.startswith("-") and arg != "-":
                assert arg.split("=")[0] in options, f"`ptxtool {name}` has no option {arg}"


def test_tour_sample_output_is_what_ptxtool_prints(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    shown = re.search(r"^\$ ptxtool parse (samples/\S+).*\n(.*)$", README, re.M)
    result = CliRunner().invoke(main, ["parse", shown.group(1)])
    assert result.exit_code == 0
    assert result.output.strip() == shown.group(2).strip()


def test_links_lead_to_files() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / target).is_file(), f"README links to {target}, which does not exist"

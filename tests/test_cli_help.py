"""Every command's --help teaches: it exits 0, gives examples of that command, says its exit codes, and every
option its examples use is one the command really has."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from ptxtool.cli import main

COMMANDS = sorted(main.commands)


def test_every_documented_command_is_here():
    assert {"parse", "fmt", "inspect", "sass", "doctor", "cfg", "lint", "optimize", "run", "bench"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_examples_and_exit_codes(name):
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    examples = re.findall(rf"^\s+(?:\S+=\S+ )?ptxtool {name}\b(.*)$", text.split("Examples:", 1)[-1], re.M)
    assert "Examples:" in text and examples, text
    assert re.search(r"\bExit\b.*\b[0-3]\b", text), f"{name} --help does not give its exit codes"
    known = {o for p in main.commands[name].params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}
    used = {t.split("=")[0] for e in examples for t in e.split() if re.fullmatch(r"--?[a-z][\w-]*(=\S+)?", t)}
    assert used <= known, f"{name} --help examples use unknown options {sorted(used - known)}"


def test_main_help_has_an_example_of_every_command_and_the_exit_codes():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "Exit codes: 0 ok, 1 found something" in result.stdout
    assert {n for n in COMMANDS if f"  ptxtool {n} " not in result.stdout} == set(), "commands without an example"

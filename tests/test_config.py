"""The one settings loader: every section and key of [tool.ptxtool] checked in one place, exit 2 naming the file and
the key; flags over settings over defaults; `-v` says which pyproject.toml was read."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.config import load
from ptxtool.errors import InputError

PTX = str(Path(__file__).resolve().parent.parent / "samples" / "elementwise.sm90.ptx")


@pytest.mark.parametrize(
    ("text", "section", "complaint"),
    [
        ("[tool.ptxtool.inspekt]\narch = 'sm_90'\n", "inspect", "unknown section or key 'inspekt'"),
        ("[tool.ptxtool]\narch = 'sm_90'\n", "lint", "unknown section or key 'arch'"),
        (
            "[tool.ptxtool.inspect]\nblock-size = -4\n",
            "inspect",
            "block-size must be an integer from 1 to 1024; got -4",
        ),
        ("[tool.ptxtool.inspect]\nblock-size = true\n", "inspect", "block-size must be an integer"),
        ("[tool.ptxtool.lint]\nselect = 'PTX001'\n", "lint", "select must be a list of rule ids or names"),
        ("[tool.ptxtool.lint]\nptxas = 'no'\n", "lint", "ptxas must be true or false"),
        ("[tool.ptxtool.lint]\nfail-on = 'never'\n", "lint", "fail-on must be"),
        ("[tool.ptxtool.inspect]\nunknown = 1\n", "inspect", "unknown key 'unknown'"),
        ("[tool.ptxtool.optimize]\nreadonyl = true\n", "optimize", "unknown key 'readonyl'"),
        ("[tool.ptxtool.optimize]\nnoalias = 'k'\n", "optimize", "noalias must be a list of kernel names or globs"),
        ("[tool.ptxtool.optimize]\npasses = 'cache-operators'\n", "optimize", "passes must be a list of pass names"),
        ("[tool.ptxtool.optimize]\nstore_hint = 'wb'\n", "optimize", 'store_hint must be "cs" or "L1::no_allocate"'),
        ("[tool.ptxtool.optimize]\nstores = 'yes'\n", "optimize", "stores must be true, false or a table"),
        ("[tool.ptxtool.optimize]\nstreaming = {enabld = true}\n", "optimize", "streaming must be true, false or"),
        ("[tool.ptxtool.optimize]\nstreaming = {enabled = 1}\n", "optimize", "streaming must be true, false or"),
        ("[tool.ptxtool.optimize]\nl2-evict-first = {exclude = 'k*'}\n", "optimize", "l2-evict-first must be"),
    ],
)
def test_bad_settings_name_file_and_key(tmp_path, text, section, complaint):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(InputError) as error:
        load(section, tmp_path)
    diagnostic = error.value.diagnostics[0]
    assert diagnostic.location.path == str(tmp_path / "pyproject.toml") and complaint in diagnostic.message


def test_good_optimize_settings_pass_in_either_spelling(tmp_path):
    text = (
        "[tool.ptxtool.optimize]\nstore-hint = 'L1::no_allocate'\nl2_evict_first = {enabled = true, include = ['k*']}\n"
    )
    (tmp_path / "pyproject.toml").write_text(text)
    assert set(load("optimize", tmp_path).table) == {"store-hint", "l2_evict_first"}


def test_the_optimize_schema_is_the_pass_settings():
    """config.py spells [tool.ptxtool.optimize]'s keys and store hints; they must be the pass's, and --store-hint's."""
    from ptxtool.cli import optimize_command
    from ptxtool.config import SECTIONS
    from ptxtool.passes.cache_operators import POLICIES, STORE_HINTS

    schema = SECTIONS["optimize"]
    assert {key.replace("-", "_") for key in schema} == {
        "passes",
        "noalias",
        "include",
        "exclude",
        "store_hint",
        *POLICIES,
    }
    hints = ("cs", "L1::no_allocate", "wb", "cg", "L1::evict_first", "L2::evict_first", "")
    assert tuple(h for h in hints if schema["store_hint"].good(h)) == STORE_HINTS
    (choice,) = [p.type.choices for p in optimize_command.params if p.name == "store_hint"]
    assert tuple(choice) == STORE_HINTS


def test_the_nearest_pyproject_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.inspect]\nblock-size = 128\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    table = load("inspect", deep)
    assert table.path == tmp_path / "pyproject.toml" and table.table == {"block-size": 128}
    assert load("lint", deep).table == {}


def test_bad_toml_is_input_error_at_its_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool]\narch = \n")
    with pytest.raises(InputError) as error:
        load("inspect", tmp_path)
    assert error.value.diagnostics[0].location.line == 2


def test_negative_rule_option_is_refused(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.lint.PTX003]\nregister-file = -65536\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["lint", "--no-ptxas", PTX])
    assert result.exit_code == 2 and "register-file must not be negative; got -65536" in result.stderr


def test_flags_over_settings_over_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.inspect]\nblock-size = 64\nbudget = 'ci/b.toml'\n")
    table = load("inspect", tmp_path)
    assert table.pick(128, "block-size") == 128 and table.pick(None, "block-size") == 64
    assert table.pick(None, "backend", "ptxas") == "ptxas"
    assert table.path_value("budget") == str(tmp_path / "ci" / "b.toml")
    assert load("optimize", tmp_path).table == {}  # a section not given is empty, not an error


def test_verbose_names_the_pyproject(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.lint]\nselect = ['PTX005']\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["-v", "lint", "--no-ptxas", PTX])
    assert f"settings: {tmp_path / 'pyproject.toml'}" in result.stderr
    assert {line.split(": ")[1].split()[0] for line in result.stdout.splitlines()} == {"PTX005"}
    quiet = CliRunner().invoke(main, ["lint", "--no-ptxas", PTX])
    assert "settings:" not in quiet.stderr


def test_a_pyproject_this_user_may_not_look_at_is_bad_input(tmp_path, monkeypatch) -> None:
    """A working directory the user cannot search (its pyproject.toml cannot even be stat'ed): exit 2 naming the
    file, not a PermissionError traceback."""
    from ptxtool.config import find_pyproject

    def denied(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", denied)
    with pytest.raises(InputError) as caught:
        find_pyproject(tmp_path)
    assert caught.value.exit_code == 2 and str(tmp_path / "pyproject.toml") in caught.value.diagnostics[0].location.path

"""`[tool.ptxtool]` from the nearest pyproject.toml."""

from __future__ import annotations

import pytest

from ptxtool.config import find_pyproject, tool_config
from ptxtool.errors import InputError


def test_nearest_pyproject_section(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ptxtool]\narch = "sm_90"\n[tool.ptxtool.inspect]\nblock-size = 128\n'
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_pyproject(deep) == tmp_path / "pyproject.toml"
    assert tool_config("inspect", deep) == {"block-size": 128}
    assert tool_config(None, deep)["arch"] == "sm_90"
    assert tool_config("lint", deep) == {}


def test_bad_toml_is_input_error_at_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool]\narch = \n")
    with pytest.raises(InputError) as error:
        tool_config("inspect", tmp_path)
    assert error.value.diagnostics[0].location.line == 2

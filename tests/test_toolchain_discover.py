"""Tool discovery: env overrides first, then cuda-pathfinder; broken and missing tools are exit code 3."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.errors import EXIT_ENVIRONMENT, EnvironmentProblem
from ptxtool.toolchain import discover


def test_wheel_tools_found_by_pathfinder(monkeypatch):
    for spec in discover.TOOLS.values():
        monkeypatch.delenv(spec.env, raising=False)
    for name in ("ptxas", "nvdisasm", "cuobjdump"):
        tool = discover.find_tool(name)
        assert tool.found_by == "cuda-pathfinder"
        assert "site-packages" in tool.path and tool.path.endswith(name)
        assert tool.version.startswith("13.")


def test_env_override_wins(monkeypatch):
    wheel = discover.find_tool("ptxas").path
    monkeypatch.setenv("PTXTOOL_PTXAS", wheel)
    assert discover.find_tool("ptxas").found_by == "$PTXTOOL_PTXAS"


@pytest.mark.parametrize(
    ("override", "says"),
    [("/bin/false", "does not work"), ("/no/such/ptxas", "no such file"), ("/tmp", "a directory, not the tool")],
)
def test_broken_or_absent_override(monkeypatch, override, says):
    monkeypatch.setenv("PTXTOOL_PTXAS", override)
    with pytest.raises(EnvironmentProblem) as error:
        discover.find_tool("ptxas")
    assert says in str(error.value)
    assert "pip install 'nvidia-cuda-nvcc>=13,<14'" in str(error.value)


def test_override_that_is_another_tool(monkeypatch):
    """nvdisasm answers --version with a CUDA version too: its banner says it is not ptxas."""
    monkeypatch.setenv("PTXTOOL_PTXAS", discover.find_tool("nvdisasm").path)
    with pytest.raises(EnvironmentProblem, match=r"\(found by \$PTXTOOL_PTXAS\) is nvdisasm, not ptxas$"):
        discover.find_tool("ptxas")


def test_missing_everywhere(monkeypatch):
    monkeypatch.delenv("PTXTOOL_NVDISASM", raising=False)
    monkeypatch.setattr(discover, "_SEARCH", (("cuda-pathfinder", lambda name: None),))
    with pytest.raises(EnvironmentProblem, match=r"nvdisasm not found .*nvidia-cuda-nvdisasm"):
        discover.find_tool("nvdisasm")


def test_ptxas_support_probed():
    isa, targets = discover.ptxas_support(discover.find_tool("ptxas"))
    major, minor = map(int, isa.split("."))
    assert (major, minor) >= (9, 0)
    assert {"sm_75", "sm_80", "sm_90a", "sm_120"} <= set(targets)
    assert targets.index("sm_80") < targets.index("sm_100")


def test_doctor_json():
    result = CliRunner().invoke(main, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["schema"] == "ptxtool.doctor/1"
    assert found["tools"]["ptxas"]["ok"] and "sm_90a" in found["tools"]["ptxas"]["targets"]
    assert isinstance(found["gpu_driver"]["present"], bool)


def test_doctor_broken_required_tool_exits_3():
    result = CliRunner().invoke(main, ["doctor"], env={"PTXTOOL_NVDISASM": "/bin/false"})
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "nvdisasm   broken (required): nvdisasm at /bin/false" in result.stdout


def test_doctor_missing_required_tool_is_called_missing():
    result = CliRunner().invoke(main, ["doctor"], env={"PTXTOOL_NVDISASM": "/no/such/nvdisasm"})
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "nvdisasm   missing (required)" in result.stdout

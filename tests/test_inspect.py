"""`ptxtool inspect` and `ptxtool sass` end to end, on real PTX with the wheel ptxas and nvdisasm."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS

from ptxtool.cli import main
from ptxtool.toolchain.discover import find_tool

SAMPLES = Path(__file__).parent.parent / "samples"
FILES = ["tensorcore.sm80.ptx", "pressure.sm80.ptx", "hopper.sm90a.ptx", "comm.sm90.lineinfo.ptx"]


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def sample(name: str) -> str:
    return str(SAMPLES / name)


@pytest.fixture(scope="module")
def document() -> dict:
    result = run("inspect", "--json", *map(sample, FILES))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def kernel(document: dict, file: str, name: str) -> dict:
    entry = next(f for f in document["files"] if f["path"].endswith(file))
    return next(k for k in entry["kernels"] if k["name"] == name)


def entry_line(file: str, name: str) -> int:
    lines = (SAMPLES / file).read_text().splitlines()
    return next(i + 1 for i, s in enumerate(lines) if re.search(rf"\.entry {re.escape(name)}\b", s))


def kernel_text(file: str, name: str) -> str:
    text = (SAMPLES / file).read_text()
    start = text.index(f".entry {name}(")
    end = text.find(".entry ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_document_in_input_order_with_schema(document):
    assert document["schema"] == "ptxtool.inspect/1"
    assert [Path(f["path"]).name for f in document["files"]] == FILES
    assert document["tools"]["ptxas"].startswith("13.")
    assert document["violations"] == []


def test_resources_agree_with_cuobjdump(document, tmp_path):
    cubin = tmp_path / "p.cubin"
    subprocess.run([find_tool("ptxas").path, "-arch=sm_80", sample("pressure.sm80.ptx"), "-o", str(cubin)], check=True)
    text = subprocess.run([find_tool("cuobjdump").path, "-res-usage", str(cubin)], capture_output=True, text=True)
    usage = {
        m[0]: (int(m[1]), int(m[2]), int(m[3]))
        for m in re.findall(r"Function (\S+):\n\s+REG:(\d+) STACK:(\d+) SHARED:(\d+)", text.stdout)
    }
    for name, (registers, stack, shared) in usage.items():
        got = kernel(document, "pressure.sm80.ptx", name)["resources"]
        assert (got["registers"], got["stack_frame"], got["shared"]) == (registers, stack, shared)
    spilled = kernel(document, "pressure.sm80.ptx", "long_live_ranges")
    assert spilled["resources"]["spill_bytes"] > 0 and spilled["sass"]["local_memory"]
    assert [w["kind"] for w in spilled["warnings"]] == ["spill"]


def test_occupancy_and_block_size(document):
    ws = kernel(document, "hopper.sm90a.ptx", "ws_tma_scale")
    assert ws["block_size_from"] == "maxntid" and ws["occupancy"]["block_size"] == 384
    assert ws["occupancy"]["limited_by"] == "registers" and ws["occupancy"]["occupancy"] == pytest.approx(12 / 64)
    assert kernel(document, "hopper.sm90a.ptx", "bulk_roundtrip")["block_size_from"] == "default"


def test_sass_and_ptx_facts(document):
    wgmma = kernel(document, "hopper.sm90a.ptx", "wgmma_tile")
    assert any(op.startswith("HGMMA") for op in wgmma["sass"]["tensor_core"])
    assert wgmma["ptx"]["families"]["wgmma"] == len(
        re.findall(r"^\s*wgmma\.", kernel_text("hopper.sm90a.ptx", "wgmma_tile"), re.M)
    )
    assert wgmma["ptx"]["shared_declared"] == 4096 == wgmma["resources"]["shared"]
    mix = kernel(document, "comm.sm90.lineinfo.ptx", "cache_ops_mix")
    written = re.findall(r"^\s*ld\.global\.([\w:.]+)\s", kernel_text("comm.sm90.lineinfo.ptx", "cache_ops_mix"), re.M)
    assert sum(mix["ptx"]["global_loads"].values()) == len(written) >= 5
    assert "lu" in mix["ptx"]["global_loads"] and "LDG.E.LU" in mix["sass"]["global_memory"]
    ring = kernel(document, "comm.sm90.lineinfo.ptx", "ring_dispatch")
    assert ring["sass"]["global_memory"]["LDG.E.NA.LTC256B.128.CONSTANT"] > 0
    assert ring["ptx"]["barriers"]["bar.sync"] >= 1 and ring["sass"]["barriers"]
    mma = kernel(document, "tensorcore.sm80.ptx", "mma_tile")
    assert mma["ptx"]["families"]["mma"] >= 1 and any(op.startswith("HMMA") for op in mma["sass"]["tensor_core"])
    assert [p["type"] for p in mma["ptx"]["params"]] == re.findall(
        r"\.param (\.\w+)", kernel_text("tensorcore.sm80.ptx", "mma_tile").split(")")[0]
    )


def test_table_by_default():
    result = run("inspect", sample("pressure.sm80.ptx"))
    assert result.exit_code == 0
    assert "long_live_ranges" in result.stdout and "352/600" in result.stdout
    assert "Registers are spilled" in result.stderr  # a warning: stderr, beside the table


BUDGET = """
[kernels."*"]
max_registers = 64
max_spill_bytes = 0
local_memory = false

[kernels."nbody_*"]
max_registers = 48

[kernels."*_tile"]
max_registers = 40

[kernels."stencil_25pt"]
max_registers = 100
min_occupancy = 0.75
"""


def test_budget_most_specific_wins(tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text(BUDGET)
    result = run("inspect", "--budget", str(budget), "--json", sample("pressure.sm80.ptx"))
    assert result.exit_code == 1
    found = {(v["kernel"], v["check"]) for v in json.loads(result.stdout)["violations"]}
    assert found == {
        ("long_live_ranges", "max_spill_bytes"),
        ("long_live_ranges", "local_memory"),
        ("nbody_tile", "max_registers"),  # 56 > 48 from "nbody_*", the first glob that matches
        ("stencil_25pt", "min_occupancy"),  # 56 registers pass its own 100 but give 50% < 75%
    }
    line = entry_line("pressure.sm80.ptx", "nbody_tile")
    expected = (
        f"pressure.sm80.ptx:{line}: budget/max_registers error: kernel nbody_tile: 56 registers > max_registers = 48"
    )
    assert expected in result.stderr


def test_bad_budget_is_exit_2(tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text('[kernels."*"]\nmax_regs = 3\n')
    result = run("inspect", "--budget", str(budget), sample("pressure.sm80.ptx"))
    assert result.exit_code == 2 and "unknown limit 'max_regs'" in result.stderr


def test_baseline_regressions(tmp_path):
    baseline = tmp_path / "baseline.json"
    pressure = sample("pressure.sm80.ptx")
    assert run("inspect", "--baseline", str(baseline), pressure).exit_code == 2  # none yet
    assert run("inspect", "--baseline", str(baseline), "--update-baseline", pressure).exit_code == 0
    assert run("inspect", "--baseline", str(baseline), pressure).exit_code == 0
    data = json.loads(baseline.read_text())
    key = f"{Path(pressure).as_posix()}::nbody_tile"
    data["kernels"][key]["registers"] = 40
    data["kernels"][key]["occupancy"] = 0.75
    data["kernels"][key]["spill_bytes"] = 10  # an improvement: not reported
    baseline.write_text(json.dumps(data))
    result = run("inspect", "--baseline", str(baseline), pressure)
    assert result.exit_code == 1
    assert "kernel nbody_tile: registers regressed 40 -> 56" in result.stderr
    assert "kernel nbody_tile: occupancy regressed 75.0% -> 56.2%" in result.stderr
    assert result.stderr.count("regressed") == 2


def test_sarif_locations(tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text('[kernels."nbody_tile"]\nmax_registers = 32\n')
    result = run("inspect", "--sarif", "--budget", str(budget), sample("pressure.sm80.ptx"))
    assert result.exit_code == 1
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    run_ = sarif["runs"][0]
    rules = {r["id"] for r in run_["tool"]["driver"]["rules"]}
    assert all(r["ruleId"] in rules for r in run_["results"])
    errors = [r for r in run_["results"] if r["level"] == "error"]
    assert [e["ruleId"] for e in errors] == ["budget/max_registers"]
    location = errors[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("samples/pressure.sm80.ptx")
    assert location["region"]["startLine"] == entry_line("pressure.sm80.ptx", "nbody_tile")
    spill = next(
        r for r in run_["results"] if r["ruleId"] == "ptxas/spill" and "long_live_ranges" in r["message"]["text"]
    )
    assert spill["locations"][0]["physicalLocation"]["region"]["startLine"] == entry_line(
        "pressure.sm80.ptx", "long_live_ranges"
    )


def test_rejected_input_exit_2_and_others_still_reported(tmp_path):
    bad = tmp_path / "bad.ptx"
    lines = (SAMPLES / "tensorcore.sm80.ptx").read_text().splitlines()
    victim = next(i for i, s in enumerate(lines) if "mov.u32" in s)
    lines[victim] = lines[victim].replace("mov.u32", "mov.u99")
    bad.write_text("\n".join(lines) + "\n")
    result = run("inspect", "--json", str(bad), sample("pressure.sm80.ptx"))
    assert result.exit_code == 2
    assert f"bad.ptx:{victim + 1}: error: ptxas: Unknown modifier '.u99'" in result.stderr
    assert [Path(f["path"]).name for f in json.loads(result.stdout)["files"]] == ["pressure.sm80.ptx"]
    assert "Traceback" not in result.output
    sarif = json.loads(run("inspect", "--sarif", str(bad), sample("pressure.sm80.ptx")).stdout)
    error = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "input/error")
    assert error["locations"][0]["physicalLocation"]["region"]["startLine"] == victim + 1


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PTXTOOL_PTXAS", "/bin/false", "ptxas at /bin/false"),
        ("PTXTOOL_NVDISASM", "/no/such/nvdisasm", "PTXTOOL_NVDISASM=/no/such/nvdisasm: no such file"),
    ],
)
def test_broken_or_missing_tool_exit_3(variable, value, says):
    result = run("inspect", sample("pressure.sm80.ptx"), "--jobs", "1", env={variable: value})
    assert result.exit_code == 3
    assert says in result.stderr and "pip install" in result.stderr and "Traceback" not in result.output


def test_cuda_source_through_nvcc():
    result = run("inspect", "--json", "--arch", "sm_80", str(CORPUS / "src" / "pressure.cu"))
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["files"][0]
    assert {k["name"] for k in entry["kernels"]} == {"stencil_25pt", "nbody_tile", "long_live_ranges"}
    assert entry["lines_are_ptx"] is False and entry["arch"] == "sm_80"
    missing = run("inspect", str(CORPUS / "src" / "pressure.cu"), env={"PTXTOOL_NVCC": "/no/such/nvcc"})
    assert missing.exit_code == 3 and "nvidia-cuda-nvcc" in missing.stderr


def test_usage_errors():
    assert run("inspect", "--json", "--sarif", sample("pressure.sm80.ptx")).exit_code == 2
    assert run("inspect", "--update-baseline", sample("pressure.sm80.ptx")).exit_code == 2


def test_sass_interleaved_with_ptx():
    result = run("sass", sample("comm.sm90.lineinfo.ptx"), "--kernel", "plain_copy")
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[0] == "// ---- plain_copy"
    s2r = next(i for i, s in enumerate(out) if "S2R R0, SR_CTAID.X" in s)
    assert "%ctaid.x" in out[s2r - 1] and out[s2r - 1].lstrip().startswith("//")
    plain = run("sass", sample("comm.sm90.lineinfo.ptx"), "--kernel", "plain_copy", "--plain").stdout
    assert "%ctaid" not in plain and "S2R R0, SR_CTAID.X;" in plain
    missing = run("sass", sample("comm.sm90.lineinfo.ptx"), "--kernel", "nope")
    assert missing.exit_code == 2 and "plain_copy" in missing.stderr


def test_settings_from_pyproject(tmp_path, monkeypatch):
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "budget.toml").write_text('[kernels."*"]\nmax_registers = 50\n')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ptxtool.inspect]\nblock-size = 64\nbudget = "ci/budget.toml"\narch = "sm_86"\n'
    )
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")  # settings are found upwards; their paths are read from the pyproject's folder
    result = run("inspect", "--json", "--jobs", "1", sample("pressure.sm80.ptx"))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["files"][0]["arch"] == "sm_86"
    kernels = document["files"][0]["kernels"]
    assert {k["occupancy"]["block_size"] for k in kernels} == {64}
    over = {k["name"] for k in kernels if k["resources"]["registers"] > 50}
    assert over and {v["kernel"] for v in document["violations"]} == over
    flagged = run("inspect", "--json", "--jobs", "1", "--block-size", "96", sample("pressure.sm80.ptx"))
    blocks = {k["name"]: k["occupancy"]["block_size"] for k in json.loads(flagged.stdout)["files"][0]["kernels"]}
    assert blocks == {"stencil_25pt": 96, "nbody_tile": 96, "long_live_ranges": 96}  # the flag beats .maxntid

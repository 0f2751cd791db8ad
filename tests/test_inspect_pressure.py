"""`ptxtool inspect --pressure`: the estimated curve beside the live registers of the real SASS, checked against
ptxas -v and nvdisasm output read independently here (wheel tools, no system CUDA)."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.pressure import pressure
from ptxtool.cli import main
from ptxtool.report.pictures import pressure_text
from ptxtool.syntax import parse
from ptxtool.toolchain.discover import find_tool

SAMPLES = Path(__file__).parent.parent / "samples"
PRESSURE = SAMPLES / "pressure.sm80.ptx"
# pressure.sm80.ptx (the corpus kernels), and others with calls inlined by ptxas, wgmma/TMA and a big tile
ACROSS = ["pressure.sm80.ptx", "control.sm80.ptx", "hopper.sm90a.ptx", "gemm_smem.sm80.ptx"]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@cache
def document(name: str) -> dict:
    result = run("inspect", "--json", "--pressure", str(SAMPLES / name))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def kernels(name: str) -> dict[str, dict]:
    return {k["name"]: k for k in document(name)["files"][0]["kernels"]}


@cache
def independent(name: str, tmp: str) -> tuple[dict[str, int], dict[str, dict[int, int]]]:
    """ptxas -v register counts and, per function, the most GPRs live at any SASS instruction of each PTX line:
    the wheel's ptxas and nvdisasm run here, their text read with code of this test's own."""
    text = (SAMPLES / name).read_text()
    arch = re.search(r"^\s*\.target\s+(\w+)", text, re.M).group(1)
    cubin = Path(tmp) / f"{name}.cubin"
    done = subprocess.run(
        [find_tool("ptxas").path, f"-arch={arch}", "-lineinfo", "-v", str(SAMPLES / name), "-o", str(cubin)],
        capture_output=True,
        text=True,
        check=True,
    )
    registers, function = {}, None
    for line in (done.stdout + done.stderr).splitlines():
        if entry := re.search(r"Compiling entry function '(\w+)'", line):
            function = entry.group(1)
        elif (used := re.search(r"Used (\d+) registers", line)) and function:
            registers[function] = int(used.group(1))
            function = None
    nvdisasm = find_tool("nvdisasm").path

    def dump(*options: str) -> list[str]:
        return subprocess.run([nvdisasm, *options, str(cubin)], capture_output=True, text=True, check=True).stdout

    ptx_line: dict[tuple[str, str], int] = {}
    function, line = "", 0
    for raw in dump("-c", "-gp").splitlines():
        if raw.startswith(".text."):
            function, line = raw[len(".text.") :].rstrip(":"), 0
        elif "//## File" in raw:
            line = int(raw.rsplit("line", 1)[1])
        elif raw.strip().startswith("/*") and function:
            ptx_line[(function, raw.split("*/")[0].strip(" /*"))] = line
    live: dict[str, dict[int, int]] = {}
    for raw in dump("-c", "-plr", "-lrm", "count").splitlines():
        if raw.startswith(".text."):
            function = raw.split(":")[0][len(".text.") :]
        elif raw.strip().startswith("/*") and "// |" in raw:
            gpr = raw.rsplit("// |", 1)[1].split("|")[0].strip()
            at = ptx_line.get((function, raw.split("*/")[0].strip(" /*")), 0)
            if at and gpr:
                per_line = live.setdefault(function, {})
                per_line[at] = max(per_line.get(at, 0), int(gpr))
    return registers, live


@pytest.mark.parametrize("name", ACROSS)
def test_real_counts_are_nvdisasms_at_existing_ptx_lines(name, tmp_path_factory):
    registers, live = independent(name, str(tmp_path_factory.mktemp("independent")))
    module = parse((SAMPLES / name).read_text())
    instruction_lines = {op.line for f in module.functions if f.body for op in build_cfg(f).linear.ops}
    text_lines = (SAMPLES / name).read_text().splitlines()
    for kernel in kernels(name).values():
        sass = kernel["pressure"]["sass"]
        real = {line: n for line, n in sass["lines"] + sass["inlined"]}
        assert real == live[kernel["name"]], kernel["name"]
        assert sass["registers"] == registers[kernel["name"]] == kernel["resources"]["registers"]
        assert 0 < max(real.values()) <= sass["registers"], kernel["name"]  # ptxas never keeps more live
        own = [line for line, _ in sass["lines"]]
        assert set(own) <= set(range(kernel["line"], max(own) + 1))
        for line in real:  # an instruction's line, or a body's `{` (the prologue ptxas adds)
            assert line in instruction_lines or text_lines[line - 1].strip() == "{", (kernel["name"], line)


def test_corpus_kernels_by_hand():
    # stencil and nbody allocate 56 registers but keep at most 52 and 46 live; long_live_ranges spills: 30 live
    # of 32 while the estimate needs 60 (30 doubles and addresses live across the fma chain ending at line 870)
    found = {name: k["pressure"] for name, k in kernels("pressure.sm80.ptx").items()}
    assert {n: (p["sass"]["registers"], p["sass"]["peak"]["live"]) for n, p in found.items()} == {
        "stencil_25pt": (56, 52),
        "nbody_tile": (56, 46),
        "long_live_ranges": (32, 30),
    }
    peak = found["long_live_ranges"]["estimated"]["peak"]
    assert (peak["line"], peak["units"], len(peak["live"])) == (870, 60, 30)
    live = {r["register"]: r["defined"] for r in peak["live"]}
    assert live["%fd49"] == [870] and live["%fd48"] == [869] and live["%rd4"] == [792]
    assert sum(2 for name in live if name.startswith(("%fd", "%rd"))) == 60  # all 64-bit: 30 x 2 units


def test_text_marks_both_peaks_and_the_registers_live_there():
    result = run("inspect", "--pressure", "--kernel", "long_live_ranges", str(PRESSURE))
    assert result.exit_code == 0, result.output
    picture = result.stdout[result.stdout.index("long_live_ranges: estimated") :].splitlines()
    assert "peak 60 at line 870" in picture[0] and "ptxas live (peak 30 at line" in picture[0]
    rows = [r for r in picture[1:] if re.match(r"\s+\d+(-\d+)? ", r)]
    marked = [r for r in rows if "<- peak" in r]
    assert len(marked) == 1
    first, _, last = marked[0].split()[0].partition("-")
    assert int(first) <= 870 <= int(last or first)
    real_peak = kernels("pressure.sm80.ptx")["long_live_ranges"]["pressure"]["sass"]["peak"]["line"]
    (ptxas_row,) = [r for r in rows if "<- ptxas live peak" in r]
    first, _, last = ptxas_row.split()[0].partition("-")
    assert int(first) <= real_peak <= int(last or first) and "|  30 " in ptxas_row
    notes = " ".join(picture[len(rows) + 1 :])
    assert "live at the estimated peak (line 870, 60 units, 30 registers)" in notes
    assert "%fd49@870" in notes and "%rd4@792" in notes
    assert "nbody_tile: estimated" not in result.stdout  # --kernel draws one


def test_svg_is_valid_and_marks_the_peaks(tmp_path):
    out = tmp_path / "nbody.svg"
    result = run("inspect", "--pressure", "-k", "nbody_tile", "--svg", str(out), str(PRESSURE))
    assert result.exit_code == 0, result.output
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 2
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "peak 48 @ line 291" in texts and "peak 46 @ line" in " ".join(texts)
    assert any("live at the estimated peak (line 291" in t for t in texts)


def test_json_has_pressure_only_when_asked():
    plain = run("inspect", "--json", str(PRESSURE))
    assert plain.exit_code == 0 and all("pressure" not in k for k in json.loads(plain.stdout)["files"][0]["kernels"])
    one = run("inspect", "--json", "--pressure", "-k", "stencil_25pt", str(PRESSURE))
    assert [k["name"] for k in json.loads(one.stdout)["files"][0]["kernels"] if "pressure" in k] == ["stencil_25pt"]
    estimated = kernels("pressure.sm80.ptx")["stencil_25pt"]["pressure"]["estimated"]
    module = parse(PRESSURE.read_text())
    curve = pressure(build_cfg(next(f for f in module.kernels if f.name == "stencil_25pt")))
    assert estimated["lines"] == [list(kv) for kv in sorted(curve.by_line().items())]


def test_options_that_need_pressure_or_one_kernel(tmp_path):
    assert run("inspect", "--svg", str(tmp_path / "x.svg"), str(PRESSURE)).exit_code == 2
    several = run("inspect", "--pressure", "--svg", str(tmp_path / "x.svg"), str(PRESSURE))
    assert several.exit_code == 2 and "choose it with --kernel" in several.stderr
    assert not (tmp_path / "x.svg").exists()
    missing = run("inspect", "--pressure", "-k", "nope", str(PRESSURE))
    assert missing.exit_code == 2 and "there are: stencil_25pt, nbody_tile, long_live_ranges" in missing.stderr


def test_text_puts_each_other_line_in_its_row():
    curve = pressure(build_cfg(next(f for f in parse(PRESSURE.read_text()).kernels if f.name == "stencil_25pt")))
    first = curve.points[0].line
    text = pressure_text(curve, width=10, rows=5, other={first - 1: 7, first + 1: 3}, other_name="x")
    rows = text.splitlines()[1:]
    assert "|   7 ==" in rows[0] and rows[0].endswith("<- x peak")  # line first - 1 joins the first row
    assert all("|   -" in r for r in rows[1:])

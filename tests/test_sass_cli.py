"""`ptxtool sass` as Compiler Explorer and `nvdisasm -g` users expect it: functions in the order the PTX defines
them, C++ names demangled beside their symbols, `--addresses`, and `--source` quoting the lines `.loc` names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main

SAMPLES = Path(__file__).parent.parent / "samples"
LINEINFO = SAMPLES / "comm.sm90.lineinfo.ptx"
HEADER = re.compile(r"^// ---- (\S+)")
ADDRESS = re.compile(r"^    /\*([0-9a-f]{4,})\*/ \S")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def sass(*args: str):
    return CliRunner().invoke(main, ["sass", *args])


def functions(stdout: str) -> list[str]:
    return [m.group(1) for m in map(HEADER.match, stdout.splitlines()) if m]


def test_functions_in_ptx_order_demangled_beside_symbols(ptxas) -> None:
    done = sass(str(SAMPLES / "elementwise.sm90.ptx"))
    assert done.exit_code == 0, done.output
    defined = re.findall(r"^\.visible \.entry (\w+)\(", (SAMPLES / "elementwise.sm90.ptx").read_text(), re.M)
    kernels = [name for name in functions(done.stdout) if name in defined]
    assert kernels == defined and len(defined) == 8
    assert "// ---- _Z5hadd2iPK7__half2S1_PS_ (hadd2(int, __half2 const*, __half2 const*, __half2*))" in done.stdout
    order = functions(sass(str(LINEINFO)).stdout)
    assert order == ["ring_dispatch", "streaming_scale", "cache_ops_mix", "plain_copy"]


def test_addresses_are_the_offsets_nvdisasm_prints(ptxas) -> None:
    done = sass("--addresses", "--plain", "-k", "plain_copy", str(LINEINFO))
    assert done.exit_code == 0, done.output
    offsets = [int(m.group(1), 16) for m in map(ADDRESS.match, done.stdout.splitlines()) if m]
    assert offsets[0] == 0 and offsets == list(range(0, 16 * len(offsets), 16))  # sm_90: 16 bytes an instruction
    assert "/*" not in sass("--plain", "-k", "plain_copy", str(LINEINFO)).stdout


def test_source_lines_from_a_readable_file(ptxas, tmp_path: Path) -> None:
    """The sample's .file 1 names a build machine's comm.cu; point it at a file here, each line saying its number."""
    cu = tmp_path / "src" / "comm.cu"
    cu.parent.mkdir()
    cu.write_text("".join(f"line_{n}();\n" for n in range(1, 200)))
    ptx = tmp_path / "comm.ptx"
    ptx.write_text(re.sub(r'\.file\t1 "[^"]*"', f'.file\t1 "{cu}"', LINEINFO.read_text()))
    done = sass("--source", "-k", "ring_dispatch", str(ptx))
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    quoted = [line for line in lines if line.startswith("// comm.cu:")]
    assert quoted and all(re.fullmatch(r"// comm\.cu:(\d+)  line_\1\(\);", line) for line in quoted)
    # the polling load is inlined from line 15 into line 52: the innermost line is the one shown
    load = next(i for i, line in enumerate(lines) if "ld.acquire.sys.global.s32" in line)
    assert next(line for line in reversed(lines[:load]) if line.startswith("// comm.cu")) == "// comm.cu:15  line_15();"
    assert f"source not shown for {cu}" not in done.stderr
    assert "sm_30_intrinsics.hpp: it cannot be read here" in done.stderr  # files 2 and 3 are still elsewhere


def test_source_unreadable_or_absent_is_said(ptxas, tmp_path: Path) -> None:
    done = sass("--source", "-k", "ring_dispatch", str(LINEINFO))
    assert done.exit_code == 0
    assert "note: source not shown for /build/kkkkkkkkkkkkkkkkkkkkk/src/comm.cu: it cannot be read here" in done.stderr
    assert "// comm.cu:52" in done.stdout  # the line is still named
    plain = sass("--source", str(SAMPLES / "comm.sm90.ptx"))
    assert plain.exit_code == 0 and "no source lines to show: the PTX has no .loc line info" in plain.stderr
    assert "// comm.cu" not in plain.stdout


def test_source_of_a_cu_file(ptxas, tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(
        "__global__ void scale(float *x, float a, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) x[i] *= a;\n"
        "}\n"
    )
    done = sass("--source", "--plain", "k.cu")
    if done.exit_code == 3:
        pytest.skip(done.stderr)
    assert done.exit_code == 0, done.output
    assert "// k.cu:3  if (i < n) x[i] *= a;" in done.stdout
    assert "note:" not in done.stderr

"""`ptxtool optimize` against ptxas and nvdisasm: the SASS variants appear exactly where promised and nowhere else,
a broken promise or output ptxas rejects writes nothing, and the command's modes, flags and config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.passes import cache_operators as pass_module
from ptxtool.passes.cache_operators import Policy, Settings
from ptxtool.services.optimize import optimize
from ptxtool.sources import read_source

DATA = Path(__file__).parent / "data" / "passes" / "cache_operators"
COMM = str(SAMPLES / "comm.sm90.ptx")

pytestmark = pytest.mark.usefixtures("ptxas")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _kernels(result) -> dict:
    return {k.name: k for k in result.kernels}


def test_comm_sass_exactly_where_promised() -> None:
    result = optimize(read_source(COMM))
    assert result.verified and result.changed, result.problems
    k = _kernels(result)
    assert k["plain_copy"].memory_before == {"LDG.E.128": 1, "STG.E.128": 1}
    assert k["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128": 1, "STG.E.EF.128": 1}
    assert k["streaming_scale"].memory_after == {"LDG.E.NA.LTC256B.128": 1, "STG.E.EF.128": 1}
    for name in ("ring_dispatch", "cache_ops_mix"):  # flags, ring reads and the author's operators: untouched
        assert k[name].memory_after == k[name].memory_before
        assert k[name].after.registers == k[name].before.registers
    assert k["ring_dispatch"].memory_after["LDG.E.STRONG.SYS"] == 2
    assert k["ring_dispatch"].memory_after["LDG.E.128"] == 7


def test_line_info_input() -> None:
    """A file with .loc/.file: SASS is still tied to its own PTX lines, and the directives stay in the output."""
    result = optimize(read_source(str(SAMPLES / "comm.sm90.lineinfo.ptx")), settings=Settings(noalias=("*",)))
    assert result.verified, result.problems
    assert _kernels(result)["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128.CONSTANT": 1, "STG.E.EF.128": 1}
    assert ".loc" in result.text and ".file" in result.text


def test_noalias_and_evict_first_verified() -> None:
    result = optimize(read_source(COMM), settings=Settings(noalias=("plain_copy",), l2_evict_first=Policy(True)))
    assert result.verified, result.problems
    assert _kernels(result)["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128.CONSTANT": 1, "STG.E.EF.128": 1}
    assert "createpolicy.fractional.L2::evict_first.b64 %ptxtool_evict_first, 1.0;" in result.text
    assert result.reports[0].inserted == ["plain_copy"]


def test_elementwise_noalias() -> None:
    result = optimize(read_source(str(SAMPLES / "elementwise.sm90.ptx")), settings=Settings(noalias=("*",)))
    assert result.verified, result.problems
    k = _kernels(result)
    assert k["_Z5hadd2iPK7__half2S1_PS_"].memory_after == {"LDG.E.NA.CONSTANT": 2, "STG.E.EF": 1}
    assert k["saxpy"].memory_after == {"LDG.E": 1, "LDG.E.NA.CONSTANT": 1, "STG.E": 1}
    copy = k["_Z8copy_vecIfLi4EEvmPKT_PS0_"]
    assert copy.memory_after == copy.memory_before == {"LDG.E.CONSTANT": 4, "STG.E": 4}


@pytest.mark.parametrize("name", ["gemm_smem.sm80.ptx", "pressure.sm80.ptx"])
def test_nothing_to_do_keeps_the_text(name: str) -> None:
    source = read_source(str(SAMPLES / name))
    result = optimize(source, settings=Settings(noalias=("*",)))
    assert result.verified and not result.changed and result.text == source.text
    assert all(k.memory_after == k.memory_before for k in result.kernels)


def test_a_broken_promise_fails_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(pass_module.SASS_MODIFIER, "L1::no_allocate", "EF")  # a pass that promises the wrong SASS
    result = optimize(read_source(COMM))
    assert not result.verified
    assert any("plain_copy: line 487" in p and "promised SASS .EF.LTC256B" in p for p in result.problems)
    out = tmp_path / "out.ptx"
    cli = run("optimize", COMM, "-o", str(out))
    assert cli.exit_code == 1 and not out.exists()
    assert "verification failed" in cli.stderr and "nothing written" in cli.stderr


def test_output_ptxas_rejects_fails(tmp_path: Path, monkeypatch) -> None:
    """A pass that ignored the file's .version (PTX 7.0 has no .L1::no_allocate) is caught by ptxas."""
    monkeypatch.setattr(pass_module, "_unmet", lambda *_: None)
    target = tmp_path / "old.ptx"
    shutil.copy(DATA / "old_version.input.ptx", target)
    before = target.read_text()
    cli = run("optimize", str(target), "--in-place", "--noalias", "grid_copy")
    assert cli.exit_code == 1 and "ptxas rejects the optimized PTX" in cli.stderr
    assert target.read_text() == before


def test_cli_stdout_file_and_in_place(tmp_path: Path) -> None:
    cli = run("optimize", COMM)
    printed = cli.stdout
    assert cli.exit_code == 0
    assert "ld.global.L1::no_allocate.L2::256B.v4.u32" in cli.stdout and "st.global.cs.v4.u32" in cli.stdout
    assert "comm.sm90.ptx:487: plain_copy: ld.global.v4.u32 -> ld.global.L1::no_allocate.L2::256B.v4.u32" in cli.stderr
    assert "grid-stride loop" in cli.stderr and "LDG.E.NA.LTC256B.128: 0 -> 1" in cli.stderr
    assert "note: plain_copy: loads could be .nc if its pointers never alias (--noalias plain_copy)" in cli.stderr
    out = tmp_path / "o.ptx"
    cli = run("optimize", COMM, "-o", str(out), "--json", "--noalias", "plain_copy")
    data = json.loads(cli.stdout)
    assert cli.exit_code == 0 and data["schema"] == "ptxtool.optimize/1" and data["verified"]
    assert "ld.global.nc.L1::no_allocate.L2::256B.v4.u32" in out.read_text()
    rewrite = next(r for r in data["passes"][0]["rewrites"] if r["line"] == 487)
    assert rewrite["sass"] == ["CONSTANT", "NA", "LTC256B"] and rewrite["reasons"][0].startswith(".nc: read-only")
    copy = tmp_path / "c.ptx"
    shutil.copy(COMM, copy)
    assert run("optimize", str(copy), "-i").exit_code == 0
    assert copy.read_text() == printed


def test_cli_usage_errors() -> None:
    assert run("optimize", COMM, "--json").exit_code == 2
    assert run("optimize", COMM, "-o", "x.ptx", "--in-place").exit_code == 2
    bad = run("optimize", COMM, "--passes", "no-such-pass")
    assert bad.exit_code == 2 and "unknown pass 'no-such-pass'" in bad.stderr
    assert run("optimize", "missing.ptx").exit_code == 2


def test_unsafe_volatile_nc_is_loud() -> None:
    source = str(DATA / "volatile_recv.input.ptx")
    plain = run("optimize", source)
    assert plain.exit_code == 0 and "ld.volatile.global.v4.u32" in plain.stdout and "OUTSIDE" not in plain.stderr
    unsafe = run("optimize", source, "--unsafe-volatile-nc")
    assert unsafe.exit_code == 0 and "ld.global.nc.L1::no_allocate.L2::256B.v4.u32" in unsafe.stdout
    assert "warning:" in unsafe.stderr and "OUTSIDE the PTX memory model" in unsafe.stderr
    assert "ld.volatile.global.u32" in unsafe.stdout  # the flag poll stays volatile


def test_config_table(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(DATA / "grid_copy.input.ptx", tmp_path / "k.ptx")
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.optimize]\nnoalias = ["grid_*"]\nstores = false\n')
    monkeypatch.chdir(tmp_path)
    cli = run("optimize", "k.ptx")
    assert cli.exit_code == 0 and "ld.global.nc.L1::no_allocate" in cli.stdout and ".cs." not in cli.stdout
    assert ".cs." in run("optimize", "k.ptx", "--stores").stdout  # a flag overrides the table
    assert ".nc." not in run("optimize", "k.ptx", "--no-readonly").stdout
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.optimize]\nstreaming = 3\n")
    cli = run("optimize", "k.ptx")
    assert cli.exit_code == 2 and "a policy is true/false" in cli.stderr

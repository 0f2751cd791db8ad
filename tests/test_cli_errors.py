"""Every command as a demanding user meets it: bad paths, bad options and missing tools give an exit code from
docs/cli.md and one clear line on stderr, never an internal error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.errors import EXIT_INPUT

PTX = str(SAMPLES / "reduce.sm80.ptx")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    "args",
    [
        ["fmt", PTX, "-o", "{missing}/out.ptx"],
        ["fmt", PTX, "-o", "{file}/out.ptx"],
        ["cfg", PTX, "-k", "block_sum", "-o", "{missing}/cfg.dot"],
        ["optimize", PTX, "-o", "{missing}/out.ptx"],
        ["inspect", PTX, "--baseline", "{missing}/base.json", "--update-baseline"],
    ],
    ids=["fmt-missing-dir", "fmt-under-a-file", "cfg", "optimize", "inspect-baseline"],
)
def test_unwritable_output_is_bad_input_not_a_bug(args, tmp_path):
    (tmp_path / "file").write_text("x")
    paths = {"missing": str(tmp_path / "no" / "such"), "file": str(tmp_path / "file")}
    result = run(*(a.format(**paths) for a in args))
    assert result.exit_code == EXIT_INPUT, result.output
    assert "internal error" not in result.stderr
    assert "error: cannot write in " in result.stderr


@pytest.mark.parametrize(
    ("pyproject", "command", "message"),
    [
        ("tool = 1\n", "lint", "[tool] must be a table"),
        ("[tool]\nptxtool = 1\n", "fmt", None),  # fmt reads no settings: a broken table is not its business
        ("[tool]\nptxtool = 1\n", "lint", "[tool.ptxtool] must be a table"),
        ("[tool.ptxtool.inspect]\narch = 90\n", "inspect", 'arch must be a target such as "sm_90a"; got 90'),
        ('[tool.ptxtool.inspect]\narch = "sm90"\n', "sass", "arch must be a target such as \"sm_90a\"; got 'sm90'"),
        ('[tool.ptxtool.inspect]\nblock-size = "big"\n', "inspect", "block-size must be an integer from 1 to 1024"),
        ("[tool.ptxtool.inspect]\nblock-size = 5000\n", "inspect", "block-size must be an integer from 1 to 1024"),
        ('[tool.ptxtool.inspect]\nbackend = "cuda"\n', "inspect", 'backend must be "ptxas" or "nvjitlink"'),
        ("[tool.ptxtool.inspect]\nbudget = 3\n", "inspect", "budget must be a path"),
        ("[tool.ptxtool.inspect]\nblock_size = 64\n", "inspect", "unknown key 'block_size'"),
        ('[tool.ptxtool.lint]\narch = "sm80"\n', "lint", "arch must be a GPU target such as \"sm_90a\"; got 'sm80'"),
    ],
)
def test_broken_settings_name_the_pyproject(pyproject, command, message, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(pyproject)
    monkeypatch.chdir(tmp_path)
    result = run(command, PTX)
    if message is None:
        assert result.exit_code == 0, result.stderr
        return
    assert result.exit_code == EXIT_INPUT, result.output
    assert result.stderr.startswith(f"{tmp_path / 'pyproject.toml'}: error: ")
    assert message in result.stderr


def test_messages_keep_their_square_brackets(tmp_path):
    """Brackets in a message are text, not console markup: the budget table and a path must survive."""
    budget = tmp_path / "budget.toml"
    budget.write_text('[kernels."block_*"]\nmax_registers = 1\n')
    result = run("inspect", "--budget", str(budget), PTX)
    assert result.exit_code == 1, result.output
    assert f'max_registers = 1 (budget {budget} [kernels."block_*"])' in result.stderr
    tool = str(tmp_path / "[bin]" / "ptxas")
    result = CliRunner(env={"PTXTOOL_PTXAS": tool}).invoke(main, ["sass", PTX])
    assert result.exit_code == 3
    assert f"PTXTOOL_PTXAS={tool}: no such file" in result.stderr


@pytest.mark.parametrize("entry", ["3", '{"registers": "many"}', '{"occupancy": true}'])
def test_baseline_with_a_bad_entry_is_exit_2(entry, tmp_path):
    baseline = tmp_path / "base.json"
    baseline.write_text(f'{{"schema": "ptxtool.baseline/1", "kernels": {{"reduce.sm80.ptx::block_sum": {entry}}}}}')
    result = run("inspect", "--baseline", str(baseline), PTX)
    assert result.exit_code == EXIT_INPUT, result.output
    assert "'reduce.sm80.ptx::block_sum' must map registers, spill_bytes" in result.stderr


def test_inspect_prints_no_empty_table_when_every_input_fails(tmp_path):
    broken = tmp_path / "broken.ptx"
    broken.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1 2;\n}\n")
    result = run("inspect", str(broken), str(tmp_path / "missing.ptx"))
    assert result.exit_code == EXIT_INPUT
    assert result.stdout == ""
    assert f"{broken}:6:14: error: " in result.stderr and "missing.ptx: error: no such file" in result.stderr


@pytest.mark.parametrize(
    ("command", "code", "message"),
    [
        *(
            (c, EXIT_INPUT, "CUDA C++, not PTX: compile it with `nvcc -ptx`")
            for c in ("parse", "fmt", "cfg", "optimize")
        ),
        ("sass", 3, "PTXTOOL_NVCC=/nonexistent: no such file"),
    ],
)
def test_cuda_source_where_ptx_is_needed_is_one_clear_error(command, code, message):
    """Not a screenful of syntax errors at each `#include`: one line saying what the file is or what is missing."""
    from conftest import CORPUS

    result = CliRunner(env={"PTXTOOL_NVCC": "/nonexistent"}).invoke(main, [command, str(CORPUS / "src" / "reduce.cu")])
    assert result.exit_code == code, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr


def test_optimize_warns_of_kernel_options_that_name_no_kernel(tmp_path):
    out = tmp_path / "out.ptx"
    result = run("optimize", PTX, "--noalias", "blok_sum", "--include", "block_*", "--exclude", "hist*", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"warning: --noalias blok_sum matches no kernel of {PTX} (kernels: block_sum, " in result.stderr
    assert "--include block_*" not in result.stderr and "--exclude hist*" not in result.stderr  # hist*: _Z9histogram


def test_module_without_kernels_says_so(tmp_path):
    """cfg and sass on PTX with no kernel: a sentence about why there is nothing, not a wrong hint or silence."""
    empty = tmp_path / "decl.ptx"
    empty.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .func f()\n{\n\tret;\n}\n")
    result = run("cfg", "-k", "g", str(empty))
    assert result.exit_code == EXIT_INPUT and "no function named 'g' (functions with bodies: f)" in result.stderr
    (tmp_path / "none.ptx").write_text(".version 8.0\n.target sm_80\n.address_size 64\n")
    result = run("cfg", str(tmp_path / "none.ptx"))
    assert (
        result.exit_code == EXIT_INPUT and "none.ptx: error: no kernel or function with a body to draw" in result.stderr
    )
    result = run("sass", str(empty))
    assert result.exit_code == 0 and result.stdout == ""
    assert "no SASS: ptxas keeps kernels (.entry) and the functions they call" in result.stderr
    result = run("sass", "-k", "f", str(empty))
    assert result.exit_code == EXIT_INPUT and "no function 'f' in the SASS; it has none: ptxas keeps" in result.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["fmt", PTX], ["parse", "--json", PTX], ["doctor"]])
def test_full_disk_on_stdout_is_an_environment_problem(args):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ptxtool.cli", *args], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == "error: cannot write: No space left on device"


def test_budget_that_is_not_utf8_names_its_line(tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_bytes(b'[kernels."*"]\n# caf\xe9\nmax_registers = 64\n')
    result = run("inspect", "--budget", str(budget), PTX)
    assert result.exit_code == EXIT_INPUT
    assert result.stderr.strip() == f"{budget}:2: error: not valid TOML: not UTF-8 text"


@pytest.mark.parametrize("command", ["inspect", "lint"])
def test_stdin_beside_files_is_read_in_parallel_runs(command):
    """Worker processes have no stdin: `-` must be read where it is, whatever -j says."""
    text = Path(PTX).read_text()
    result = CliRunner().invoke(main, [command, "-j", "2", "-", PTX, "--json"], input=text)
    assert result.exit_code in (0, 1), result.output
    assert "<stdin>: error" not in result.stderr
    paths = {f["path"] for f in json.loads(result.stdout)["files"]} if command == "inspect" else None
    assert paths is None or paths == {"<stdin>", PTX}


def test_cfg_output_it_cannot_make_is_a_usage_error(tmp_path):
    """Dot text in a file named .png would be a broken image: say how to get one instead."""
    out = tmp_path / "cfg.png"
    result = run("cfg", PTX, "-k", "block_sum", "-o", str(out))
    assert result.exit_code == EXIT_INPUT and "dot -Tpng" in result.stderr and not out.exists()


@pytest.mark.parametrize(
    ("args", "starts"),
    [(["fmt", PTX], "//"), (["cfg", PTX, "-k", "block_sum"], 'digraph "block_sum"'), (["optimize", PTX], "//")],
)
def test_output_dash_is_stdout(args, starts, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args, "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(starts) and not (tmp_path / "-").exists()


def test_ctrl_c_is_exit_130_not_found_something(monkeypatch):
    import ptxtool.syntax

    def interrupted(module):
        raise KeyboardInterrupt

    monkeypatch.setattr(ptxtool.syntax, "format_module", interrupted)
    result = run("fmt", "--check", PTX)
    assert result.exit_code == 130 and result.stderr.strip() == "interrupted"


def test_update_baseline_writes_nothing_when_an_input_failed(tmp_path):
    baseline = tmp_path / "base.json"
    result = run("inspect", PTX, str(tmp_path / "missing.ptx"), "--baseline", str(baseline), "--update-baseline")
    assert result.exit_code == EXIT_INPUT
    assert not baseline.exists() and f"baseline {baseline} not written: 1 input(s) failed" in result.stderr


def test_inspect_json_lists_the_inputs_that_failed(tmp_path):
    broken = tmp_path / "broken.ptx"
    broken.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1 2;\n}\n")
    result = run("inspect", "--json", PTX, str(broken))
    assert result.exit_code == EXIT_INPUT
    document = json.loads(result.stdout)
    assert [f["path"] for f in document["files"]] == [PTX]
    [error] = document["errors"]
    assert (error["path"], error["line"], error["column"]) == (str(broken), 6, 14)


def test_parse_json_lists_the_inputs_that_failed(tmp_path):
    broken = tmp_path / "broken.ptx"
    broken.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1 2;\n}\n")
    result = run("parse", "--json", PTX, str(broken))
    assert result.exit_code == EXIT_INPUT
    document = json.loads(result.stdout)
    assert [f["path"] for f in document["files"]] == [PTX]
    assert [(e["path"], e["line"], e["column"]) for e in document["errors"]] == [(str(broken), 6, 14)]


def test_optimize_config_keys_may_be_spelled_like_the_flags(tmp_path, monkeypatch):
    from ptxtool.services.optimize import settings_from_config

    _, settings = settings_from_config({"store-hint": "L1::no_allocate", "l2-evict-first": True}, "pyproject.toml")
    assert settings.store_hint == "L1::no_allocate" and settings.l2_evict_first.enabled
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.optimize]\nstore-hint = "sometimes"\n')
    monkeypatch.chdir(tmp_path)
    result = run("optimize", PTX)
    assert result.exit_code == EXIT_INPUT and 'store-hint must be "cs" or "L1::no_allocate"' in result.stderr


def test_nvjitlink_with_a_target_it_does_not_know_is_bad_input():
    """nvJitLink started fine: the target is the user's mistake, not a missing install (exit 3)."""
    pytest.importorskip("cuda.bindings.nvjitlink")
    result = run("inspect", "--backend", "nvjitlink", "--arch", "sm_999", PTX)
    assert result.exit_code == EXIT_INPUT, result.output
    assert result.stderr.strip() == f"{PTX}: error: nvJitLink does not know the target sm_999"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git apply")
def test_fmt_diff_of_a_file_without_final_newline_applies(tmp_path):
    """The diff is a patch: `git apply` of it gives the formatted file, final newline included."""
    name = "k.ptx"
    (tmp_path / name).write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}")
    result = subprocess.run(
        [sys.executable, "-m", "ptxtool.cli", "fmt", "--diff", name], cwd=tmp_path, capture_output=True, text=True
    )
    assert "\\ No newline at end of file\n" in result.stdout
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=result.stdout, text=True, check=True)
    assert run("fmt", "--check", str(tmp_path / name)).exit_code == 0


@pytest.mark.parametrize("command", ["inspect", "lint"])
def test_sarif_uris_are_percent_encoded(command, tmp_path, monkeypatch):
    """SARIF's artifactLocation.uri is a URI: a space or a non-ASCII letter in a file name is %-encoded."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my kernel ü.ptx").write_text(Path(PTX).read_text())
    (tmp_path / "b.toml").write_text('[kernels."*"]\nmax_registers = 1\n')
    extra = ["--budget", "b.toml"] if command == "inspect" else []
    result = run(command, "--sarif", *extra, "my kernel ü.ptx")
    results = json.loads(result.stdout)["runs"][0]["results"]
    uris = {place["physicalLocation"]["artifactLocation"]["uri"] for r in results for place in r["locations"]}
    assert uris == {"my%20kernel%20%C3%BC.ptx"}


@pytest.mark.parametrize(
    ("args", "schema"),
    [
        (["parse", "--json", PTX], "ptxtool.ast/2"),
        (["inspect", "--json", PTX], "ptxtool.inspect/1"),
        (["lint", "--json", PTX], "ptxtool.lint/1"),
        (["optimize", "--json", PTX, "-o", "{tmp}/out.ptx"], "ptxtool.optimize/2"),
        (["doctor", "--json"], "ptxtool.doctor/1"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_every_json_document_names_its_schema(args, schema, tmp_path):
    result = run(*(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["schema"] == schema


@pytest.mark.parametrize("command", ["inspect", "sass", "lint", "optimize"])
def test_arch_typo_is_a_usage_error_before_any_work(command, tmp_path):
    """Not 'nvcc is not available' (lint) or 'nvcc could not compile ... exit 3' (inspect) for a .cu file."""
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float *x) { x[threadIdx.x] = 1.0f; }\n")
    result = run(command, "--arch", "sm80", str(source))
    assert result.exit_code == EXIT_INPUT
    assert "Invalid value for '--arch': 'sm80' is not a GPU target: expected sm_XY" in result.stderr


def test_lint_says_why_nvcc_could_not_compile_a_cu_file(tmp_path):
    """nvcc is there but the compile fails for want of a system header: the notice says so, not 'nvcc is not
    available', and the exit code is the environment's (3), never 0 for a file nobody checked."""
    source = tmp_path / "k.cu"
    source.write_text("#include <no_such_header_ptxtool.h>\n__global__ void k(float *x) { x[threadIdx.x] = 1; }\n")
    result = run("lint", str(source))
    assert result.exit_code == 3 and "0 findings in 0 files; 1 not checked" in result.stderr
    assert f"notice: not checked: nvcc could not compile {source}: {source}:1: no_such_header" in result.stderr
    assert "nvidia-cuda-cccl>=13,<14" in result.stderr and "nvcc is not available" not in result.stderr


def test_an_endless_input_is_refused_without_reading_it_all() -> None:
    result = CliRunner().invoke(main, ["parse", "/dev/zero"])
    assert result.exit_code == 2
    assert "/dev/zero: error: larger than 512 MiB" in result.stderr

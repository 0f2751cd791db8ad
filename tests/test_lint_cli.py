"""`ptxtool lint` end to end: output lines and exit codes, --select/--ignore, [tool.ptxtool.lint], inline
suppressions (kept by `ptxtool fmt`), --explain, --json, --sarif, and the tools it may lack (ptxas, nvcc)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main

DATA = Path(__file__).parent / "data" / "lint"
SAMPLES = Path(__file__).parent.parent / "samples"
LINE = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<id>PTX\d{3}) (?P<sev>error|warning|note): \S.*$"
)


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(autouse=True)
def _no_project_config(tmp_path, monkeypatch):
    """Run from an empty directory so that this repository's pyproject.toml is not the config."""
    monkeypatch.chdir(tmp_path)


def lint(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["lint", *args], env=env)


def ids(result) -> list[tuple[int, str]]:
    return [(int(m["line"]), m["id"]) for m in map(LINE.match, result.stdout.splitlines()) if m]


def data(name: str) -> str:
    return str(DATA / name)


def test_findings_are_lines_on_stdout_and_exit_1() -> None:
    result = lint("--no-ptxas", data("PTX002_fires.ptx"))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines and all(LINE.match(line) for line in lines)
    assert ids(result) == [
        (18, "PTX002"),
        (22, "PTX002"),
        (23, "PTX002"),
        (26, "PTX002"),
        (44, "PTX002"),
        (61, "PTX002"),
    ]
    assert "6 findings (6 errors) in 1 file" in result.stderr


def test_clean_files_exit_0() -> None:
    result = lint(*(data(f"PTX00{n}_ok.ptx") for n in range(1, 8)))
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "0 findings in 7 files" in result.stderr


def test_bad_input_exits_2_and_still_reports_the_other_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ptx"
    broken.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.entry k() { add.u32 %r1 %r2; }\n")
    result = lint("--no-ptxas", str(broken), data("PTX007_fires.ptx"), str(tmp_path / "missing.ptx"))
    assert result.exit_code == 2
    assert [i for _, i in ids(result)] == ["PTX007", "PTX007"]
    assert "broken.ptx:4:" in result.stderr and "missing.ptx: error: no such file" in result.stderr


def test_select_and_ignore() -> None:
    both = [data("PTX002_fires.ptx"), data("PTX007_fires.ptx")]
    assert {i for _, i in ids(lint("--no-ptxas", "--select", "PTX007", *both))} == {"PTX007"}
    assert {i for _, i in ids(lint("--no-ptxas", "--select", "divergent-barrier", *both))} == {"PTX002"}
    assert {i for _, i in ids(lint("--no-ptxas", "--ignore", "PTX002,PTX007", *both))} == set()
    assert lint("--no-ptxas", "--ignore", "PTX002,PTX007", *both).exit_code == 0
    unknown = lint("--select", "PTX999", *both)
    assert unknown.exit_code == 2 and "unknown lint rule 'PTX999'" in unknown.stderr


def test_pyproject_settings(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ptxtool.lint]\nignore = ["PTX004"]\nptxas = false\n'
        "[tool.ptxtool.lint.setmaxnreg-config]\nregister-file = 131072\n"
        '[tool.ptxtool.lint.PTX007]\nseverity = "error"\n'
    )
    files = [data("PTX003_fires.ptx"), data("PTX004_fires.ptx"), data("PTX007_fires.ptx")]
    result = lint(*files)
    found = ids(result)
    assert (25, "PTX003") not in found and (9, "PTX003") in found  # the budget doubled; the counts still wrong
    assert not any(i == "PTX004" for _, i in found)
    assert "PTX007 error:" in result.stdout and "ptxas" not in result.stderr
    assert {i for _, i in ids(lint("--ignore", "PTX003", *files))} == {"PTX004", "PTX007"}  # flags win


@pytest.mark.parametrize(
    "table, complaint",
    [
        ("[tool.ptxtool.lint.PTX003]\nregister-file = '64k'\n", "bad option 'register-file'"),
        ("[tool.ptxtool.lint]\nselct = ['PTX001']\n", "unknown setting or rule 'selct'"),
        ("[tool.ptxtool.lint.PTX007]\nseverity = 'fatal'\n", "severity must be one of"),
    ],
)
def test_bad_settings_exit_2(tmp_path: Path, table: str, complaint: str) -> None:
    (tmp_path / "pyproject.toml").write_text(table)
    result = lint(data("PTX007_fires.ptx"))
    assert result.exit_code == 2 and complaint in result.stderr


def test_inline_suppressions_survive_fmt(tmp_path: Path) -> None:
    lines = (DATA / "PTX002_fires.ptx").read_text().splitlines()
    lines[17] = lines[17].replace("// expect PTX002", "// ptxtool: ignore[PTX002]")  # line 18
    lines[21] = lines[21].replace("// expect PTX002", "// ptxtool: ignore[PTX007, PTX002]")  # line 22
    path = tmp_path / "k.ptx"
    path.write_text("\n".join(lines) + "\n")
    assert ids(lint("--no-ptxas", str(path))) == [(23, "PTX002"), (26, "PTX002"), (44, "PTX002"), (61, "PTX002")]
    assert CliRunner().invoke(main, ["fmt", "--in-place", str(path)]).exit_code == 0
    text = path.read_text()
    assert text != "\n".join(lines) + "\n"  # the formatter did change the layout
    kept = ids(lint("--no-ptxas", str(path)))
    assert len(kept) == 4 and all(i == "PTX002" for _, i in kept)
    path.write_text("// ptxtool: ignore-file[PTX002]\n" + text)
    result = lint("--no-ptxas", str(path))
    assert result.exit_code == 0 and result.stdout == ""


def test_explain_and_list() -> None:
    result = lint("--explain", "PTX002")
    assert result.exit_code == 0
    assert result.stdout.startswith("PTX002 divergent-barrier (error)") and "bar.sync 1, 128" in result.stdout
    assert "register-file = 65536" in lint("--explain", "setmaxnreg-config").stdout
    assert lint("--explain", "PTX999").exit_code == 2
    listed = lint("--list-rules").stdout.splitlines()
    assert [line.split()[0] for line in listed] == [f"PTX00{n}" for n in range(1, 9)]
    assert lint().exit_code == 2
    with_file = lint("--explain", "PTX002", data("PTX006_fires.ptx"))  # would explain and lint nothing
    assert with_file.exit_code == 2 and "take no FILE" in with_file.stderr


def test_json_document() -> None:
    result = lint("--json", "--no-ptxas", data("PTX006_fires.ptx"), data("PTX006_ok.ptx"))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["schema"] == "ptxtool.lint/1"
    assert [(f["line"], f["rule"], f["severity"]) for f in document["findings"]] == [
        (19, "PTX006", "error"),
        (21, "PTX006", "error"),
    ]
    assert document["rules"]["PTX006"]["name"] == "nc-load-of-written-memory"


def test_sarif_document(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ptx"
    broken.write_text("not ptx\n")
    result = lint("--sarif", "--no-ptxas", data("PTX005_fires.ptx"), data("PTX004_fires.ptx"), str(broken))
    assert result.exit_code == 2
    run = json.loads(result.stdout)["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(rules) >= {f"PTX00{n}" for n in range(1, 9)}
    assert "nanosleep" in rules["PTX004"]["help"]["text"] and "help" not in rules["input/error"]
    got = [
        (r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in run["results"]
    ]
    assert got == [  # file by file, as the annotations and the text
        ("PTX005", "note", 23),
        ("PTX004", "warning", 17),
        ("PTX004", "warning", 21),
        ("input/error", "error", 1),
    ]
    assert lint("--sarif", "--json", data("PTX005_fires.ptx")).exit_code == 2


def test_missing_ptxas_is_a_notice_not_a_failure() -> None:
    result = lint(data("PTX007_ok.ptx"), env={"PTXTOOL_PTXAS": "/nonexistent/ptxas"})
    assert result.exit_code == 0
    assert "notice: ptxas rules skipped: PTXTOOL_PTXAS=/nonexistent/ptxas: no such file" in result.stderr
    assert "notice" not in lint("--no-ptxas", data("PTX007_ok.ptx")).stderr


def test_ptxas_warnings_are_findings() -> None:
    result = lint("--select", "PTX008", str(SAMPLES / "pressure.sm80.ptx"))
    assert result.exit_code == 1
    assert (767, "PTX008") in ids(result) and "spilled" in result.stdout


def test_ptxas_rejection_unexplained_by_findings_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "k.ptx"
    path.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.entry k() { mov.u32 %r1, 1; ret; }\n")
    result = lint(str(path))
    assert result.exit_code == 2 and "ptxas" in result.stderr and "%r1" in result.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="nvcc needs a host C++ compiler")
def test_cuda_sources(tmp_path: Path) -> None:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("nvcc")
    except EnvironmentProblem:
        pytest.skip("no nvcc")
    header = tmp_path / "local.cuh"
    header.write_text(
        "__global__ void pick(int *out, int i) {\n  int a[8];\n"
        "  for (int k = 0; k < 8; ++k) a[k] = k * threadIdx.x;\n  *out = a[i & 7];\n}\n"
    )
    result = lint("--no-ptxas", str(header))
    assert result.exit_code == 1
    assert ids(result) == [(1, "PTX007"), (3, "PTX007")]  # the kernel's line, the loop that fills the array
    assert all(line.startswith(f"{header}:") for line in result.stdout.splitlines()), result.stdout
    assert "[generated PTX line" in result.stdout and "st.local" in result.stdout


def test_cuda_sources_without_nvcc(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    env = {"PTXTOOL_NVCC": "/nonexistent/nvcc"}
    result = lint(str(source), env=env)
    assert result.exit_code == 3 and "notice: not checked: nvcc is not available" in result.stderr
    assert "1 not checked" in result.stderr
    assert lint("--require-nvcc", str(source), env=env).exit_code == 3
    (tmp_path / "k2.cu").write_text(source.read_text())
    both = lint("--require-nvcc", "-j", "2", str(source), str(tmp_path / "k2.cu"), env=env)
    assert both.exit_code == 3 and "PTXTOOL_NVCC=/nonexistent/nvcc: no such file" in both.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.lint]\nrequire-nvcc = true\n")
    assert lint(str(source), env=env).exit_code == 3


def test_target_this_ptxas_cannot_assemble_is_a_notice(tmp_path: Path) -> None:
    old = tmp_path / "old.ptx"
    text = (DATA / "PTX007_fires.ptx").read_text()
    old.write_text(text.replace(".target sm_80", ".target sm_52").replace(".version 8.0", ".version 7.0"))
    result = lint(str(old))
    assert result.exit_code == 1 and [i for _, i in ids(result)] == ["PTX007", "PTX007"]
    assert "notice: this ptxas cannot assemble for sm_52; ptxas rules skipped" in result.stderr
    result = lint("--arch", "sm_999", str(DATA / "PTX007_fires.ptx"))  # the target asked for, not the module's
    assert "notice: this ptxas cannot assemble for sm_999; ptxas rules skipped" in result.stderr


def test_parallel_results_keep_input_order() -> None:
    files = [data(f"PTX00{n}_fires.ptx") for n in (7, 2, 4, 6)]
    serial = lint("--no-ptxas", "-j", "1", *files)
    parallel = lint("--no-ptxas", "-j", "3", *files)
    assert serial.exit_code == parallel.exit_code == 1
    assert parallel.stdout == serial.stdout and serial.stdout.index("PTX007") < serial.stdout.index("PTX002")


@pytest.mark.skipif(shutil.which("g++") is None, reason="nvcc needs a host C++ compiler")
def test_cuda_source_suppressions(tmp_path: Path) -> None:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("nvcc")
    except EnvironmentProblem:
        pytest.skip("no nvcc")
    source = tmp_path / "k.cu"
    lines = [
        "__global__ void pick(int *out, int i) {",
        "  int a[8];",
        "  for (int k = 0; k < 8; ++k) a[k] = k * i;",
        "  *out = a[threadIdx.x & 7];",
        "}",
    ]
    source.write_text("\n".join(lines) + "\n")
    assert ids(lint("--no-ptxas", str(source))) == [(1, "PTX007"), (3, "PTX007")]
    lines[2] += "  // ptxtool: ignore[PTX007]"
    source.write_text("\n".join(lines) + "\n")
    assert ids(lint("--no-ptxas", str(source))) == [(1, "PTX007")]
    source.write_text("// ptxtool: ignore-file[PTX007]\n" + source.read_text())
    result = lint("--no-ptxas", str(source))
    assert result.exit_code == 0 and result.stdout == ""


@pytest.mark.skipif(shutil.which("g++") is None, reason="nvcc needs a host C++ compiler")
def test_cuda_header_errors_point_into_the_header(tmp_path: Path) -> None:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("nvcc")
    except EnvironmentProblem:
        pytest.skip("no nvcc")
    header = tmp_path / "bad.cuh"
    header.write_text("__global__ void k(int *p) {\n  p[0] = undefined_thing;\n}\n")
    result = lint(str(header))
    assert result.exit_code == 2
    assert f'{header}:2: error: nvcc: identifier "undefined_thing" is undefined' in result.stderr


def test_fail_on_sets_the_least_failing_severity(tmp_path: Path) -> None:
    notes_only = data("PTX005_fires.ptx")
    assert lint("--no-ptxas", notes_only).exit_code == 1
    relaxed = lint("--no-ptxas", "--fail-on", "warning", notes_only)
    assert relaxed.exit_code == 0 and "PTX005 note:" in relaxed.stdout  # still reported
    assert lint("--no-ptxas", "--fail-on", "warning", data("PTX007_fires.ptx")).exit_code == 1
    assert lint("--no-ptxas", "--fail-on", "error", data("PTX007_fires.ptx")).exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.lint]\nfail-on = "error"\n')
    assert lint("--no-ptxas", data("PTX007_fires.ptx")).exit_code == 0
    assert lint("--no-ptxas", data("PTX002_fires.ptx")).exit_code == 1
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.lint]\nfail-on = "never"\n')
    assert lint("--no-ptxas", data("PTX002_fires.ptx")).exit_code == 2


def test_the_settings_example_in_the_docs_is_accepted(tmp_path: Path) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "lint.md").read_text()
    example = next(block for block in re.findall(r"```toml\n(.*?)```", docs, re.S) if "[tool.ptxtool.lint]" in block)
    (tmp_path / "pyproject.toml").write_text(example)
    result = lint(data("PTX007_fires.ptx"))
    assert result.exit_code == 1, result.stderr
    assert [i for _, i in ids(result)] == ["PTX007", "PTX007"]


def test_output_format_json_and_sarif_are_the_flags() -> None:
    files = ("--no-ptxas", data("PTX006_fires.ptx"), data("PTX004_fires.ptx"))
    assert lint("--output-format", "json", *files).stdout == lint("--json", *files).stdout
    assert lint("--output-format", "sarif", *files).stdout == lint("--sarif", *files).stdout
    assert lint("--output-format", "json", "--json", *files).exit_code == 1  # the same format twice is one
    clash = lint("--output-format", "github", "--sarif", *files)
    assert clash.exit_code == 2 and "choose one output format" in clash.stderr


def test_github_annotations(tmp_path: Path) -> None:
    """Workflow commands with the runner's escaping: `,` and `:` in the path are %2C and %3A, the message plain."""
    odd = tmp_path / "a,b:c%.ptx"
    shutil.copy(data("PTX004_fires.ptx"), odd)
    broken = tmp_path / "broken.ptx"
    broken.write_text("not ptx\n")
    result = lint("--output-format", "github", "--no-ptxas", str(odd), data("PTX005_fires.ptx"), str(broken))
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    escaped = str(tmp_path).replace("%", "%25").replace(":", "%3A").replace(",", "%2C") + "/a%2Cb%3Ac%25.ptx"
    assert lines[0].startswith(f"::warning file={escaped},line=17,col=2,title=PTX004::loop polls with ld.acquire")
    assert lines[1].startswith(f"::warning file={escaped},line=21,col=2,title=PTX004::")
    assert lines[2].startswith(f"::notice file={data('PTX005_fires.ptx')},line=23,col=")
    assert lines[3].startswith(f"::error file={broken},line=1,")
    assert len(lines) == 4
    assert "4 findings" not in result.stderr and "3 findings" in result.stderr  # the summary stays on stderr


def test_github_escaping_of_message_and_properties() -> None:
    from ptxtool.errors import Diagnostic, Location
    from ptxtool.report.github import annotation

    d = Diagnostic(Location("dir,x/k:1.ptx", 3, 0), "100% of\r\nlanes, wait: here", "error", code="PTX001")
    assert annotation(d) == "::error file=dir%2Cx/k%3A1.ptx,line=3,title=PTX001::100%25 of%0D%0Alanes, wait: here"
    assert annotation(Diagnostic(Location("k.ptx"), "whole file", "note")) == "::notice file=k.ptx::whole file"


def test_statistics_counts_per_rule() -> None:
    result = lint("--statistics", "--no-ptxas", data("PTX002_fires.ptx"), data("PTX004_fires.ptx"))
    assert result.exit_code == 1
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows == [
        ["6", "PTX002", "divergent-barrier", "error"],
        ["2", "PTX004", "polling-without-backoff", "warning"],
    ]
    assert "8 findings (6 errors, 2 warnings) in 2 files" in result.stderr
    assert lint("--statistics", "--json", data("PTX002_fires.ptx")).exit_code == 2


def test_severity_coloured_on_a_terminal_only(monkeypatch) -> None:
    import io

    from ptxtool.lint import load_settings
    from ptxtool.report import emit
    from ptxtool.report.console import Out, stderr_console
    from ptxtool.services import lint as service
    from ptxtool.sources import read_inputs

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    settings = load_settings({}, "", ptxas=False)
    result = service.execute(service.Options(settings), read_inputs((data("PTX004_fires.ptx"),)))
    monkeypatch.delenv("NO_COLOR", raising=False)
    for stream, coloured in ((Terminal(), True), (io.StringIO(), False)):
        emit(result, "text", Out(stream, stderr_console()))
        assert ("\x1b[1;33mwarning\x1b[0m:" in stream.getvalue()) is coloured
        assert ("PTX004 warning:" in stream.getvalue()) is not coloured
    monkeypatch.setenv("NO_COLOR", "1")
    stream = Terminal()
    emit(result, "text", Out(stream, stderr_console()))
    assert "\x1b[" not in stream.getvalue()

"""`ptxtool report`: the page is checked by parsing it (every kernel, every PTX line, the numbers of `inspect --json`,
lint findings on their lines), and opened in a real headless Chromium when one is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS, SAMPLES

from ptxtool.cli import main

FILES = [
    pytest.param(SAMPLES / "pressure.sm80.ptx", id="samples/pressure"),
    pytest.param(SAMPLES / "comm.sm90.lineinfo.ptx", id="samples/comm-lineinfo"),
    pytest.param(CORPUS / "triton/matmul.sm80.ptx", id="corpus/triton-matmul"),
    pytest.param(CORPUS / "ptx/control.sm80.ptx", id="corpus/control"),
]


class Page(HTMLParser):
    """What the tests read back from a page: PTX lines by anchor, kernels, numbers by key, findings, SASS, sources,
    scripts, and the text of every element with a class the tests name."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: dict[str, dict[int, str]] = {}  # file anchor prefix -> line -> text
        self.kernels: list[str] = []
        self.numbers: dict[str, dict[str, str]] = {}  # kernel -> data-key -> cell text
        self.findings: list[tuple[int, str]] = []  # (PTX line it follows, text)
        self.sass: dict[int, str] = {}
        self.sources: list[str] = []
        self.scripts = 0
        self.ids: list[str] = []
        self.svgs = 0
        self.rows: dict[str, list[str]] = {}  # tr class -> row texts
        self._capture: list[tuple[str, list[str], dict]] = []
        self._kernel = ""
        self._file = ""
        self._line = 0
        self._last_line = 0
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        classes = (a.get("class") or "").split()
        if tag == "script":
            self.scripts += 1
        if tag == "svg":
            self.svgs += 1
        if tag == "details" and "kernel" in classes:
            self._kernel = a["data-kernel"]
            self.kernels.append(self._kernel)
        if "l" in classes and a.get("id"):
            self._file, line = a["id"].rsplit("-L", 1)
            self._line = int(line)
        if tag == "code" and "ptx" in classes:
            self._capture.append(("ptx", [], a))
        elif tag == "td" and "data-key" in a:
            self._capture.append(("number", [], a))
        elif "finding" in classes or "src" in classes or (tag == "pre" and "sass" in classes) or tag == "tr":
            self._capture.append((tag if tag == "tr" else classes[0], [], a))

    def handle_endtag(self, tag: str) -> None:
        if not self._capture:
            return
        kind, parts, a = self._capture[-1]
        ends = {"ptx": "code", "number": "td", "finding": "div", "src": "div", "sass": "pre", "tr": "tr"}
        if ends[kind] != tag:
            return
        self._capture.pop()
        text = "".join(parts)
        if kind == "ptx":
            self.lines.setdefault(self._file, {})[int(a["data-line"])] = text
            self._last_line = int(a["data-line"])
        elif kind == "number":
            self.numbers.setdefault(self._kernel, {})[a["data-key"]] = text
        elif kind == "finding":
            self.findings.append((self._last_line, text))
        elif kind == "sass" and self._line:
            self.sass[self._line] = text
        elif kind == "src":
            self.sources.append(text)
        elif kind == "tr":
            self.rows.setdefault(a.get("class", ""), []).append(text)

    def handle_data(self, data: str) -> None:
        for _, parts, _ in self._capture:
            parts.append(data)


def _report(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["report", *args])
    return result.exit_code, result.stdout, result.stderr


def _inspect(path: Path) -> dict:
    result = CliRunner().invoke(main, ["inspect", "--json", str(path)])
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def _expected(kernel: dict) -> dict[str, str]:
    """The cells the page must show for a kernel, computed from `inspect --json`."""
    r, occupancy = kernel["resources"], kernel["occupancy"]
    keys = ("registers", "spill_stores", "spill_loads", "stack_frame", "cumulative_stack", "shared", "local")
    out = {f"resources.{k}": "-" if r[k] is None else str(r[k]) for k in (*keys, "barriers")}
    out |= {f"resources.constant.{bank}": str(v) for bank, v in r["constant"].items()}
    if occupancy:
        out["occupancy.occupancy"] = f"{occupancy['occupancy']:.0%}"
        for k in ("active_warps", "max_warps", "blocks_per_sm", "limited_by", "block_size"):
            out[f"occupancy.{k}"] = str(occupancy[k])
    return out


@pytest.mark.parametrize("path", FILES)
def test_page_has_every_kernel_line_and_inspect_number(path: Path, tmp_path):
    out = tmp_path / "report.html"
    code, _, stderr = _report(str(path), "-o", str(out))
    assert code == 0, stderr
    page = Page(out.read_text())
    text = path.read_text().splitlines()
    assert page.lines == {"f0": {n: line for n, line in enumerate(text, 1)}}  # every line, once, unchanged
    document = _inspect(path)
    kernels = document["files"][0]["kernels"]
    assert page.kernels == [k["name"] for k in kernels]
    for k in kernels:
        assert page.numbers[k["name"]] == _expected(k)
    assert page.scripts == 1  # the one small script; the page works without it
    assert len(page.ids) == len(set(page.ids))  # anchors and the pictures' ids are unique on the page
    assert page.svgs == 2 * len(kernels)  # pressure and CFG per kernel
    assert page.sass and all(1 <= n <= len(text) for n in page.sass)  # SASS under PTX lines of this file


def test_lint_findings_sit_on_their_lines(tmp_path):
    path = SAMPLES / "pressure.sm80.ptx"
    out = tmp_path / "report.html"
    assert _report(str(path), "-o", str(out))[0] == 0
    linted = CliRunner().invoke(main, ["lint", "--json", str(path)])
    findings = json.loads(linted.stdout)["findings"]
    assert findings  # the sample spills: PTX008
    page = Page(out.read_text())
    expected = [(f["line"], f"{f['rule']} {f['severity']}: {f['message']}") for f in findings]
    assert sorted(page.findings) == sorted(expected)


def test_loc_source_lines_where_they_change(tmp_path):
    """A -lineinfo PTX (.loc marks): each source marker names the file and line the next PTX line came from."""
    from ptxtool.syntax import parse
    from ptxtool.syntax.lineinfo import LineInfo

    path = SAMPLES / "comm.sm90.lineinfo.ptx"
    out = tmp_path / "report.html"
    assert _report(str(path), "-o", str(out))[0] == 0
    page = Page(out.read_text())
    info = LineInfo.of(parse(path.read_text()))
    marks = {f"{at.file}:{at.line}" for n in range(1, 2000) if (at := info.find(n))}
    assert page.sources and {s.split()[0] for s in page.sources} == marks


def test_settings_apply_as_for_inspect_and_lint(tmp_path, monkeypatch):
    """[tool.ptxtool.inspect] block-size and [tool.ptxtool.lint] ignore reach the page as they reach those commands."""
    settings = '[tool.ptxtool.inspect]\nblock-size = 96\n[tool.ptxtool.lint]\nignore = ["PTX008"]\n'
    (tmp_path / "pyproject.toml").write_text(settings)
    monkeypatch.chdir(tmp_path)
    path = SAMPLES / "pressure.sm80.ptx"  # spills: PTX008 without the settings (test_lint_findings_sit_on_their_lines)
    code, html, stderr = _report(str(path))
    assert code == 0, stderr
    page = Page(html)
    kernels = _inspect(path)["files"][0]["kernels"]
    assert {k["occupancy"]["block_size"] for k in kernels} == {96}
    for k in kernels:
        assert page.numbers[k["name"]] == _expected(k)
    assert not [f for f in page.findings if "PTX008" in f[1]]


def test_sass_matches_the_sass_command(tmp_path):
    path = SAMPLES / "reduce.sm80.ptx"
    out = tmp_path / "report.html"
    assert _report(str(path), "-o", str(out))[0] == 0
    page = Page(out.read_text())
    from ptxtool.services.sass import Options, execute
    from ptxtool.sources import read_inputs

    result = execute(Options(), read_inputs([str(path)]))
    expected: dict[int, list[str]] = {}
    for entries in result.functions.values():  # the sample's kernels call nothing: no SASS of another function
        for e in entries:
            if e.address is not None and e.ptx_line:
                expected.setdefault(e.ptx_line, []).append(e.text)
    assert {n: text.splitlines() for n, text in page.sass.items()} == expected


def test_everything_from_the_input_is_escaped(tmp_path):
    """A comment with markup in it stays text: no element, no script, the line read back exactly."""
    text = (SAMPLES / "reduce.sm80.ptx").read_text().splitlines()
    evil = "// <script>alert(1)</script> & <b>x</b> &amp; \"quoted\" 'single'"
    odd = "// a form\x0cfeed and a \u2028 line separator: not new lines for the parser"
    at = next(i for i, line in enumerate(text) if line.startswith(".visible .entry")) + 1
    text[at:at] = [evil, odd]
    path = tmp_path / "evil.ptx"
    path.write_text("\n".join(text) + "\n")
    code, page_text, stderr = _report(str(path))
    assert code == 0, stderr
    page = Page(page_text)
    assert page.scripts == 1 and page.lines["f0"][at + 1] == evil and page.lines["f0"][at + 2] == odd
    assert page.lines["f0"] == dict(enumerate(text, 1))
    assert "<script>alert" not in page_text


def test_optimized_shows_diff_sass_changes_and_record(tmp_path):
    source = SAMPLES / "reduce.sm80.ptx"
    optimized = tmp_path / "reduce.opt.ptx"
    made = CliRunner().invoke(main, ["optimize", str(source), "-o", str(optimized)])
    assert made.exit_code == 0, made.stderr
    out = tmp_path / "review.html"
    code, _, stderr = _report(str(source), "--optimized", str(optimized), "-o", str(out))
    assert code == 0, stderr
    html = out.read_text()
    page = Page(html)
    assert "verification record" in html and '<span class="good">verified</span>' in html
    changed = page.rows.get("chg", [])
    before, after = source.read_text().splitlines(), optimized.read_text().splitlines()
    differing = sum(1 for a, b in zip(before, after, strict=True) if a != b)
    assert len(changed) == differing > 0
    assert html.count("+LDG.E.NA") >= 1  # the promised SASS modifier, in a kernel's SASS diff

    hand = tmp_path / "hand.ptx"  # not what optimize makes: no record, and the page says why
    hand.write_text(source.read_text().replace("ld.global.u32", "ld.global.nc.u32", 1))
    code, html, _ = _report(str(source), "--optimized", str(hand))
    assert code == 0 and "no verification record" in html and "verification record</h3>" not in html


def test_tune_table_tolerates_missing_fields(tmp_path):
    tune = tmp_path / "tune.json"
    candidates = [{"name": "a", "time_us": 3.2, "registers": 40}, {"name": "b", "time_us": 2.9}, "odd"]
    tune.write_text(json.dumps({"candidates": candidates, "winner": {"name": "b", "interval": [2.8, 3.0]}}))
    code, html, stderr = _report(str(SAMPLES / "reduce.sm80.ptx"), "--tune", str(tune))
    assert code == 0, stderr
    page = Page(html)
    assert page.rows["winner"] == ["1b2.9"]
    assert "winner: b, interval [2.8, 3.0]" in unescape(re.sub("<[^>]+>", "", html))
    odd = next(r for r in page.rows[""] if r.startswith("2"))
    assert odd == "2odd"  # a candidate that is not an object: one cell
    tune.write_text('{"candidates": [1, 2,]}')
    code, _, stderr = _report(str(SAMPLES / "reduce.sm80.ptx"), "--tune", str(tune))
    assert code == 2 and f"{tune}:1:" in stderr


def test_bad_input_and_usage(tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { mov.u32 %r1 ; }\n")
    code, _, stderr = _report(str(bad))
    assert code == 2 and f"{bad}:4:" in stderr and "Traceback" not in stderr
    assert _report(str(tmp_path / "missing.ptx"))[0] == 2
    code, _, stderr = _report(str(SAMPLES / "reduce.sm80.ptx"), str(SAMPLES / "reduce.sm90.ptx"), "--optimized", "x")
    assert code == 2 and "exactly one" in stderr
    code, _, stderr = _report(str(SAMPLES / "reduce.sm80.ptx"), "-o", str(tmp_path / "r.txt"))
    assert code == 2 and ".html" in stderr


def test_a_large_page_renders_in_seconds():
    """Rendering alone (the toolchain runs apart) of a 30 k-line file: the first kernel open, the rest folded."""
    from ptxtool.report.html import render
    from ptxtool.services.report import FileView, Span

    lines = [f"\tadd.s32 \t%r{i}, %r{i - 1}, 1; // <{i}>" for i in range(30_000)]
    spans = [Span(1 + 1000 * k, 1000 * (k + 1), f"k{k}", False) for k in range(30)]
    sass = {n: [("k", f"IADD3 R{n % 200}, R1, 0x1, RZ")] for n in range(1, 30_001, 2)}
    view = FileView("big.ptx", "sm_90", lines, spans, {}, sass, {}, {}, {})
    start = time.perf_counter()
    page = render([view])
    assert time.perf_counter() - start < 5.0
    assert page.count('<code class="ptx"') == 30_000 and " open" not in page.split("<main>")[1][:200]


CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium or Chrome installed")
def test_page_opens_in_headless_chromium_without_console_errors(tmp_path):
    out = tmp_path / "report.html"
    assert _report(str(SAMPLES / "pressure.sm80.ptx"), "-o", str(out))[0] == 0
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    flags += [f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not re.findall(r":CONSOLE[:(].*", dom.stderr), re.findall(r":CONSOLE[:(].*", dom.stderr)
    assert 'data-kernel="nbody_tile"' in dom.stdout and "<svg" in dom.stdout
    assert 'style="display: inline-block;"' in dom.stdout  # the script ran: the buttons are shown
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1300,1400", out.as_uri()], capture_output=True, timeout=120
    )
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_record_shows_optimize_problems_as_their_line_and_message() -> None:
    """optimize's JSON problems are diagnostics (ptxtool.optimize/2): the record prints line and message, not a dict."""
    from ptxtool.errors import Diagnostic, Location
    from ptxtool.report.html import _record

    problem = Diagnostic(Location("k.ptx", 12, 3), "ptxas rejects the output", code="optimize/strict").to_data()
    whole = Diagnostic(Location("k.ptx", 0, 0), "the SASS lacks USETMAXREG", code="optimize/warp-roles").to_data()
    html = _record({"verified": False, "problems": [problem, whole]})
    assert "line 12: ptxas rejects the output" in html and "{" not in unescape(html.split("NOT verified")[1])
    assert '<p class="bad">the SASS lacks USETMAXREG</p>' in html


def test_a_target_guessed_wrong_before_the_parse_is_built_again(tmp_path, monkeypatch):
    """ptxas starts on the first `.target` line before the file is parsed; a line inside a block comment is a wrong
    guess (here one ptxas rejects): that build is dropped, and the page shows the module's own target's numbers."""
    import ptxtool.toolchain.compile as toolchain

    built, compile_ptx = [], toolchain.compile_ptx
    monkeypatch.setattr(toolchain, "compile_ptx", lambda *a, **k: built.append(a[2]) or compile_ptx(*a, **k))
    path = tmp_path / "commented.ptx"
    path.write_text("/*\n.target sm_1000\n*/\n" + (SAMPLES / "reduce.sm80.ptx").read_text())
    out = tmp_path / "report.html"
    code, _, stderr = _report(str(path), "-o", str(out))
    assert code == 0, stderr
    assert sorted(built) == ["sm_1000", "sm_80"]  # the two builds run in threads: either may start first
    assert '<span class="muted">(sm_80)</span>' in out.read_text()
    page = Page(out.read_text())
    kernels = _inspect(path)["files"][0]["kernels"]
    assert page.kernels == [k["name"] for k in kernels] and all(
        page.numbers[k["name"]] == _expected(k) for k in kernels
    )


def test_each_tool_runs_once_per_file(tmp_path, monkeypatch):
    """ptxas builds once (`-lineinfo`), and nvdisasm prints two listings: `-gp` (SASS under each PTX line, the PTX
    line of each live count and the instructions of the statistics) and the life ranges; nothing runs twice."""
    import ptxtool.toolchain.compile as toolchain
    import ptxtool.toolchain.sass as sass

    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path / "cache"))  # a cache would hide a second run
    built, listed = [], []
    compile_ptx, nvdisasm = toolchain.compile_ptx, sass._nvdisasm
    monkeypatch.setattr(toolchain, "compile_ptx", lambda *a, **k: built.append((a[2], k)) or compile_ptx(*a, **k))
    monkeypatch.setattr(sass, "_nvdisasm", lambda cubin, options: listed.append(options) or nvdisasm(cubin, options))
    assert _report(str(SAMPLES / "pressure.sm80.ptx"), "-o", str(tmp_path / "r.html"))[0] == 0
    assert built == [("sm_80", {"lineinfo": True})]
    assert sorted(listed) == [["-c", "-gp"], ["-c", "-plr", "-lrm", "count"]]

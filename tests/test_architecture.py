"""The house rules of docs/architecture.md, checked on the code: imports point down the layers, each known fact is
defined once, cli.py is declarations, every command reads stdin for `-`, and piped output is plain text."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ptxtool"
SAMPLES = ROOT / "samples"

# layer -> rank; a module may import its own rank, lower ranks, and the leaves
RANKS = {"base": 0, "syntax": 1, "isa": 2, "analysis": 3, "passes": 4, "services": 5, "cli": 6}
LEAVES = {"toolchain", "report", "config", "sources"}  # used from anywhere; they import base, syntax, isa, leaves
TOP = {
    "errors": "base",
    "cache": "base",
    "records": "base",
    "__init__": "base",
    "cli": "cli",
    "help": "cli",
    "guard": "cli",
    "deferred": "cli",
    "__main__": "cli",
    "program": "cli",
    "group": "cli",
}
PACKAGES = {"syntax": "syntax", "isa": "isa", "analysis": "analysis", "passes": "passes", "lint": "passes"}
PACKAGES |= {"services": "services"}


def layer(module: str) -> str:
    """`ptxtool.analysis.cfg` -> "analysis"; leaves are named by themselves."""
    parts = module.split(".")[1:] or ["__init__"]
    if parts[0] in LEAVES:
        return parts[0]
    return PACKAGES.get(parts[0]) or TOP[parts[0]]


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every ptxtool module a file imports, at the top or inside functions, except under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ptxtool")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base])
            if base.startswith("ptxtool"):
                found.add(base)
    return found


def _allowed(importer: str, imported: str) -> bool:
    a, b = layer(importer), layer(imported)
    if b in LEAVES:
        return True
    if a in LEAVES:
        return RANKS[b] <= RANKS["isa"]
    return RANKS[b] <= RANKS[a] and not (b == "cli" and a != "cli")


def test_no_import_points_upward():
    wrong = {
        f"{_module_name(path)} imports {imported}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "grammar" not in path.parts
        for imported in _imports(path)
        if imported != "ptxtool" and not _allowed(_module_name(path), imported)
    }
    assert wrong == set()


def test_the_import_check_can_fail():
    assert not _allowed("ptxtool.syntax.parser", "ptxtool.analysis.cfg")
    assert not _allowed("ptxtool.passes.cache_operators", "ptxtool.services.inspect")
    assert not _allowed("ptxtool.report.text", "ptxtool.services.lint")
    assert not _allowed("ptxtool.services.parse", "ptxtool.cli")
    assert not _allowed("ptxtool.config", "ptxtool.analysis.cfg") and _allowed("ptxtool.config", "ptxtool.isa.targets")
    assert _allowed("ptxtool.services.parse", "ptxtool.report.text") and _allowed("ptxtool.cli", "ptxtool.services")


# names of facts and types that were written more than once; each must now have exactly one definition
ONCE = (
    "TYPE_BYTES",
    "TARGET",
    "Module",
    "Settings",
    "Difference",
    "LIMITS",
    "cuda_to_ptx",
    "demangle",
    "choose_function",
    "read_toml",
    "find_pyproject",
    "Diagnostic",
    "MAX_BLOCK",
    "MAX_BLOCK_THREADS",
    "block_bounds",
)
# record types that each said "something is wrong here" their own way; errors.Diagnostic is the one now
GONE = ("Finding", "Violation", "Problem", "Dropped")


def _definitions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_each_known_fact_is_defined_once():
    found = _definitions()
    twice = {name: found[name] for name in ONCE if len(found.get(name, [])) > 1}
    assert twice == {}
    assert all(name in found for name in ONCE), [n for n in ONCE if n not in found]
    assert {name: found[name] for name in GONE if name in found} == {}


def test_the_sm_target_pattern_is_written_once_here():
    """Outside its home (syntax/names.py) no module of the house spells the `sm_NN` pattern again."""
    pattern = re.compile(r"sm_\(?\\d")
    homes = {"ptxtool/syntax/names.py"}
    spelled = {
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if pattern.search(p.read_text()) and "grammar" not in p.parts
    }
    assert spelled - homes == set()


def test_the_block_limits_are_written_once_here():
    """CUDA's 1024 threads per block (and 1024, 1024, 64 per dimension) live in isa/targets.py; nothing else spells
    them as a limit (`IntRange(1, 1024)`, `<= 1024`, `(1024, 1024, 64)`, `MAX_THREADS = 1024`)."""
    pattern = re.compile(r"\b1024\b\s*[,)]|[<>]=?\s*1024\b|THREADS\w*\s*=\s*1024\b")
    spelled = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if pattern.search(p.read_text())}
    assert spelled - {"ptxtool/isa/targets.py"} == set()


def test_maxntid_and_reqntid_are_read_in_one_place():
    """A kernel's `.maxntid`/`.reqntid` are read by analysis/launch_bounds.py (`block_bounds`) for every user; the
    ISA table (isa/features.py) is the only other place that names them."""
    words = {".maxntid", ".reqntid", "maxntid", "reqntid"}
    homes = {"ptxtool/analysis/launch_bounds.py", "ptxtool/isa/features.py"}
    naming = {
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if any(isinstance(n, ast.Constant) and n.value in words for n in ast.walk(ast.parse(p.read_text())))
    }
    assert naming - homes == set()


def test_cli_is_declarations():
    """Under 450 lines; every command function calls one service (or the lint rule table) and hands it to report/."""
    text = (PACKAGE / "cli.py").read_text()
    assert len(text.splitlines()) < 450
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_command"):
            calls = [ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)]
            executes = [c for c in calls if c.endswith(".execute")]
            assert len(executes) == 1, (node.name, calls)
            assert "emit_and_exit" in calls, node.name


PTX = SAMPLES / "elementwise.sm90.ptx"
STDIN_COMMANDS = [
    (["parse", "-"], 0),
    (["fmt", "-"], 0),
    (["lint", "--no-ptxas", "--select", "PTX005", "-"], 1),
    (["inspect", "-"], 0),
    (["sass", "-", "-k", "saxpy"], 0),
    (["cfg", "-", "-k", "saxpy"], 0),
    (["optimize", "-"], 0),
]


@pytest.mark.parametrize(("args", "code"), STDIN_COMMANDS, ids=[a[0] for a, _ in STDIN_COMMANDS])
def test_every_command_reads_stdin_for_dash(args, code):
    result = CliRunner().invoke(main, args, input=PTX.read_text())
    assert result.exit_code == code, result.output
    assert "<stdin>" in result.stdout + result.stderr or result.stdout


def test_run_reads_stdin_for_dash():
    """Without a GPU, run gets past reading and checking the PTX from stdin to the driver (exit 3, not 2)."""
    from ptxtool.toolchain.gpu import probe

    if probe() is not None:
        pytest.skip("a GPU is here: test_gpu_run.py runs kernels")
    result = CliRunner().invoke(main, ["run", "-", "--spec", str(SAMPLES / "saxpy.toml")], input=PTX.read_text())
    assert result.exit_code == 3, result.output
    empty = CliRunner().invoke(main, ["run", "-", "--spec", str(SAMPLES / "saxpy.toml")], input="")
    assert empty.exit_code == 2 and "<stdin>: error: empty file" in empty.stderr


BOX = re.compile("[\u2500-\u257f]")


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", str(PTX)],
        ["parse", str(PTX)],
        ["lint", "--no-ptxas", str(PTX)],
        ["doctor"],
        ["lint", "--list-rules"],
    ],
    ids=lambda a: a[0],
)
def test_piped_output_has_no_box_drawing(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    assert not BOX.search(result.stdout + result.stderr)


def test_piped_table_keeps_whole_names_and_demangles():
    result = CliRunner().invoke(main, ["inspect", str(PTX)])
    rows = [line for line in result.stdout.splitlines() if "_Z5hadd2" in line]
    assert (
        len(rows) == 1 and "_Z5hadd2iPK7__half2S1_PS_ (hadd2(int, __half2 const*, __half2 const*, __half2*))" in rows[0]
    )
    assert str(PTX) in rows[0]


def test_terminal_table_never_cuts_file_or_kernel_names():
    """On a narrow terminal the numeric columns wrap; the file and kernel names stay whole on one line."""
    import io

    from rich.console import Console

    from ptxtool.report.console import Out
    from ptxtool.report.tables import INSPECT_COLUMNS, table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    out = Out(stream, Console(file=io.StringIO()))
    name = "samples/a_rather_long_directory_name/elementwise.sm90.ptx"
    kernel = "_Z13reduce_kernelIdLi128EEvPKT_PS0_i"
    row = [name, kernel, *(["12345/67890"] * (len(INSPECT_COLUMNS) - 2))]
    import os

    os.environ["COLUMNS"] = "100"
    try:
        table(out, INSPECT_COLUMNS, [row], set())
    finally:
        del os.environ["COLUMNS"]
    text = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())
    assert any(name in line and kernel in line for line in text.splitlines()), text
    assert text.count("/") == 11 + 3 + name.count("/")  # every value folded in its column, none cropped


def test_every_service_returns_a_result_the_renderer_knows():
    """Each services/<command>.py has `execute(options, sources)` returning a Result type in report's TEXT table,
    with `exit_code` and `to_data`."""
    import importlib
    import typing

    from ptxtool.report.text import TEXT

    helpers = {"__init__", "launch", "result", "budget", "registers"}  # modules the services share, not commands
    names = sorted(p.stem for p in (PACKAGE / "services").glob("*.py") if p.stem not in helpers)
    assert {"parse", "fmt", "doctor", "inspect", "sass", "cfg", "lint", "run", "bench"} <= set(names)
    for name in names:
        module = importlib.import_module(f"ptxtool.services.{name}")
        returned = typing.get_type_hints(module.execute)["return"]
        options, sources = list(typing.get_type_hints(module.execute))[:2]
        assert options == "options" and sources.startswith("source"), name
        assert returned.__name__ in TEXT or name == "optimize", name
        assert hasattr(returned, "exit_code") and callable(returned.to_data), name

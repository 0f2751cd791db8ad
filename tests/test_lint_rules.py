"""Every lint rule on hand-written PTX (tests/data/lint: a file where it fires, marked `// expect ID` on each line
it must report, and a near miss where it must stay silent) and on real compiler output from samples/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptxtool.lint import all_rules, load_settings
from ptxtool.services.lint import lint_file
from ptxtool.sources import read_source

DATA = Path(__file__).parent / "data" / "lint"
SAMPLES = Path(__file__).parent.parent / "samples"
RULE_IDS = list(all_rules())
NO_TOOLS = ("PTX008",)  # rules that run ptxas are covered in test_lint_cli.py and below


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def findings(path: Path, rule: str, **flags) -> list:
    settings = load_settings({}, "test", select=(rule,), **flags)
    result = lint_file(read_source(str(path)), settings)
    assert not result.errors, result.errors
    return result.findings


def expected_lines(path: Path, rule: str) -> set[int]:
    return {n for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(rf"// expect .*{rule}", line)}


@pytest.mark.parametrize("rule", [r for r in RULE_IDS if r not in NO_TOOLS])
def test_rule_fires_exactly_where_marked(rule: str) -> None:
    path = DATA / f"{rule}_fires.ptx"
    found = findings(path, rule)
    assert {f.location.line for f in found} == expected_lines(path, rule)
    assert all(f.code == rule and f.severity == all_rules()[rule].severity for f in found)
    assert all(f.message and "\n" not in f.message for f in found)


@pytest.mark.parametrize("rule", [r for r in RULE_IDS if r not in NO_TOOLS])
def test_near_miss_is_silent(rule: str) -> None:
    assert findings(DATA / f"{rule}_ok.ptx", rule) == []


def test_every_rule_has_data_and_docs() -> None:
    for rule in RULE_IDS:
        r = all_rules()[rule]
        assert re.fullmatch(r"PTX\d{3}", rule) and r.severity in ("error", "warning", "note")
        assert len(r.doc.splitlines()) > 3, f"{rule} needs a docstring that explains it"
        if rule not in NO_TOOLS:
            assert (DATA / f"{rule}_fires.ptx").is_file() and (DATA / f"{rule}_ok.ptx").is_file()


# ---------------------------------------------------------------- real compiler output


def test_polling_loops_in_nvcc_output() -> None:
    """comm.cu spins on `ld.acquire.sys` and `ld.volatile` (inline asm) without __nanosleep; the cooperative-groups
    grid sync in reduce.cu spins on ld.acquire.gpu; its float atomicMax is a CAS retry loop, not a spin."""
    comm = findings(SAMPLES / "comm.sm90.ptx", "PTX004")
    assert [(f.location.line, f.message.split()[3]) for f in comm] == [
        (62, "ld.acquire.sys.global.s32"),
        (231, "ld.volatile.global.s32"),
    ]
    assert {f.location.line for f in findings(SAMPLES / "reduce.sm80.ptx", "PTX004")} == {390}


def test_local_arrays_in_nvcc_output() -> None:
    """ptxas decides: 'local_array' has a depot and 17 ld.local/st.local in the PTX, but ptxas keeps the array in
    registers (no stack frame, no LDL/STL in its SASS), so only 'hello' (a 24-byte frame, 3 LDL/STL) is reported.
    Without ptxas the PTX alone decides and both are."""
    found = findings(SAMPLES / "control.sm80.ptx", "PTX007")
    assert [f.location.line for f in found] == [570, 589]
    assert "3 ld.local/st.local in 'hello'" in found[1].message
    static = findings(SAMPLES / "control.sm80.ptx", "PTX007", ptxas=False)
    assert [f.location.line for f in static] == [385, 407, 570, 589]


def test_warp_specialized_hopper_kernel_is_clean() -> None:
    """The hopper sample's setmaxnreg (384 threads, 40/232 registers) fits, and its barriers are not divergent."""
    for rule in ("PTX001", "PTX002", "PTX003", "PTX006"):
        assert findings(SAMPLES / "hopper.sm90a.ptx", rule) == [], rule


def test_setmaxnreg_over_budget_when_the_count_rises(tmp_path: Path) -> None:
    path = tmp_path / "hopper_240.ptx"
    path.write_text((SAMPLES / "hopper.sm90a.ptx").read_text().replace("u32 232;", "u32 240;"))
    found = findings(path, "PTX003")
    assert len(found) == 1 and "66560" in found[0].message


def test_nvcc_output_has_no_divergent_barriers_illegal_features_or_stale_nc_loads() -> None:
    """nvcc emits ld.global.nc only for `const __restrict__` buffers, which the kernel cannot write."""
    for path in sorted(SAMPLES.glob("*.sm*.ptx")):
        for rule in ("PTX001", "PTX002", "PTX006"):
            assert findings(path, rule) == [], (path.name, rule)


def test_readonly_parameters_of_nvcc_output() -> None:
    """saxpy-like kernels without __restrict__ read their input through plain ld.global."""
    found = findings(SAMPLES / "comm.sm90.ptx", "PTX005")
    assert found and all("never writes it" in f.message and "ptxtool optimize" in f.message for f in found)
    assert not any(".nc" in f.message.split(" first ")[1] for f in found)


def test_ptxas_spills_reported_at_the_kernel() -> None:
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("ptxas")
    except EnvironmentProblem:
        pytest.skip("no ptxas")
    found = findings(SAMPLES / "pressure.sm80.ptx", "PTX008")
    spills = [f for f in found if "long_live_ranges" in f.message]
    assert len(spills) == 1 and spills[0].location.line == 767 and "spilled" in spills[0].message
    assert findings(SAMPLES / "tensorcore.sm80.ptx", "PTX008") == []


def test_nc_load_of_a_written_parameter_in_a_sample() -> None:
    found = findings(SAMPLES / "constructs.ptx", "PTX006")
    assert [(f.location.line, "'out'" in f.message) for f in found] == [(134, True)]


def test_ptxas_wgmma_warning_at_its_line(tmp_path: Path) -> None:
    """Reading a wgmma accumulator before wgmma.wait_group makes ptxas inject a wait (C7517) at that line."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("ptxas")
    except EnvironmentProblem:
        pytest.skip("no ptxas")
    lines = (SAMPLES / "hopper.sm90a.ptx").read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("wgmma.mma_async"))
    lines.insert(at + 1, "\tadd.f32 %f1, %f1, %f2;")
    path = tmp_path / "early_read.ptx"
    path.write_text("\n".join(lines) + "\n")
    found = findings(path, "PTX008")
    assert [(f.location.line, "wgmma.wait_group is injected" in f.message) for f in found] == [(at + 2, True)]


@pytest.mark.parametrize(
    "directives",
    [
        ".maxntid 384, 1, 1\n.minnctapersm 1",
        ".reqntid 384, 1, 1\n.minnctapersm 1",
        ".maxnreg 128",
        ".maxntid 384, 1, 1",
        ".reqntid 384, 1, 1",
        ".minnctapersm 2",
        "",
    ],
)
def test_setmaxnreg_ignored_exactly_when_ptxas_says_so(tmp_path: Path, directives: str) -> None:
    """PTX003's 'ptxas ignores it' agrees with ptxas's own C7508 warning (PTX008) for each set of directives."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("ptxas")
    except EnvironmentProblem:
        pytest.skip("no ptxas")
    path = tmp_path / "k.ptx"
    path.write_text(
        f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{directives}\n"
        "{\n\tsetmaxnreg.dec.sync.aligned.u32 40;\n\tret;\n}\n"
    )
    ours = any("ptxas ignores it" in f.message for f in findings(path, "PTX003"))
    theirs = any("'setmaxnreg' ignored" in f.message for f in findings(path, "PTX008"))
    assert ours == theirs


@pytest.mark.parametrize("count", [16, 24, 100, 232, 256, 264])
def test_setmaxnreg_counts_rejected_exactly_when_ptxas_rejects_them(tmp_path: Path, count: int) -> None:
    from ptxtool.errors import EnvironmentProblem, InputError
    from ptxtool.toolchain.compile import compile_ptx
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("ptxas")
    except EnvironmentProblem:
        pytest.skip("no ptxas")
    text = (
        ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n.maxnreg 256\n"
        f"{{\n\tsetmaxnreg.inc.sync.aligned.u32 {count};\n\tret;\n}}\n"
    )
    path = tmp_path / "k.ptx"
    path.write_text(text)
    ours = any("must be a multiple of 8" in f.message for f in findings(path, "PTX003"))
    try:
        compile_ptx(text, str(path), "sm_90a")
        rejected = False
    except InputError:
        rejected = True
    assert ours == rejected


def test_readonly_note_only_where_optimize_rewrites() -> None:
    """PTX005 is silent for cache_ops_mix's explicit .cg/.ca loads and for kernels that synchronize with other
    agents (the reduce kernels' atomics, ring_dispatch's flags): optimize never makes those loads .nc."""
    comm = findings(SAMPLES / "comm.sm90.ptx", "PTX005")
    assert not any("cache_ops_mix" in f.message or "ring_dispatch" in f.message for f in comm)
    assert any("'plain_copy'" in f.message and "--noalias plain_copy" in f.message for f in comm)
    reduce = findings(SAMPLES / "reduce.sm90.ptx", "PTX005")
    assert not any("block_sum" in f.message or "histogram" in f.message for f in reduce)


def test_readonly_note_sees_module_variable_writes() -> None:
    """A kernel that writes a module variable: the note asks for --noalias, naming the variable."""
    found = findings(Path(__file__).parent / "data" / "safety" / "symbol_alias.ptx", "PTX005")
    assert len(found) == 1 and "--noalias _Z12symbol_aliasPKf` adds it if it never aliases g_buf" in found[0].message
    assert findings(Path(__file__).parent / "data" / "safety" / "consumer.ptx", "PTX005") == []


def test_ptxas_spills_of_a_debug_build_are_not_reported() -> None:
    """nvcc -G code spills on purpose: ptxas warns about it, PTX008 leaves it out (PTX007 leaves such files alone)."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import compile_ptx
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("ptxas")
    except EnvironmentProblem:
        pytest.skip("no ptxas")
    path = Path(__file__).parent / "corpus" / "ptx" / "control.sm80.debug.ptx"
    warnings = compile_ptx(path.read_text(), str(path), "sm_80").warnings
    assert any(w.kind == "spill" for w in warnings)  # ptxas does warn
    assert findings(path, "PTX008") == []

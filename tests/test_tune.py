"""`ptxtool tune` without a GPU: the space (spec `[tune]`, `--space`, `[tool.ptxtool.tune]`) and its mistakes, the
candidates and their generators, the dry run, the statistics and the decision, the cache, and exit 3 without a
driver. The GPU half is tests/test_worker.py."""

from __future__ import annotations

import difflib
import itertools
import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.errors import EnvironmentProblem, InputError
from ptxtool.services import tune as tune_service
from ptxtool.services.launch import load_spec
from ptxtool.services.tuning import worker
from ptxtool.services.tuning.space import (
    GENERATORS,
    Candidate,
    Context,
    Generator,
    Space,
    make_candidates,
    read_layer,
)
from ptxtool.services.tuning.worker import Measurement
from ptxtool.sources import read_source
from ptxtool.syntax import parse
from ptxtool.toolchain.gpu import DeviceInfo, probe
from ptxtool.toolchain.timing import Interval, corrected, median_interval, order_statistic_rank, paired_ratios

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
COMM = SAMPLES / "comm.sm90.ptx"
ELEMENTWISE = SAMPLES / "elementwise.sm90.ptx"
DATA = Path(__file__).resolve().parent / "data"
PRESSURE = Path(__file__).resolve().parent / "corpus" / "ptx" / "pressure.sm90.ptx"  # nvcc's launch bounds
LONG_LIVE_RANGES = DATA / "registers" / "long_live_ranges.toml"
STAGED = DATA / "warp_roles" / "staged.ptx"  # a two-barrier staged tile loop, .reqntid 128


def invoke(*args: str):
    return CliRunner().invoke(main, ["tune", *args])


def context(spec: str | Path = "plain_copy", ptx: Path = COMM, **space) -> Context:
    """A tuning context; the register and warp-role generators stay off unless a test names them."""
    source = read_source(str(ptx))
    loaded = load_spec(str(spec if isinstance(spec, Path) else SAMPLES / f"{spec}.toml"))
    module = parse(source.text)
    kernel = next(k.name for k in module.kernels if k.name == loaded.kernel)
    space = {"registers": False, "warp_roles": False} | space
    return Context(source, module, kernel, "sm_90", loaded, read_layer(Space(), space, "test.toml"))


# ---------------------------------------------------------------- the space


def test_ranges_lists_and_dims() -> None:
    space = read_layer(
        Space(),
        {
            "grid": {"from": 20, "to": 132, "step": 56},
            "block": [128, [32, 8]],
            "args": {"n": {"from": 1, "to": 8, "factor": 2}},
        },
        "s.toml",
    )
    assert space.grid == ((20, 1, 1), (76, 1, 1), (132, 1, 1))
    assert space.block == ((128, 1, 1), (32, 8, 1))
    assert space.args == (("n", (1, 2, 4, 8)),)


def test_layers_override_in_order() -> None:
    space = read_layer(read_layer(Space(), {"objective": "neighbour", "launches": 50}, "a"), {"launches": 80}, "b")
    assert (space.objective, space.launches, space.neighbour_mib) == ("neighbour", 80, 24)
    assert read_layer(Space(), {"cache-operators": False}, "a").cache_operators == ()


@pytest.mark.parametrize(
    "table, message",
    [
        ({"gird": [1]}, "unknown tune setting 'gird'"),
        ({"grid": {"from": 10, "to": 1, "step": 1}}, "tune setting `grid`: a range needs numbers with from <= to"),
        ({"grid": {"from": 1, "to": 10}}, "a range is {from = A, to = B, step = S}"),
        ({"block": [2048]}, "tune setting `block`: block [2048, 1, 1] has 2048 threads; a block holds 1024 at most"),
        ({"grid": [0]}, "tune setting `grid`: a value is a positive integer"),
        ({"objective": "fast"}, "tune setting `objective`: one of alone, neighbour"),
        ({"cache_operators": ["fastest"]}, "unknown variant 'fastest'"),
        ({"confidence": 1.5}, "tune setting `confidence`: a number from 0.5 to 0.9999"),
        ({"args": {"n": []}}, "tune setting `args.n`"),
        ({"generators": ["nope"]}, "unknown generator 'nope'"),
        ({"grid": {"from": 1, "to": 100000, "step": 1}}, "more than 4096 values"),
        (
            {"registers": ["caps"]},
            "tune setting `registers`: unknown kind 'caps' (known: maxntid, minnctapersm, maxnreg",
        ),
        ({"registers": "all"}, "tune setting `registers`: a list of strings"),
        ({"warp_roles": 3}, "tune setting `warp_roles`: true, false or a table"),
        ({"warp_roles": {"variant": ["fast"]}}, "tune setting `warp_roles.variant`: unknown variant 'fast'"),
        ({"warp_roles": {"producer_warps": [0]}}, "tune setting `warp_roles.producer_warps`: whole numbers from 1"),
        ({"warp_roles": {"stages": [2.5]}}, "tune setting `warp_roles.stages`: positive whole numbers"),
        ({"warp-roles": {"stage": [2]}}, "tune setting `warp-roles.stage`: unknown (known: variant"),
    ],
)
def test_space_mistakes_name_the_file_and_key(table: dict, message: str) -> None:
    with pytest.raises(InputError) as error:
        read_layer(Space(), table, "space.toml")
    d = error.value.diagnostics[0]
    assert d.location.path == "space.toml" and message in d.message, d.message


def test_space_file_mistakes_exit_2_with_file_and_key(tmp_path: Path) -> None:
    space = tmp_path / "space.toml"
    space.write_text("args = { src = [1, 2] }\n")
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--space", str(space), "--dry-run")
    assert result.exit_code == 2, result.output
    assert (
        f"{space}: error: tune setting `args.src`: the spec has no scalar parameter 'src' (scalars: n)" in result.output
    )
    space.write_text("args = { n = [1.5] }\n")
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--space", str(space), "--dry-run")
    assert result.exit_code == 2 and "1.5 is not a s32 value" in result.output


def test_register_and_warp_role_settings() -> None:
    space = read_layer(
        Space(),
        {
            "registers": ["minnctapersm", "remat"],
            "warp-roles": {
                "variant": ["split"],
                "producer-warps": ["default", 2],
                "stages": {"from": 2, "to": 6, "step": 2},
            },
        },
        "s.toml",
    )
    assert space.registers == ("minnctapersm", "remat")
    assert space.warp_roles.settings() == [("split", p, s) for p in (None, 2) for s in (2, 4, 6)]
    off = read_layer(Space(), {"registers": False, "warp_roles": False}, "s.toml")
    assert off.registers == () and off.warp_roles.settings() == []
    assert read_layer(Space(), {"registers": True}, "s").registers == Space().registers
    data = json.loads(json.dumps(space.to_data()))  # the cache key and --json hold the space
    assert data["warp_roles"] == {"variant": ["split"], "producer_warps": ["default", 2], "stages": [2, 4, 6]}


def test_config_knows_every_tune_key() -> None:
    from ptxtool.config import _TUNE
    from ptxtool.services.tuning.space import KEYS

    assert sorted(_TUNE) == sorted(KEYS)


def test_spec_tune_table_is_read_and_run_still_accepts_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "copy.toml"
    spec.write_text((SAMPLES / "plain_copy.toml").read_text() + "\n[tune]\ngrid = [20, 132]\ncache_operators = []\n")
    load_spec(str(spec))  # `run` and `bench` take a spec with a [tune] table
    result = invoke(str(COMM), "-s", str(spec), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    names = [c["name"] for c in json.loads(result.stdout)["candidates"]]
    assert names == ["input", "grid=20", "grid=132"]
    spec.write_text((SAMPLES / "plain_copy.toml").read_text() + "\n[tune]\ngrid = 3\n")
    result = invoke(str(COMM), "-s", str(spec), "--dry-run")
    assert result.exit_code == 2 and f"{spec}: error: tune setting `grid`: give a list" in result.output


def test_config_section_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.tune]\nobjective = "neighbour"\nneighbor-mib = 3\n')
    monkeypatch.chdir(tmp_path)
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--dry-run")
    assert result.exit_code == 2 and "[tool.ptxtool.tune]: unknown key 'neighbor-mib'" in result.output
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.tune]\nobjective = "fast"\n')
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--dry-run")
    assert result.exit_code == 2 and "pyproject.toml: error: tune setting `objective`: one of alone" in result.output
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.tune]\nobjective = "neighbour"\ncache-operators = []\n')
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["objective"] == "neighbour"
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--dry-run", "--json", "--objective", "alone")
    assert json.loads(result.stdout)["objective"] == "alone"  # flags over settings


# ---------------------------------------------------------------- candidates


def test_cache_operator_candidates_change_the_code_and_differ(ptxas: str) -> None:
    c = context()
    found = make_candidates(c, "t")
    assert found[0].name == "input" and found[0].text == c.source.text
    code = [x for x in found if x.code_changed]
    assert code and all(x.text != c.source.text for x in code)
    assert len({x.text for x in code}) == len(code), "identical outputs must be one candidate"
    assert all(x.launch == found[0].launch for x in code)
    for x in code:  # minimal edits of the input, each still PTX, and only the tuned kernel touched
        parse(x.text)
        diff = difflib.unified_diff(c.source.text.splitlines(), x.text.splitlines(), lineterm="", n=0)
        changed = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        assert changed and all(re.search(r"\.global|createpolicy|\.reg", line) for line in changed), changed
    start = c.source.text.index(".entry plain_copy")
    for x in code:  # the other kernels of comm.sm90.ptx are not tuned: left as they are
        assert x.text[: c.source.text.rindex("}", 0, start)] == c.source.text[: c.source.text.rindex("}", 0, start)]
    assert any("gives the same code as" in n for n in c.notes)  # plain_copy: readonly changes nothing (no noalias)


def test_noalias_adds_the_readonly_variant(ptxas: str) -> None:
    plain = {x.name for x in make_candidates(context(cache_operators=["readonly"]), "t")}
    declared = {x.name for x in make_candidates(context(cache_operators=["readonly"], noalias=["plain_copy"]), "t")}
    assert "cache-operators:readonly" not in plain and "cache-operators:readonly" in declared


def test_launch_candidates_are_the_product_without_the_spec_own() -> None:
    c = context(cache_operators=[], grid=[1056, 20, 66], block=[256, 128], args={"n": [4194304, 1024]})
    found = make_candidates(c, "t")
    assert len(found) == 1 + 3 * 2 * 2 - 1
    assert {x.name for x in found} >= {"grid=20", "block=128", "n=1024", "block=128 grid=66 n=1024"}
    launch = next(x for x in found if x.name == "block=128 grid=66 n=1024").launch
    spec = launch.spec(c.spec)
    assert spec.grid == (66, 1, 1) and spec.block == (128, 1, 1) and spec.params[2].value == 1024
    assert all(x.text == c.source.text and x.launch_changed and not x.code_changed for x in found[1:])


def test_combine_and_the_limit(ptxas: str) -> None:
    c = context(cache_operators=["default", "evict-first"], grid=[20, 66], combine=True)
    found = make_candidates(c, "t")
    assert len(found) == 1 + 2 + 2 + 2 * 2
    both = [x for x in found if x.code_changed and x.launch_changed]
    assert {x.name for x in both} == {
        f"cache-operators:{v} grid={g}" for v in ("default", "evict-first") for g in (20, 66)
    }
    with pytest.raises(InputError, match="the space has 9 candidates; max_candidates is 4"):
        make_candidates(
            context(cache_operators=["default", "evict-first"], grid=[20, 66], combine=True, max_candidates=4), "t"
        )


def test_combine_leaves_a_code_candidate_with_its_own_launch_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A split kernel needs the block its generator gave it: tried at another launch it would be another kernel."""

    def own_block(c: Context):
        launch = replace(c.input.launch, block=(512, 1, 1))
        yield Candidate("grown", "planted", c.source.text + "\n// grown\n", launch, code_changed=True)
        yield Candidate("same", "planted", c.source.text + "\n// same\n", c.input.launch, code_changed=True)

    monkeypatch.setitem(GENERATORS, "planted", Generator("planted", "code", own_block))
    found = make_candidates(context(generators=["planted", "launch"], grid=[20], combine=True), "t")
    assert [x.name for x in found] == ["input", "grown", "same", "grid=20", "same grid=20"]


def test_a_registered_generator_adds_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    def twice(c: Context):
        yield Candidate("planted", "planted", c.source.text + "\n// planted\n", c.input.launch, code_changed=True)
        yield Candidate("planted again", "planted", c.source.text + "\n// planted\n", c.input.launch, code_changed=True)

    monkeypatch.setitem(GENERATORS, "planted", Generator("planted", "code", twice))
    found = make_candidates(context(generators=["planted"]), "t")
    assert [x.name for x in found] == ["input", "planted"]  # the same work once


def test_dry_run_json_lists_every_candidate_with_ptxas_numbers(ptxas: str) -> None:
    result = invoke(str(ELEMENTWISE), "-s", str(SAMPLES / "saxpy.toml"), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "ptxtool.tune/1" and data["dry_run"] and data["winner"] is None
    candidates = data["candidates"]
    assert candidates[0]["name"] == "input" and candidates[0]["status"] == "input"
    assert len(candidates) > 1 and all(c["status"] == "not run" for c in candidates[1:])
    for c in candidates:
        r = c["resources"]
        assert isinstance(r["registers"], int) and r["registers"] > 0 and r["spill_bytes"] == 0
        assert 0 < r["occupancy"] <= 1
    assert "input" in result.stderr and "regs" in result.stderr


def test_pruned_by_ptxas_numbers() -> None:
    c = context(cache_operators=[])
    base = tune_service.Resources(18, 0, 0, 1.0, "warps")
    worse = [
        tune_service.CandidateResult(c.input, base),
        tune_service.CandidateResult(
            Candidate("spills", "x", "", c.input.launch, True), tune_service.Resources(18, 8, 0, 1.0, "")
        ),
        tune_service.CandidateResult(
            Candidate("occ", "x", "", c.input.launch, True), tune_service.Resources(40, 0, 0, 0.5, "")
        ),
        tune_service.CandidateResult(
            Candidate("grid", "x", "", c.input.launch, launch_changed=True), tune_service.Resources(18, 0, 0, 0.5, "")
        ),
    ]
    judged = Candidate("capped", "registers", "", c.input.launch, True, judged=True)  # its generator ruled already
    worse.append(tune_service.CandidateResult(judged, tune_service.Resources(32, 8, 0, 0.5, "")))
    tune_service._prune(worse, Space())
    assert [r.status for r in worse[1:]] == ["pruned", "pruned", "not run", "not run"]
    assert "spills 8 bytes (the input 0)" in worse[1].problem and "occupancy 50% (the input 100%)" in worse[2].problem


# ---------------------------------------------------------------- the register and warp-role generators


def spec_file(tmp_path: Path, kernel: str, grid: int, block: int, params: str) -> Path:
    path = tmp_path / f"{kernel}.toml"
    path.write_text(f'kernel = "{kernel}"\ngrid = {grid}\nblock = {block}\n{params}')
    return path


NBODY_PARAMS = """
[[param]]
name = "pos"
type = "f32"
count = 131072
[[param]]
name = "acc"
type = "f32"
count = 131072
output = true
[[param]]
name = "n"
type = "s32"
value = 32768
[[param]]
name = "eps2"
type = "f32"
value = 0.01
"""
STAGED_PARAMS = """
[[param]]
name = "a"
type = "f32"
count = 2048
[[param]]
name = "out"
type = "f32"
count = 512
output = true
[[param]]
name = "n"
type = "u32"
value = 4
"""


def test_register_variants_that_spill_inside_loops_are_notes_not_candidates(ptxas: str, tmp_path: Path) -> None:
    """nbody_tile is register-limited: the pass's caps buy blocks per SM, and the tighter one spills in the
    body loop (ptxas's numbers, mapped to loops through the SASS): it is never timed."""
    spec = spec_file(tmp_path, "nbody_tile", 64, 128, NBODY_PARAMS)
    c = context(spec, PRESSURE, registers=True, generators=["registers"])
    found = make_candidates(c, "t")
    pruned = [n.split(": not timed: ")[0] for n in c.notes if "adds spills inside loops" in n]
    assert pruned and len(found) > 1, c.notes
    assert not {x.name for x in found} & set(pruned)
    assert all(x.origin == "registers" and x.judged and x.code_changed and not x.launch_changed for x in found[1:])
    assert all(x.launch == c.input.launch for x in found)


def test_register_candidates_are_minimal_edits_and_the_space_narrows_them(ptxas: str) -> None:
    """long_live_ranges: nvcc's `.minnctapersm 2` forces 944 bytes of spills; relaxing it is one line."""
    c = context(LONG_LIVE_RANGES, PRESSURE, registers=True, generators=["registers"])
    found = {x.name: x for x in make_candidates(c, "t")}
    relaxed = found["registers:.minnctapersm 2 -> 1"]
    diff = difflib.unified_diff(c.source.text.splitlines(), relaxed.text.splitlines(), lineterm="", n=0)
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-.minnctapersm 2",
        "+.minnctapersm 1",
    ]
    assert dict(relaxed.settings)["kinds"] == ("minnctapersm",)
    narrow = context(LONG_LIVE_RANGES, PRESSURE, registers=["minnctapersm"], generators=["registers"])
    assert [x.name for x in make_candidates(narrow, "t")] == ["input", "registers:.minnctapersm 2 -> 1"]
    assert any("changes smem-spilling, which the space leaves out" in n for n in narrow.notes), narrow.notes


def test_warp_role_refusals_are_notes_naming_every_setting(ptxas: str) -> None:
    """plain_copy has no staged tile loop: no candidate, and every setting tried is named with the pass's reason."""
    c = context(warp_roles=True, generators=["warp-roles"])
    assert [x.name for x in make_candidates(c, "t")] == ["input"]
    refusals = [n.removeprefix("warp-roles ").split(": no candidate: ") for n in c.notes]
    assert refusals and all(len(r) == 2 and r[1] for r in refusals), c.notes
    named = sorted(
        (v, p, int(s))
        for r in refusals
        for label in r[0].split(", ")  # `split P=default/1 S=2/3/4`: every combination of those values
        for words in [re.fullmatch(r"(\S+) P=(\S+) S=(\S+)", label).groups()]
        for v, p, s in itertools.product(*(w.split("/") for w in words))
    )
    settings = c.space.warp_roles.settings()
    assert named == sorted((v, "default" if p is None else str(p), s) for v, p, s in settings)


def test_a_split_for_another_block_than_the_spec_launches_is_no_candidate(ptxas: str, tmp_path: Path) -> None:
    """The pass splits staged for its declared 128 threads; a spec launching 64 would make other consumers."""
    spec = spec_file(tmp_path, "staged", 4, 64, STAGED_PARAMS)
    roles = {"variant": ["split"], "producer_warps": ["default"], "stages": [2]}
    c = context(spec, STAGED, warp_roles=roles, generators=["warp-roles"])
    assert [x.name for x in make_candidates(c, "t")] == ["input"]
    assert c.notes == [
        "warp-roles split P=default S=2: no candidate: the pass splits for the kernel's declared "
        "block 128; the spec launches 64"
    ]


def test_every_sample_spec_names_the_ptx_that_holds_its_kernel() -> None:
    from conftest import SPEC_PTX

    from ptxtool.services.launch import find_kernel

    specs = sorted(SAMPLES.glob("*.toml"))
    assert set(SPEC_PTX) == {p.stem for p in specs}
    for path in specs:
        spec = load_spec(str(path))
        assert spec.ptx == SAMPLES / SPEC_PTX[path.stem] and spec.ptx.is_file()
        find_kernel(parse(spec.ptx.read_text()), spec.kernel, str(spec.ptx))


def test_the_spec_ptx_key_is_checked(tmp_path: Path) -> None:
    text = (SAMPLES / "plain_copy.toml").read_text()
    path = tmp_path / "copy.toml"
    path.write_text(text)
    assert load_spec(str(path)).ptx == tmp_path / "comm.sm90.ptx"  # relative to the spec; a copy still loads
    for value, message in (("3", "`ptx` must be str; got 3"), ('""', "`ptx` must name a file")):
        path.write_text(text.replace('ptx = "comm.sm90.ptx"', f"ptx = {value}"))
        with pytest.raises(InputError, match=message):
            load_spec(str(path))


# ---------------------------------------------------------------- statistics and the decision


def test_order_statistics_interval() -> None:
    assert order_statistic_rank(5, 0.9) == 1 and order_statistic_rank(5, 0.95) is None
    assert order_statistic_rank(100, 0.95) == 40  # the textbook interval: the 40th and 61st of 100
    interval = median_interval(list(range(1, 101)), 0.95)
    assert (interval.low, interval.high, interval.median) == (40, 61, 50.5)
    assert median_interval([1.0, 2.0], 0.95).low is None


def test_interval_covers_the_median_as_promised() -> None:
    rng = random.Random(7)
    hits = 0
    for _ in range(400):
        sample = [rng.lognormvariate(0, 0.5) for _ in range(41)]  # skewed, median 1
        interval = median_interval(sample, 0.9)
        hits += interval.low <= 1.0 <= interval.high
    assert 0.88 <= hits / 400 <= 0.98


def test_bonferroni() -> None:
    assert corrected(0.95, 5) == pytest.approx(0.99) and corrected(0.95, 0) == 0.95
    assert paired_ratios([2.0, 3.0, 4.0], [1.0, 1.5]) == [2.0, 2.0]


def _result(name: str, status: str, ratio: Interval | None, kernel: Interval | None = None, launch: bool = False):
    c = context(cache_operators=[])
    candidate = Candidate(name, "t", "", c.input.launch, not launch, launch)
    r = tune_service.CandidateResult(candidate, tune_service.Resources(1, 0, 0, 1.0, ""), status)
    r.ratio, r.kernel_ratio = ratio, kernel
    return r


def _iv(median: float, low: float, high: float) -> Interval:
    return Interval(median, low, high, 0.99, 100)


def test_the_input_stays_unless_a_candidate_is_faster_beyond_noise() -> None:
    space = Space()
    base = _result("input", "input", None)
    noise = _result("noise", "identical", _iv(0.98, 0.95, 1.01))
    slower = _result("slower", "identical", _iv(1.2, 1.1, 1.3))
    assert tune_service.decide([base, noise, slower], space) == "input"
    faster = _result("faster", "identical", _iv(0.97, 0.96, 0.98))
    fastest_but_wrong = _result("wrong", "differ", _iv(0.5, 0.4, 0.6))
    refused = _result("refused", "refused", None)
    assert tune_service.decide([base, noise, faster, fastest_but_wrong, refused], space) == "faster"
    assert tune_service.decide([base, noise, faster], read_layer(space, {"min_gain": 0.03}, "t")) == "input"
    unsure = _result("unsure", "identical", Interval(0.5, None, None, 0.99, 3))
    assert tune_service.decide([base, unsure], space) == "input"


def test_neighbour_objective_keeps_the_kernel_itself_honest() -> None:
    space = read_layer(Space(), {"objective": "neighbour"}, "t")
    base = _result("input", "input", None)
    starves = _result("grid=8", "identical", _iv(0.8, 0.75, 0.85), kernel=_iv(3.0, 2.8, 3.2), launch=True)
    hint = _result("hint", "identical", _iv(0.9, 0.88, 0.92), kernel=_iv(1.0, 0.99, 1.01))
    assert tune_service.decide([base, starves, hint], space) == "hint"
    assert tune_service.decide([base, starves, hint], read_layer(space, {"kernel_slack": 3.0}, "t")) == "grid=8"


def test_assess_pairs_rounds_and_reports_the_neighbour() -> None:
    rng = random.Random(3)
    reference = [10 + rng.random() for _ in range(60)]
    faster = [t * 0.9 for t in reference]
    results = [_result("input", "input", None), _result("fast", "not run", None)]
    measurements = [
        Measurement(
            "input",
            0,
            "input",
            times_us=reference,
            reference_us=reference,
            neighbour_us=[12.0] * 10,
            neighbour_alone_us=[10.0] * 10,
        ),
        Measurement(
            "fast",
            0,
            "identical",
            times_us=faster,
            reference_us=reference,
            neighbour_us=[11.0] * 10,
            neighbour_reference_us=[12.0] * 10,
            neighbour_alone_us=[10.0] * 10,
        ),
    ]
    confidence = tune_service._assess(results, measurements, Space())
    assert confidence == pytest.approx(0.95)
    fast = results[1]
    assert fast.status == "identical" and fast.ratio.median == pytest.approx(0.9) and fast.ratio.high < 1
    assert fast.neighbour_slowdown.median == pytest.approx(1.1) and results[
        0
    ].neighbour_slowdown.median == pytest.approx(1.2)
    assert tune_service.decide(results, Space()) == "fast"


# ---------------------------------------------------------------- cache, output, no GPU


def test_cache_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path))
    m = [Measurement("input", 0, "input", times_us=[1.0, 2.0]), Measurement("x", 0, "differ", "x[0] differs")]
    assert tune_service._cache_read("k" * 64) is None
    tune_service._cache_write("k" * 64, m, ["GPU 0: all 200 rounds"])
    back, stopped = tune_service._cache_read("k" * 64)
    assert back == m and stopped == ["GPU 0: all 200 rounds", "from the cache"]
    c = context(cache_operators=[], grid=[20])
    spec = str(SAMPLES / "plain_copy.toml")
    device = DeviceInfo("H200", "sm_90", 132, 60 << 20, 140 << 30, "13.0")
    found = make_candidates(c, "t")
    key = tune_service._cache_key(c.source, spec, c.space, found, [device])
    assert key == tune_service._cache_key(c.source, spec, c.space, found, [device])
    assert key != tune_service._cache_key(c.source, spec, read_layer(c.space, {"budget_s": 5}, "t"), found, [device])
    other = DeviceInfo("H100", "sm_90", 132, 50 << 20, 80 << 30, "13.0")
    assert key != tune_service._cache_key(c.source, spec, c.space, found, [other])
    assert key != tune_service._cache_key(c.source, spec, c.space, found[:1], [device])


def test_output_is_never_the_input_unchanged(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(COMM.read_text())
    source = read_source(str(ptx))
    c = context(cache_operators=[])
    winner = tune_service.CandidateResult(Candidate("input", "input", source.text, c.input.launch), None)
    before = ptx.stat().st_mtime_ns
    assert tune_service._write(str(ptx), source, winner) is None and ptx.stat().st_mtime_ns == before
    assert tune_service._write(str(tmp_path / "best.ptx"), source, winner) == str(tmp_path / "best.ptx")
    assert (tmp_path / "best.ptx").read_text() == source.text


@pytest.mark.skipif(probe() is None, reason="a GPU driver is present")
def test_no_driver_exits_3_and_points_at_dry_run(tmp_path: Path) -> None:
    out = tmp_path / "best.ptx"
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "-o", str(out), "--json")
    assert result.exit_code == 3, result.output
    assert "no CUDA driver" in result.output and "--dry-run" in result.output and "Traceback" not in result.output
    assert not out.exists() and not result.stdout.strip()


def test_no_driver_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 3 wherever the tests run: the driver's absence as Gpu() reports it."""

    def no_gpu(*_args, **_kwargs):
        raise EnvironmentProblem("no CUDA driver: simulated")

    monkeypatch.setattr(tune_service, "Gpu", no_gpu)
    result = invoke(str(COMM), "-s", str(SAMPLES / "plain_copy.toml"), "--gpus", "all")
    assert result.exit_code == 3 and "no CUDA driver: simulated" in result.output and "--dry-run" in result.output


@pytest.mark.skipif(probe() is None, reason="a GPU driver is present")
def test_a_worker_process_reports_its_error_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spawned worker fails where the GPU is missing, and the parent raises what it said (not a traceback)."""
    monkeypatch.setattr(tune_service, "_devices", lambda gpus: [DeviceInfo("fake", "sm_90", 1, 1, 1, "13.0")])
    options = tune_service.Options(str(SAMPLES / "plain_copy.toml"), config={"cache_operators": []}, fresh=True)
    with pytest.raises(EnvironmentProblem, match="no CUDA driver"):
        tune_service.execute(options, [read_source(str(COMM))])


def test_neighbour_kernel_assembles(assemble) -> None:
    """As shipped (PTX 7.0 for sm_75: any driver JITs it for its GPU), and raised to sm_90 as an H200's JIT sees it."""
    hopper = worker.NEIGHBOUR_PTX.replace(".version 7.0", ".version 7.8").replace(".target sm_75", ".target sm_90")
    for text in (worker.NEIGHBOUR_PTX, hopper):
        cubin, log = assemble(text)
        assert cubin is not None, log

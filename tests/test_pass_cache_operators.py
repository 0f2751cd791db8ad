"""The cache-operator pass on real PTX: fixture pairs, the corpus kernels (what it rewrites, what it must leave
coherent), idempotence, and the settings that switch policies per kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES

from ptxtool.analysis.memory import memory_facts
from ptxtool.isa.caching import access_bytes, with_modifier
from ptxtool.passes import run_pipeline
from ptxtool.passes.cache_operators import Policy, Settings, cache_operators
from ptxtool.services.optimize import settings_from_config
from ptxtool.syntax import ast, format_module, parse

DATA = Path(__file__).parent / "data" / "passes" / "cache_operators"
FIXTURES = sorted(p.name.removesuffix(".input.ptx") for p in DATA.glob("*.input.ptx"))
CORPUS_FILES = ("comm.sm90.ptx", "comm.sm90.lineinfo.ptx", "elementwise.sm90.ptx", "gemm_smem.sm80.ptx")
CORPUS_FILES += ("pressure.sm80.ptx",)
AGGRESSIVE = Settings(noalias=("*",), l2_evict_first=Policy(True), unsafe_volatile_nc=Policy(True))


def _fixture(name: str) -> tuple[str, str, Settings]:
    text = (DATA / f"{name}.input.ptx").read_text()
    table = json.loads(text.splitlines()[0].removeprefix("// settings:"))
    _, settings = settings_from_config(table, name)
    return text, (DATA / f"{name}.expected.ptx").read_text(), settings


def _module(name: str) -> ast.Module:
    return parse((SAMPLES / name).read_text())


def _rewrites(report, kernel: str) -> list[tuple[str, str]]:
    return [(r.before, r.after) for r in report.rewrites if r.kernel == kernel]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_pairs(name: str) -> None:
    source, expected, settings = _fixture(name)
    out, _ = cache_operators(parse(source), settings)
    assert format_module(out) == expected
    again, report = cache_operators(parse(expected), settings)
    assert format_module(again) == expected and not report.rewrites


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_outputs_assemble(name: str, assemble) -> None:
    _, expected, _ = _fixture(name)
    cubin, messages = assemble(expected)
    assert cubin is not None, messages


@pytest.mark.parametrize("settings", [Settings(), AGGRESSIVE], ids=["default", "aggressive"])
@pytest.mark.parametrize("name", CORPUS_FILES)
def test_twice_equals_once(name: str, settings: Settings) -> None:
    once, _ = cache_operators(_module(name), settings)
    twice, report = cache_operators(once, settings)
    assert twice == once and not report.rewrites
    assert format_module(twice) == format_module(once)


def test_ring_buffer_stays_coherent() -> None:
    """comm's ring_dispatch: the acquire/volatile flag loads, the release store and the ring reads (data the kernel
    writes) are never rewritten, even with every policy on, --noalias and --unsafe-volatile-nc."""
    module = _module("comm.sm90.ptx")
    out, report = cache_operators(module, AGGRESSIVE)
    assert _rewrites(report, "ring_dispatch") == []
    ring = next(k for k in out.kernels if k.name == "ring_dispatch")
    assert ring == next(k for k in module.kernels if k.name == "ring_dispatch")
    kept = {(s.mnemonic, s.reason) for s in report.skipped if s.kernel == "ring_dispatch"}
    assert ("ld.acquire.sys.global.s32", "ordered/volatile/scoped load: stays coherent") in kept
    assert ("ld.volatile.global.s32", "--unsafe-volatile-nc: not applied to a poll of a flag") in kept
    assert any(m == "ld.global.v4.u32" and "writes ring_dispatch_param_1" in r for m, r in kept)


def test_plain_copy_default_and_noalias() -> None:
    """Parameters may alias: without --noalias the copy's load is a stream but not `.nc`; with it, both."""
    _, report = cache_operators(_module("comm.sm90.ptx"))
    assert _rewrites(report, "plain_copy") == [
        ("ld.global.v4.u32", "ld.global.L1::no_allocate.L2::256B.v4.u32"),
        ("st.global.v4.u32", "st.global.cs.v4.u32"),
    ]
    assert any("may alias plain_copy_param_0" in s.reason for s in report.skipped if s.kernel == "plain_copy")
    _, report = cache_operators(_module("comm.sm90.ptx"), Settings(noalias=("plain_copy",)))
    assert _rewrites(report, "plain_copy")[0] == ("ld.global.v4.u32", "ld.global.nc.L1::no_allocate.L2::256B.v4.u32")
    assert [r.sass for r in report.rewrites if r.kernel == "plain_copy"] == [("CONSTANT", "NA", "LTC256B"), ("EF",)]


def test_author_choices_left_alone() -> None:
    """cache_ops_mix spells out .cg/.ca/.cs/.lu/.cv and .wb/.cg/.wt: none of them is changed."""
    _, report = cache_operators(_module("comm.sm90.ptx"), AGGRESSIVE)
    assert _rewrites(report, "cache_ops_mix") == []
    assert sum("the author's choice" in s.reason for s in report.skipped if s.kernel == "cache_ops_mix") == 8


@pytest.mark.parametrize("name", ["gemm_smem.sm80.ptx", "pressure.sm80.ptx"])
def test_reused_data_gets_no_streaming_hints(name: str) -> None:
    """Tiled GEMM inputs, stencil neighbours and n-body tiles are reused: no rewrite, even with --noalias."""
    out, report = cache_operators(_module(name), Settings(noalias=("*",), l2_evict_first=Policy(True)))
    assert report.rewrites == [] and out == _module(name)


def test_elementwise_kernels() -> None:
    _, report = cache_operators(_module("elementwise.sm90.ptx"), Settings(noalias=("*",)))
    saxpy = _rewrites(report, "saxpy")
    assert saxpy == [("ld.global.nc.f32", "ld.global.nc.L1::no_allocate.f32")]  # y is read and written: kept
    hadd2 = _rewrites(report, "_Z5hadd2iPK7__half2S1_PS_")
    assert hadd2 == [("ld.global.u32", "ld.global.nc.L1::no_allocate.u32")] * 2 + [
        ("st.global.u32", "st.global.cs.u32")
    ]
    # 2-byte elements: a warp covers 64 bytes, less than a line: .nc only
    assert _rewrites(report, "_Z9bf16_geluiPK13__nv_bfloat16PS_") == [("ld.global.u16", "ld.global.nc.u16")]
    # the libm table is a module-level global, not a parameter: left alone
    assert any("unknown origin (global:__cudart_i2opi_f)" in s.reason for s in report.skipped)


def test_policies_switch_per_kernel() -> None:
    module = _module("comm.sm90.ptx")
    off = Settings(readonly=Policy(False), streaming=Policy(False), stores=Policy(False))
    assert cache_operators(module, off)[1].rewrites == []
    only_copy = Settings(streaming=Policy(True, include=("plain_*",)), stores=Policy(True, exclude=("plain_copy",)))
    _, report = cache_operators(module, only_copy)
    assert [(r.kernel, r.before) for r in report.rewrites] == [("plain_copy", "ld.global.v4.u32")]
    _, report = cache_operators(module, Settings(store_hint="L1::no_allocate"))
    assert ("st.global.v4.u32", "st.global.L1::no_allocate.v4.u32") in _rewrites(report, "plain_copy")


def test_cpp_kernels_by_plain_name() -> None:
    _, report = cache_operators(_module("elementwise.sm90.ptx"), Settings(noalias=("hadd2",)))
    made_nc = {r.kernel for r in report.rewrites if ".nc" in r.after and ".nc" not in r.before}
    assert made_nc == {"_Z5hadd2iPK7__half2S1_PS_"}
    _, report = cache_operators(_module("elementwise.sm90.ptx"), Settings(streaming=Policy(True, exclude=("hadd*",))))
    assert not any(r.kernel.startswith("_Z5hadd2") and r.before.startswith("ld") for r in report.rewrites)


def test_pipeline_runs_by_name() -> None:
    module = _module("comm.sm90.ptx")
    out, reports = run_pipeline(module, ("cache-operators",))
    assert [r.name for r in reports] == ["cache-operators"] and out == cache_operators(module)[0]


def test_modifier_order_and_width() -> None:
    i = ast.Instruction("ld", ("global", "v4", "u32"))
    for q in ("L2::256B", "nc", "L2::cache_hint", "L1::no_allocate"):
        i = with_modifier(i, q)
    assert i.mnemonic == "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32"
    assert access_bytes(i) == 16
    assert with_modifier(ast.Instruction("st", ("global", "f64")), "cs").mnemonic == "st.global.cs.f64"
    assert access_bytes(ast.Instruction("ld", ("global", "v2", "f16x2"))) == 8


@pytest.mark.parametrize("name", ["reduce.sm80.ptx", "reduce.sm90.ptx"])
def test_atomics_keep_loads_coherent_even_with_noalias(name: str) -> None:
    """block_sum, count_positive, histogram and cas_max update their result with atomics: other agents' writes are
    observable, so their input loads get streaming hints but never `.nc`, alias-free or not."""
    module = _module(name)
    atomic = {k.name for k in module.kernels if any(i.opcode in ("atom", "red") for i in ast.instructions(k.body))}
    assert {"block_sum", "count_positive", "_Z9histogramPKhPji", "_Z7cas_maxPfPKfi"} <= atomic
    _, report = cache_operators(module, Settings(noalias=("*",)))
    made_nc = {r.kernel for r in report.rewrites if ".nc" in r.after and ".nc" not in r.before}
    assert made_nc and not made_nc & atomic  # the atomic-free match_and_redux still gets it
    assert any("atom" in s.reason and s.reason.startswith(".nc: the kernel may observe") for s in report.skipped)


def test_sass_promise_follows_the_target_used() -> None:
    """ptxas shows `.L2::256B` as LTC128B on sm_80: the promise follows `Settings.arch` when the service gives it."""
    module = _module("comm.sm90.ptx")
    _, report = cache_operators(module, Settings(noalias=("plain_copy",)))
    assert ("CONSTANT", "NA", "LTC256B") in [r.sass for r in report.rewrites if r.kernel == "plain_copy"]
    _, report = cache_operators(module, Settings(noalias=("plain_copy",), arch="sm_80"))
    assert ("CONSTANT", "NA", "LTC128B") in [r.sass for r in report.rewrites if r.kernel == "plain_copy"]


def test_typed_offsets_drive_the_decisions() -> None:
    """The pass reads typed affine offsets: elementwise's saxpy x load is split by block, 4 bytes per lane."""
    module = _module("elementwise.sm90.ptx")
    saxpy = next(k for k in module.kernels if k.name == "saxpy")
    x = next(a for a in memory_facts(module, saxpy).accesses if a.param == "saxpy_param_2")
    assert x.offset.coefficient("%tid.x") == 4 and {"%ctaid.x", "%tid.x"} <= x.offset.specials

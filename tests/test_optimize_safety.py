"""The cache-operator pass never adds `.nc` where something may write the data while the kernel runs, and still
adds it to the near-miss that is safe: each shape as CUDA compiled by the wheel's nvcc (tests/data/safety/*.cu and
the PTX made from it) and as hand-written PTX, with default settings and with `--noalias '*'`."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import nc_added

from ptxtool import isa
from ptxtool.analysis.memory import memory_facts
from ptxtool.isa.caching import with_modifier
from ptxtool.lint import load_settings
from ptxtool.passes.cache_operators import Settings, cache_operators
from ptxtool.services.lint import lint_file
from ptxtool.sources import read_source
from ptxtool.syntax import ast, format_module, parse

DATA = Path(__file__).parent / "data" / "safety"
SAMPLES = Path(__file__).parent.parent / "samples"
DEFAULT, NOALIAS = Settings(), Settings(noalias=("*",))
BOTH = pytest.mark.parametrize("settings", [DEFAULT, NOALIAS], ids=["default", "noalias"])


def _rewrites(text: str, settings: Settings, kernel: str) -> dict[int, str]:
    _, report = cache_operators(parse(text), settings)
    return {r.line: r.after for r in report.rewrites if r.kernel == kernel}


def _cuda(name: str) -> str:
    return (DATA / f"{name}.ptx").read_text()


# ---------------------------------------------------------------- CUDA, compiled by the wheel's nvcc


def test_issue_kernel_1_module_variable_alias() -> None:
    """symbol_alias writes g_buf and reads src (the host passes src = g_buf): no `.nc` by default; `--noalias`
    declares src `__restrict__`, and then `.nc` is the user's promise."""
    text = _cuda("symbol_alias")
    assert nc_added(text, DEFAULT) == {}
    _, report = cache_operators(parse(text), DEFAULT)
    assert any("writes module variable g_buf, which may alias" in s.reason for s in report.skipped)
    assert nc_added(text, NOALIAS) == {"_Z12symbol_aliasPKf": ["ld.global.nc.f32"]}


@BOTH
def test_issue_kernel_2_acquire_in_a_callee(settings: Settings) -> None:
    """consumer waits in a non-inlined callee with an acquire load: another grid writes `data`, so no `.nc`
    with or without `--noalias` (the streaming hint, a hint only, may stay)."""
    text = _cuda("consumer")
    assert nc_added(text, settings) == {}
    _, report = cache_operators(parse(text), settings)
    assert any("a call to _Z10wait_readyv: ld with .acquire .gpu" in s.reason for s in report.skipped)


def test_near_misses_keep_their_nc() -> None:
    """A kernel that only reads a module variable, and one that calls a pure function: `.nc` with --noalias
    (their other pointer is written), not by default."""
    text = _cuda("near_miss")
    assert nc_added(text, DEFAULT) == {}
    assert set(nc_added(text, NOALIAS)) == {"reads_symbol", "pure_callee"}


@BOTH
def test_effects_behind_calls(settings: Settings) -> None:
    """A fence two non-inlined calls deep, and a call through a function pointer loaded from a table."""
    text = _cuda("callees")
    assert nc_added(text, settings) == {}
    _, report = cache_operators(parse(text), settings)
    reasons = {s.kernel: s.reason for s in report.skipped if s.reason.startswith(".nc")}
    assert "a call to _Z10outer_stepv: a call to _Z11inner_fencev: membar.gl" in reasons["fence_two_calls_deep"]
    assert "an indirect call" in reasons["indirect_call"] or "unknown origin" in reasons["indirect_call"]


AGENT_KERNELS = {
    "volatile_flag": "ld with .volatile",
    "relaxed_flag": "ld with .gpu .relaxed",
    "release_flag": "st with .release .sys",
    "counts": "atom.global.add.u32",
    "fenced": "membar.sys",
    "dependent_launch": "griddepcontrol.wait",
    "cluster_synced": "barrier.cluster.wait",
    "mbarrier_waits": "mbarrier.try_wait",
    "weak_poll": "ld.global.cg.s32 polls",
    "bulk_store": "fence.proxy.async",
}


@BOTH
def test_other_agents_block_nc_in_cuda_kernels(settings: Settings) -> None:
    text = _cuda("agents")
    assert nc_added(text, settings) == {}
    _, report = cache_operators(parse(text), settings)
    reasons = {s.kernel: s.reason for s in report.skipped if s.reason.startswith(".nc")}
    for kernel, why in AGENT_KERNELS.items():
        assert "may observe other agents' writes" in reasons[kernel] and why in reasons[kernel], kernel


def test_streaming_only_where_the_grid_touches_once() -> None:
    """bias[i] is read by every blockIdx.y, and again on every trip of an outer loop: no streaming hint there;
    the split input and output, and a 1-D grid-stride copy, keep theirs."""
    text = _cuda("streaming")
    rows = _rewrites(text, NOALIAS, "bias_rows")
    assert rows == {42: "ld.global.nc.L1::no_allocate.f32", 45: "ld.global.nc.f32", 48: "st.global.cs.f32"}
    rounds = _rewrites(text, NOALIAS, "bias_rounds")
    assert all("L1::" not in after for line, after in rounds.items() if line in (103, 104))
    copy = _rewrites(text, DEFAULT, "grid_stride_copy")
    assert copy == {154: "ld.global.L1::no_allocate.L2::256B.v4.u32", 155: "st.global.cs.v4.u32"}


# ---------------------------------------------------------------- hand-written PTX

_KERNEL = """\
.version 8.3
.target sm_90
.address_size 64
{globals}
{funcs}
.visible .entry k(.param .u64 k_src, .param .u64 k_dst, .param .u64 k_flag)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<4>;
    .shared .align 128 .b8 tile[1024];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [k_src];
    ld.param.u64 %rd2, [k_dst];
    ld.param.u64 %rd3, [k_flag];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd9, %rd3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.s32 %rd6, %r4, 4;
    add.s64 %rd7, %rd4, %rd6;
    add.s64 %rd8, %rd5, %rd6;
{hazard}
    ld.global.f32 %f1, [%rd7];
    {store}
    ret;
}}
"""
_STORE = "st.global.f32 [%rd8], %f1;"
_POLL_LOOP = """\
POLL:
    ld.global.u32 %r9, [%rd9];
    setp.eq.u32 %p2, %r9, 0;
    @%p2 bra POLL;"""
_POLL_FUNC = """\
.func wait_flag(.param .b64 wait_flag_p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [wait_flag_p];
SPIN:
    ld.global.u32 %r1, [%rd1];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra SPIN;
    ret;
}"""
_CALL_WAIT = """\
    {
    .param .b64 arg0;
    st.param.b64 [arg0], %rd9;
    call.uni wait_flag, (arg0);
    }"""
_INDIRECT = """\
    mov.u64 %rd10, helper;
    {
    .param .b32 arg0;
    st.param.b32 [arg0], %r1;
    proto: .callprototype _ (.param .b32 _);
    call %rd10, (arg0), proto;
    }"""
_HELPER = """\
.func helper(.param .b32 helper_p)
{
    ret;
}"""

# name -> (hazard lines in the kernel, module-level functions and variables): each lets the kernel observe other
# agents' writes, or write memory no analysis can place
HAZARDS: dict[str, tuple[str, str]] = {
    "ld.volatile": ("ld.volatile.global.u32 %r9, [%rd9];", ""),
    "ld.relaxed": ("ld.relaxed.gpu.global.u32 %r9, [%rd9];", ""),
    "ld.acquire": ("ld.acquire.sys.global.u32 %r9, [%rd9];", ""),
    "ld.mmio": ("ld.mmio.relaxed.sys.global.u32 %r9, [%rd9];", ""),
    "st.release": ("st.release.gpu.global.u32 [%rd9], %r1;", ""),
    "st.relaxed.cta": ("st.relaxed.cta.global.u32 [%rd9], %r1;", ""),
    "st.volatile": ("st.volatile.global.u32 [%rd9], %r1;", ""),
    "atom": ("atom.global.add.u32 %r9, [%rd9], 1;", ""),
    "red": ("red.global.add.u32 [%rd9], 1;", ""),
    "atom.shared": ("atom.shared.add.u32 %r9, [tile], 1;", ""),
    "red.release": ("red.release.gpu.global.add.u32 [%rd9], 1;", ""),
    "fence.sc": ("fence.sc.gpu;", ""),
    "fence.acq_rel": ("fence.acq_rel.sys;", ""),
    "membar": ("membar.gl;", ""),
    "fence.proxy.async": ("fence.proxy.async;", ""),
    "griddepcontrol.wait": ("griddepcontrol.wait;", ""),
    "mbarrier.try_wait": ("mbarrier.try_wait.shared::cta.b64 %p2, [bar], %rd6;", ""),
    "mbarrier.test_wait": ("mbarrier.test_wait.parity.shared::cta.b64 %p2, [bar], 0;", ""),
    "barrier.cluster.wait": ("barrier.cluster.arrive;\n    barrier.cluster.wait;", ""),
    "cp.async.bulk store": ("cp.async.bulk.global.shared::cta.bulk_group [%rd9], [tile], 128;", ""),
    "cp.reduce.async.bulk": ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd9], [tile], 128;", ""),
    "tensor store": ("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd3, {%r1}], [tile];", ""),
    "weak poll": (_POLL_LOOP, ""),
    "poll in a callee": (_CALL_WAIT, _POLL_FUNC),
    "extern callee": ("call.uni ext_fn;", ".extern .func ext_fn();"),
    "indirect callee": (_INDIRECT, _HELPER),
    "st through a pointer loaded from a module variable": (
        "ld.global.u64 %rd10, [g_ptr];\n    st.global.u32 [%rd10], %r1;",
        ".global .align 8 .u64 g_ptr;",
    ),
}


def _hand(hazard: str = "", funcs: str = "", store: str = _STORE, globals_: str = "") -> str:
    return _KERNEL.format(hazard=hazard, funcs=funcs, store=store, globals=globals_)


@pytest.mark.parametrize("name", list(HAZARDS))
def test_hand_written_shapes_assemble(name: str, assemble) -> None:
    """The shapes are real PTX (ptxas takes them), and so is the pass's output."""
    text = _hand(*HAZARDS[name])
    cubin, messages = assemble(text)
    assert cubin is not None, messages
    out, _ = cache_operators(parse(text), NOALIAS)
    assert assemble(format_module(out))[0] is not None


@BOTH
@pytest.mark.parametrize("name", list(HAZARDS))
def test_hand_written_hazards_block_nc(name: str, settings: Settings) -> None:
    text = _hand(*HAZARDS[name])
    assert nc_added(text, settings) == {}
    _, report = cache_operators(parse(text), settings)
    src = [s.reason for s in report.skipped if s.line == text.splitlines().index("    ld.global.f32 %f1, [%rd7];") + 1]
    assert any(r.startswith(".nc:") for r in src), src


def test_hand_written_near_miss() -> None:
    """The same kernel without a hazard: `.nc` with --noalias (dst is written), not by default."""
    assert nc_added(_hand(), DEFAULT) == {}
    assert nc_added(_hand(), NOALIAS) == {"k": ["ld.global.nc.L1::no_allocate.f32"]}


_MODULE_VARIABLE = ".global .align 4 .b8 g_var[4096];"
MODULE_WRITES = {
    "st to the symbol": "st.global.f32 [g_var], %f1;",
    "st through its generic address": "mov.u64 %rd10, g_var;\n    cvta.global.u64 %rd11, %rd10;\n"
    "    st.f32 [%rd11], %f1;",
    "st to an element": "mov.u64 %rd10, g_var;\n    add.s64 %rd11, %rd10, %rd6;\n    st.global.f32 [%rd11], %f1;",
}


@pytest.mark.parametrize("name", list(MODULE_WRITES))
def test_module_variable_writes_may_alias_parameters(name: str, assemble) -> None:
    """The kernel's only store goes to a module variable: by default src may be that variable, so no `.nc`; the
    near-miss stores to shared memory and gets `.nc` by default."""
    text = _hand(store=MODULE_WRITES[name], globals_=_MODULE_VARIABLE)
    assert assemble(text)[0] is not None
    assert nc_added(text, DEFAULT) == {}
    assert nc_added(text, NOALIAS) == {"k": ["ld.global.nc.L1::no_allocate.f32"]}
    shared = _hand(store="st.shared.f32 [tile], %f1;", globals_=_MODULE_VARIABLE)
    assert nc_added(shared, DEFAULT) == {"k": ["ld.global.nc.L1::no_allocate.f32"]}


def test_unsafe_volatile_nc_is_the_one_exception() -> None:
    """--unsafe-volatile-nc rewrites a volatile load of data the kernel never writes, and warns."""
    from ptxtool.passes.cache_operators import Policy

    text = _hand(hazard="ld.volatile.global.f32 %f2, [%rd7+4];")
    _, report = cache_operators(parse(text), Settings(noalias=("*",), unsafe_volatile_nc=Policy(True)))
    assert [r.after for r in report.rewrites if r.before.startswith("ld.volatile")] == [
        "ld.global.nc.L1::no_allocate.L2::256B.f32"
    ]
    assert report.warnings and "OUTSIDE the PTX memory model" in report.warnings[0]


# ---------------------------------------------------------------- old and odd inputs

_OLD = """\
.version {version}
.target {target}
.entry copy (.param .u64 copy_src, .param .u64 copy_dst)
{{
    .reg .u32 %r<6>;
    .reg .u64 %rd<8>;
    ld.param.u64 %rd1, [copy_src];
    ld.param.u64 %rd2, [copy_dst];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.u64 %rd4, %rd1, %rd3;
    add.u64 %rd5, %rd2, %rd3;
    ld.global.u32 %r5, [%rd4];
    st.global.u32 [%rd5], %r5;
    exit;
}}
"""


@pytest.mark.parametrize(
    ("version", "target", "expected"),
    [
        ("1.4", "sm_13", {}),  # .cs needs PTX 2.0 and sm_20; .nc 3.1; .L1::no_allocate 7.4
        ("7.0", "sm_75", {17: "st.global.cs.u32"}),
        ("7.4", "sm_75", {16: "ld.global.L1::no_allocate.u32", 17: "st.global.cs.u32"}),
    ],
)
def test_old_versions_get_only_what_they_can_take(version: str, target: str, expected: dict, assemble) -> None:
    """A `.version 1.4` file assembled for sm_75 gets no `.cs`; every qualifier is checked against the file's
    `.version`, its `.target` and the target used, and the output assembles with the wheel's ptxas."""
    text = _OLD.format(version=version, target=target)
    assert assemble(text)[0] is not None
    settings = Settings(arch="sm_75")
    out, report = cache_operators(parse(text), settings)
    assert _rewrites(text, settings, "copy") == expected
    cubin, messages = assemble(format_module(out))
    assert cubin is not None, messages
    if version == "1.4":
        assert any(s.reason == ".cs: needs PTX ISA 2.0 and .target sm_20" for s in report.skipped), report.skipped


def test_cache_operators_need_ptx_2_0() -> None:
    old = parse(_OLD.format(version="1.4", target="sm_13"))
    store = ast.Instruction("st", ("global", "u32"))
    assert isa.unmet_added(old, store, with_modifier(store, "cs")) is not None
    assert isa.unmet_added(old, store, with_modifier(store, "wt")) is not None


def test_the_target_used_counts() -> None:
    """`.L2::256B` needs sm_80: a file for sm_80 assembled for an older target (`--arch`) cannot take it."""
    module = parse(_OLD.format(version="8.0", target="sm_80"))
    load = ast.Instruction("ld", ("global", "u32"))
    assert isa.unmet_added(module, load, with_modifier(load, "L2::256B")) is None
    assert isa.unmet_added(module, load, with_modifier(load, "L2::256B"), arch="sm_75") is not None


# ---------------------------------------------------------------- one source of rules


def _lint_nc(path: Path) -> dict[tuple[str, int], str]:
    settings = load_settings({}, "test", select=("PTX005",))
    result = lint_file(read_source(str(path)), settings)
    assert not result.errors
    return {(f.message.split("'")[3], f.location.line): f.message for f in result.findings}


CORPUS = Path(__file__).parent / "corpus"
LINTED = [*sorted(SAMPLES.glob("*.ptx")), *sorted(DATA.glob("*.ptx")), *sorted(CORPUS.glob("triton/*.ptx"))]
LINTED += sorted(CORPUS.glob("fresh/*.ptx"))  # other compilers' output: Triton, clang, fresh nvcc


@pytest.mark.parametrize("path", LINTED, ids=lambda p: p.name)
def test_lint_advice_is_what_optimize_does(path: Path) -> None:
    """PTX005 reports a parameter's first load exactly when optimize makes that parameter's loads `.nc` (by
    default when the note says `ptxtool optimize` adds it, else only with --noalias)."""
    module = parse(path.read_text())
    hits = _lint_nc(path)
    for settings in (DEFAULT, NOALIAS):
        _, report = cache_operators(module, settings)
        made: dict[tuple[str, str], int] = {}
        for kernel in module.kernels:
            if kernel.body is None:
                continue
            rewrites = [r for r in report.rewrites if r.kernel == kernel.name]
            lines = {r.line for r in rewrites if "nc" in r.after.split(".") and "nc" not in r.before.split(".")}
            for a in memory_facts(module, kernel).accesses:
                if a.line in lines and a.param:
                    made[kernel.name, a.param] = min(made.get((kernel.name, a.param), a.line), a.line)
        promised = {
            (kernel, line)
            for (kernel, line), message in hits.items()
            if settings is NOALIAS or "`ptxtool optimize` adds it" in message
        }
        assert {(k, line) for (k, _), line in made.items()} == promised, settings


def _call_graph(depth: int, fanout: int, leaf: str) -> str:
    """`f0` calls `f1` `fanout` times, ..., the last one runs `leaf`; the kernel calls f0 and copies src to dst."""
    funcs = [f".func f{depth}()\n{{\n    {leaf}\n    ret;\n}}"]
    for n in range(depth - 1, -1, -1):
        calls = "\n".join(f"    call.uni f{n + 1};" for _ in range(fanout))
        funcs.insert(0, f".func f{n}()\n{{\n{calls}\n    ret;\n}}")
    return _hand(hazard="    call.uni f0;", funcs="\n".join(reversed(funcs)))


def test_deep_call_graphs_are_analysed_once_per_callee() -> None:
    """4 calls per level, 14 levels (4^14 paths): each callee is summarised once; the fence at the bottom counts."""
    import time

    start = time.perf_counter()
    assert nc_added(_call_graph(14, 4, "membar.gl;"), NOALIAS) == {}
    assert nc_added(_call_graph(14, 4, ""), NOALIAS) == {"k": ["ld.global.nc.L1::no_allocate.f32"]}
    assert time.perf_counter() - start < 5


def test_recursive_callees() -> None:
    """a and b call each other; the fence in b reaches the kernel, which calls only a."""
    funcs = ".func b();\n.func a()\n{\n    call.uni b;\n    ret;\n}\n"
    funcs += ".func b()\n{\n    membar.gl;\n    call.uni a;\n    ret;\n}"
    assert nc_added(_hand(hazard="    call.uni a;", funcs=funcs), NOALIAS) == {}
    quiet = funcs.replace("membar.gl;", "")
    assert nc_added(_hand(hazard="    call.uni a;", funcs=quiet), NOALIAS) == {
        "k": ["ld.global.nc.L1::no_allocate.f32"]
    }


_INSERTED = {
    "membar.gl": ast.Instruction("membar", ("gl",)),
    "atom": ast.Instruction("atom", ("global", "add", "u32"), ()),
    "extern call": ast.Instruction("call", ("uni",), (ast.Name("ext_fn"),)),
}


@pytest.mark.parametrize("what", list(_INSERTED))
@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.sm*.ptx")), ids=lambda p: p.name)
def test_any_hazard_anywhere_removes_nc(path: Path, what: str) -> None:
    """On real kernels that get `.nc` with --noalias, one hazard instruction inserted at a random place of the body
    (fixed seed) takes every `.nc` away from that kernel, wherever it lands."""
    import random
    from dataclasses import replace

    module = parse(path.read_text())
    before = nc_added(path.read_text(), NOALIAS)
    rng = random.Random(f"{path.name}:{what}")
    for name in before:
        kernel = next(k for k in module.kernels if k.name == name)
        at = rng.randrange(len(kernel.body.statements) + 1)
        statements = (*kernel.body.statements[:at], _INSERTED[what], *kernel.body.statements[at:])
        changed = replace(kernel, body=replace(kernel.body, statements=statements))
        items = tuple(changed if item is kernel else item for item in module.items)
        _, report = cache_operators(replace(module, items=items), NOALIAS)
        made = [
            r
            for r in report.rewrites
            if r.kernel == name and "nc" in set(r.after.split(".")) - set(r.before.split("."))
        ]
        assert not made, (name, at)
    if path.name.startswith(("comm", "elementwise")):
        assert before


def test_no_noalias_advice_where_nc_cannot_be_written() -> None:
    """A `.version 1.4` file cannot take `.nc` (PTX 3.1): the reason says so, and nothing suggests --noalias."""
    _, report = cache_operators(parse(_OLD.format(version="1.4", target="sm_13")), Settings(arch="sm_75"))
    reasons = [s.reason for s in report.skipped]
    assert ".nc: needs PTX ISA 3.1 and .target sm_32" in reasons and not any("--noalias" in r for r in reasons)

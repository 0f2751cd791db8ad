"""Adversarial kernels for the warp-role pass's split-bulk variant (issue 16): one producer warp copying each trip's
runs with cp.async.bulk after a run-time check, cp.async for a trip where the check fails. Each kernel is valid PTX
that ptxas takes. A confirmed break is a test of what a correct pass must do, marked xfail(strict=True) with the
reason, so the suite stays green and a fix flips it; each probe that held is a plain test."""

from __future__ import annotations

import random
import re
import resource
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from test_pass_warp_roles import DATA, STAGED

from ptxtool.errors import InputError
from ptxtool.guard import RECURSION_LIMIT
from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import OWN_PREFIXES, RoleSettings, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

LOAD = "\tld.global.nc.f32 \t%f2, [%rd5];\n"
STORE = "\tst.shared.f32 \t[%r8], %f2;\n"
STEP = "\tadd.s64 \t%rd5, %rd5, 512;\n"
POINTER = "\tadd.s64 \t%rd5, %rd3, %rd4;\n"
BULK = "cp.async.bulk.shared::cluster.global"


def _split(text: str, variant: str = "split-bulk", **settings) -> tuple[str | None, PassReport]:
    out, report = warp_roles(parse(text), RoleSettings(variant=variant, **settings))
    return (format_module(out) if report.rewrites else None), report


def _planted(*edits: tuple[str, str], text: str = STAGED) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _wider(threads: int) -> str:
    """STAGED with `threads` consumer threads, one float each per trip."""
    return _planted(
        (".reqntid 128, 1, 1", f".reqntid {threads}, 1, 1"),
        ("tile[512]", f"tile[{4 * threads}]"),
        ("shl.b32 \t%r4, %r4, 7;", f"mul.lo.s32 \t%r4, %r4, {threads};"),
        (STEP, f"\tadd.s64 \t%rd5, %rd5, {4 * threads};\n"),
        ("mad.lo.s32 \t%r14, %r3, 128, %r2;", f"mad.lo.s32 \t%r14, %r3, {threads}, %r2;"),
    )


def _chained(text: str, pairs: int) -> str:
    """`text` with `pairs` x (add 4, add -4) to the staged pointer before the loop: the same addresses, a long chain
    of definitions (unrolled prologues, -O0 code)."""
    chain = "".join("\tadd.s64 \t%rd5, %rd5, 4;\n\tadd.s64 \t%rd5, %rd5, -4;\n" for _ in range(pairs))
    return _planted((POINTER, POINTER + chain), text=text)


def _assembles_or_refused(text: str) -> None:
    compile_ptx(text, "input.ptx", "sm_90")
    out, _ = _split(text)
    if out is not None:
        try:
            compile_ptx(out, "split.ptx", "sm_90")
        except InputError as problem:
            pytest.fail(f"ptxas rejects the split-bulk output: {problem}")


def _splits_and_assembles(text: str) -> str:
    """The split-bulk output of `text` (split, not refused, and ptxas takes it, as it takes the input)."""
    compile_ptx(text, "input.ptx", "sm_90")
    out, report = _split(text)
    assert out is not None, report.skipped
    compile_ptx(out, "split.ptx", "sm_90")
    assert BULK in out
    return out


# ---------------------------------------------------------------------------------------------------- breaks


@pytest.mark.usefixtures("ptxas")
def test_const_bank_full_of_the_inputs_tables() -> None:
    """A kernel with a 64 KiB `.const` lookup table (ptxas takes it): the split adds nothing to the constant bank
    (the per-run check holds each run's offset and size as immediates), so it splits and assembles. (It once wrote
    `.const` run tables beside the input's: 'File uses too much global constant data'.)"""
    text = _planted(
        (".visible .entry staged(", ".const .align 4 .b8 lut[65536];\n\n.visible .entry staged("),
        ("\tmov.f32 \t%f1, 0f00000000;", "\tld.const.f32 \t%f1, [lut+65532];"),
    )
    out = _splits_and_assembles(text)
    assert out.count(".const .align") == 1  # the input's lut alone


@pytest.mark.usefixtures("ptxas")
def test_kernel_named_with_a_percent_sign() -> None:
    """A kernel named %staged (a valid PTX identifier): no name is built from the kernel's (the run tables
    __wr_%staged_run once were, which the pass's own parse rejected), so it splits and assembles."""
    text = STAGED.replace("staged", "%staged")
    out = _splits_and_assembles(text)
    assert "__wr_%" not in out


@pytest.mark.usefixtures("ptxas")
def test_a_module_function_with_a_table_name() -> None:
    """A `.func __wr_staged_run` beside the kernel: split-bulk writes no module-scope name (its run tables once met
    this function: 'Inconsistent redefinition of variable'), so it splits and assembles, the function kept."""
    text = STAGED.replace(
        ".visible .entry staged(", ".visible .func __wr_staged_run()\n{\n\tret;\n}\n\n.visible .entry staged("
    )
    out = _splits_and_assembles(text)
    assert out.count("__wr_staged_run") == 1


ZERO_FILLED = (  # zero-filled on trips 3, 7, ...: a compare of `and` is not proven per run, so a check pass stays
    LOAD,
    LOAD.replace("%f2", "%f4")
    + "\tand.b32 \t%r13, %r12, 3;\n\tsetp.ne.u32 \t%p3, %r13, 3;\n\tselp.f32 \t%f2, %f4, 0f00000000, %p3;\n",
)
LABELS = {
    # the check pass's copy of an input label $staging1 is $__wr_c + staging1: the pass's own label after share 0's
    # check pass (bulk only: the other variants have no check pass; since the per-run check, only a trip with loose
    # or zero-filled words not proven per run has one: ZERO_FILLED)
    "check_pass": ("\tst.shared.f32 \t[%r8], %f2;\n", "$staging1:\n\tst.shared.f32 \t[%r8], %f2;\n"),
    # share 0's copy of an input label $re1 before the loop is $__wr_p + re1: the pass's own label where share 1's
    # copy of that part starts (every split with fewer producer warps than consumer warps; split-bulk always)
    "shares": ("\tmov.u32 \t%r6, tile;\n", "$re1:\n\tmov.u32 \t%r6, tile;\n"),
}


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("where", sorted(LABELS))
def test_input_labels_that_spell_the_pass_s_own(where: str) -> None:
    text = _planted(LABELS[where], *([ZERO_FILLED] if where == "check_pass" else []))
    out, report = _split(text)
    assert out is not None, report.skipped
    assert ("$__wr_cstaging1:" if where == "check_pass" else "$__wr_pre1:") in out  # the label it once clashed with
    _assembles_or_refused(text)


# every variant, with fewer producer threads than consumer threads where it has producers (shares and their labels)
VARIANTS = {"split": {"producer_warps": 1}, "split-async": {"producer_warps": 1}, "split-bulk": {}, "pipeline": {}}
KERNELS = {
    "staged": STAGED,
    "staged_zero_filled": _planted(ZERO_FILLED),  # split-bulk's check pass
    **{name: (DATA / f"{name}.ptx").read_text() for name in ("mixed", "strided_fill")},
}
PLANTED = 48  # labels and registers planted per kernel and variant


def _written_names(out: str) -> tuple[set[str], set[str]]:
    """The labels the pass defined and the registers it declared (`%wr_...`)."""
    labels = set(re.findall(r"^(\$__wr_[\w$]+):", out, re.M))
    registers = {r for decl in re.findall(r"^\s*\.reg\s+\.\w+\s+([^;]+);", out, re.M) for r in decl.split(",")}
    return labels, {r.strip() for r in registers if r.strip().startswith("%wr_")}


def _spellings(name: str, prefix: str) -> set[str]:
    """Input names that spell `name` with the pass's `prefix` stripped or reshaped: every tail of what follows the
    prefix, as a `$` label and a bare one (`$__wr_producer` -> `$producer`, `$roducer`, `producer`, ...)."""
    rest = name[len(prefix) :]
    tails = {rest[k:] for k in range(len(rest))}
    ident = re.compile(r"[A-Za-z][\w$]*|[_$%][\w$]+")
    out = {f"${t}" for t in tails} | {t for t in tails if ident.fullmatch(t)}
    return {x for x in out if ident.fullmatch(x) and not x.startswith(OWN_PREFIXES)}


def _plant_labels(text: str, labels: list[str], rng: random.Random) -> str:
    """`text` with each label put before a random instruction of the kernel's body (outside nested scopes)."""
    lines = text.split("\n")
    depth, spots = 0, []
    for k, line in enumerate(lines):
        if depth == 1 and line.startswith("\t") and line.strip().endswith(";") and not line.strip().startswith("."):
            spots.append(k)
        depth += line.count("{") - line.count("}")
    for label in labels:
        k = rng.choice(spots)
        lines[k] = f"{label}:\n{lines[k]}"
    return "\n".join(lines)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_no_input_name_spells_a_name_the_pass_writes(kernel: str, variant: str) -> None:
    """Labels and registers planted in the input that spell each label and register the pass wrote for it (taken
    from its output, the prefix stripped or reshaped, a fixed-seed sample): the pass still rewrites the kernel, and
    ptxas takes what it wrote (no 'Duplicate definition')."""
    text = KERNELS[kernel]
    out, report = _split(text, variant, **VARIANTS[variant])
    assert out is not None, report.skipped
    labels, registers = _written_names(out)
    assert labels and registers
    rng = random.Random(f"{kernel}/{variant}")
    spelled = sorted(
        {x for name in labels for x in _spellings(name, "$__wr_")} - set(re.findall(r"^([\w$%]+):", text, re.M))
    )
    planted = _plant_labels(text, rng.sample(spelled, min(PLANTED, len(spelled))), rng)
    names = sorted({f"%{r[len('%wr_') :]}" for r in registers} - {"%tid", "%laneid"})
    declared = "\n".join(f"\t.reg .b32 \t{r};" for r in rng.sample(names, min(PLANTED, len(names))))
    planted = planted.replace("\t.reg .pred", f"{declared}\n\t.reg .pred", 1)
    compile_ptx(planted, "input.ptx", "sm_90")
    out, report = _split(planted, variant, **VARIANTS[variant])
    assert out is not None, report.skipped  # labels that only spell its own are no reason to refuse
    try:
        compile_ptx(out, "split.ptx", "sm_90")
    except InputError as problem:
        pytest.fail(f"ptxas rejects the {variant} output: {problem}")


@pytest.mark.usefixtures("ptxas")
def test_a_label_spelling_an_old_copy_prefix_is_split() -> None:
    """`$$__wr_` was the prefix of copies of labels without `$` and is no prefix of the pass's any more: an input
    label `$$__wr_producer` (and the bare `__wr_p` family's neighbour `wr_producer`) is split and assembles."""
    text = _planted(("\tmov.u32 \t%r6, tile;", "$$__wr_producer:\nwr_producer:\n\tmov.u32 \t%r6, tile;"))
    out, report = _split(text, "split", producer_warps=1)
    assert out is not None, report.skipped
    assert "$__wr_p$$__wr_producer:" in out and "$__wr_p_$wr_producer:" in out
    compile_ptx(out, "split.ptx", "sm_90")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("%rd<10>", "%rd<10>, %wr_k"),  # a register
        ("\tmov.u32 \t%r6, tile;", "$__wr_producer:\n\tmov.u32 \t%r6, tile;"),  # a label
        ("tile[512];", "tile[512];\n\t.shared .align 4 .b8 __wr_tile[4];"),  # a shared variable
        (".visible .entry staged(", ".global .align 4 .b8 __wr_ring[4];\n\n.visible .entry staged("),  # a module one
    ],
)
def test_input_names_with_the_pass_s_prefixes_are_refused(variant: str, old: str, new: str) -> None:
    """An input name that already starts with one of the pass's own prefixes (OWN_PREFIXES) is refused, naming it."""
    assert old in STAGED
    name = re.search(r"%wr_\w+|\$__wr_\w+|__wr_\w+", new)
    assert name and name.group().startswith(OWN_PREFIXES)
    out, report = _split(STAGED.replace(old, new, 1), variant, **VARIANTS[variant])
    assert out is None
    assert f"already names {name.group()}" in report.skipped[0].reason


@pytest.mark.usefixtures("ptxas")
def test_a_huge_shift_amount_in_a_staged_address() -> None:
    """Run under a 2 GB address-space limit (the unbounded run took the machine's memory)."""
    text = _planted(
        (
            POINTER,
            "\tcvt.u64.u32 \t%rd9, %r1;\n\tshl.b64 \t%rd9, %rd9, 4000000000;\n"
            + POINTER
            + "\tadd.s64 \t%rd5, %rd5, %rd9;\n",
        )
    )
    compile_ptx(text, "input.ptx", "sm_90")
    done = _pass_in_a_subprocess(text, timeout=300)
    assert done.returncode == 0, done.stderr[-500:]


def _pass_in_a_subprocess(text: str, timeout: float) -> subprocess.CompletedProcess:
    """split-bulk on `text` in a child process under a 2 GB address-space limit, killed after `timeout` seconds."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    code = (
        "import sys\nfrom ptxtool.syntax import parse\nfrom ptxtool.passes.warp_roles import RoleSettings, warp_roles\n"
        "warp_roles(parse(sys.stdin.read()), RoleSettings(variant='split-bulk'))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=timeout, preexec_fn=limit
    )


def test_a_squared_index_does_not_hang_the_footprint() -> None:
    squares = "\tmul.lo.s64 \t%rd9, %rd9, %rd9;\n" * 10
    text = _planted(
        (
            POINTER,
            "\tcvt.u64.u32 \t%rd9, %r1;\n\tadd.s64 \t%rd9, %rd9, 1;\n"
            + squares
            + POINTER
            + "\tadd.s64 \t%rd5, %rd5, %rd9;\n",
        )
    )
    assert _split(text, "split-async")[0] is not None
    done = _pass_in_a_subprocess(text, timeout=20)
    assert done.returncode == 0, done.stderr[-500:]


@pytest.fixture
def cli_recursion_limit():
    """The limit `ptxtool` runs every command under (guard.py), restored afterwards."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, RECURSION_LIMIT))
    yield
    sys.setrecursionlimit(before)


@pytest.mark.usefixtures("cli_recursion_limit")
def test_a_long_chain_before_the_loop_is_no_internal_error() -> None:
    text = _chained(STAGED, 6000)
    assert _split(text, "split-async")[0] is not None  # the same analyses without sources.py take it
    out, report = _split(text)
    assert out is not None, report.skipped  # the chain cancels exactly: still one run


@pytest.mark.usefixtures("cli_recursion_limit")
def test_the_footprint_is_not_threads_times_the_prologue() -> None:
    text = _chained(_wider(256), 300)
    started = time.perf_counter()
    assert _split(text, "split-async")[0] is not None
    reference = time.perf_counter() - started
    started = time.perf_counter()
    out, report = _split(text)
    spent = time.perf_counter() - started
    assert out is not None, report.skipped
    assert spent < 10 * reference + 1.0, (spent, reference)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("variant", "producers"), [("split-bulk", None), ("split", 1), ("split-async", 1)])
def test_the_producers_register_copies_do_not_spill(variant: str, producers: int | None) -> None:
    """One producer warp replays all N/32 consumer shares, each in its own register copy: with .reqntid N + 32 ptxas
    caps the registers (72 at 800 threads) and spills (split-bulk: 96 bytes at 768 consumer threads) where the input
    (22 registers) spilled nothing. optimize keeps what ptxas spills nothing in: where the split spills, the kernel
    is refused with ptxas's numbers and the input kept; where it does not (256 threads), the split stays."""
    from ptxtool.passes.warp_roles import NAME
    from ptxtool.services import optimize
    from ptxtool.sources import Source

    roles = RoleSettings(variant=variant, producer_warps=producers)
    for threads in (256, 768):
        text = _wider(threads)
        assert compile_ptx(text, "input.ptx", "sm_90").functions["staged"].spill_bytes == 0
        raw, _ = _split(text, variant, producer_warps=producers)
        assert raw is not None
        spills = compile_ptx(raw, "split.ptx", "sm_90").functions["staged"].spill_bytes
        result = optimize.execute(optimize.Options(passes=(NAME,), roles=roles), Source("staged.ptx", text))
        assert result.verified and compile_ptx(result.text, "out.ptx", "sm_90").functions["staged"].spill_bytes == 0
        assert result.changed == (spills == 0), (threads, spills)
        if spills:
            (skip,) = result.reports[0].skipped
            assert f"ptxas spills {spills} bytes of the rewritten kernel" in skip.reason and result.text == text
        assert (spills == 0) == (threads == 256), (threads, spills)  # the probe still probes


# ----------------------------------------------------------------------------------------------- probes that held

# global memory the bulk copies (async proxy) read, written by the kernel's generic proxy: every form is refused
WRITTEN = {
    # a module .global variable written before the loop, the staged loads not .nc
    "global_variable": (
        (".visible .entry staged(", ".global .align 4 .b8 flag[4];\n\n.visible .entry staged("),
        (POINTER, POINTER + "\tmov.u32 \t%r13, 1;\n\tst.global.u32 \t[flag], %r13;\n"),
        (LOAD, "\tld.global.f32 \t%f2, [%rd5];\n"),
    ),
    # the staged buffer itself written before the loop (the same parameter: .nc or not)
    "same_buffer": ((POINTER, POINTER + "\tst.global.f32 \t[%rd5], %f1;\n"),),
    # another parameter (it may alias) written in the compute part, the staged loads not .nc
    "aliasing_parameter": (
        (
            "fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;",
            "fma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n\tst.global.f32 [%rd2], %f1;",
        ),
        (LOAD, "\tld.global.f32 \t%f2, [%rd5];\n"),
    ),
    # a generic store before the loop (it may be global memory), the staged loads not .nc
    "generic_store": (
        (POINTER, POINTER + "\tst.f32 \t[%rd2], %f1;\n"),
        (LOAD, "\tld.global.f32 \t%f2, [%rd5];\n"),
    ),
    # discard.global.L2 in the staging part: replayed by the check pass before the copies read those lines
    "discard": ((STORE, STORE + "\tdiscard.global.L2 \t[%rd5], 128;\n"),),
}


@pytest.mark.parametrize("form", sorted(WRITTEN))
def test_generic_writes_to_what_the_bulk_copies_read_are_refused(form: str) -> None:
    text = _planted(*WRITTEN[form])
    compile_ptx(text, "input.ptx", "sm_90")
    out, report = _split(text)
    assert out is None and report.skipped[0].reason


SHARED = {
    # dynamic shared memory beside the ring (its size is the launch's)
    "extern_shared": (
        (
            "\t.shared .align 4 .b8 tile[512];",
            "\t.shared .align 4 .b8 tile[512];\n\t.extern .shared .align 4 .b8 dyn[];",
        ),
    ),
    # a generic (pre-loop) write to the staged buffer, later overwritten by bulk copies
    "zero_init": ((POINTER, POINTER + "\tst.shared.f32 \t[%r8], %f1;\n"),),
    # the compute part writes the staged buffer (generic), the next trip's bulk copy writes it again (async)
    "compute_writes_tile": (
        ("\tld.shared.f32 \t%f3, [%r11];\n", "\tld.shared.f32 \t%f3, [%r11];\n\tst.shared.f32 \t[%r11], %f1;\n"),
    ),
    # a wgmma-like use of the tile's address as a value (it would not follow the ring slot)
    "address_as_value": (
        (
            "\tld.shared.f32 \t%f3, [%r11];\n",
            "\tld.shared.f32 \t%f3, [%r11];\n\tcvt.rn.f32.u32 \t%f4, %r11;\n\tadd.f32 \t%f1, %f1, %f4;\n",
        ),
    ),
}


@pytest.mark.parametrize("form", sorted(SHARED))
def test_generic_accesses_to_the_ring_outside_the_staging_are_refused(form: str) -> None:
    text = _planted(*SHARED[form])
    out, report = _split(text)
    assert out is None and report.skipped[0].reason


CONVERTED = {
    # a sign-extending byte load stored as a word: not the bytes the load read
    "sign_extended": ((LOAD + STORE, "\tld.global.nc.s8 \t%r13, [%rd5];\n\tst.shared.u32 \t[%r8], %r13;\n"),),
    # a 2-byte load stored as 4 bytes
    "narrow_load": (
        (
            LOAD + STORE,
            "\tld.global.nc.u16 \t%rs1, [%rd5];\n\tcvt.u32.u16 \t%r13, %rs1;\n\tst.shared.u32 \t[%r8], %r13;\n",
        ),
    ),
    # a conversion between load and store
    "converted": (
        (
            LOAD + STORE,
            "\tld.global.nc.f32 \t%f2, [%rd5];\n\tcvt.rzi.f32.f32 \t%f4, %f2;\n\tst.shared.f32 \t[%r8], %f4;\n",
        ),
    ),
    # the loaded register modified (guarded, to a non-zero value) before the store
    "modified": ((LOAD, LOAD + "\tsetp.lt.u32 \t%p3, %r12, 2;\n\t@%p3 mov.f32 \t%f2, 0f3F800000;\n"),),
    # a wider load than the store: the 4 bytes stored are the load's low half
    "wider_load": ((LOAD + STORE, "\tld.global.nc.u64 \t%rd9, [%rd5];\n\tst.shared.u32 \t[%r8], %rd9;\n"),),
}


@pytest.mark.parametrize("form", sorted(CONVERTED))
def test_words_that_are_not_the_loaded_bytes_are_refused(form: str) -> None:
    text = _planted(*CONVERTED[form])
    if form == "narrow_load":
        text = text.replace("\t.reg .pred \t%p<4>;", "\t.reg .pred \t%p<4>;\n\t.reg .b16 \t%rs<2>;")
    compile_ptx(text, "input.ptx", "sm_90")
    out, report = _split(text)
    assert out is None and report.skipped[0].reason


def test_a_counter_stepped_in_the_staging_part_is_refused() -> None:
    """A counter set before the loop and stepped in the staging part: the check pass and the fallback
    would step it twice (replay_refusal)."""
    text = _planted(
        ("\tmov.u32 \t%r12, 0;\n", "\tmov.u32 \t%r12, 0;\n\tmov.u32 \t%r13, 0;\n"),
        (LOAD, "\tadd.s32 \t%r13, %r13, 1;\n" + LOAD),
    )
    out, report = _split(text)
    assert out is None and report.skipped[0].reason


def test_mbarrier_init_is_fenced_to_the_async_proxy_before_every_bulk_copy() -> None:
    """thread 0's mbarrier.init (generic) reaches the producers through bar.sync; each bulk trip then runs
    fence.proxy.async.shared::cta before its first cp.async.bulk (the init and any earlier fallback trip's
    cp.async writes to the slot precede the fence in causality order; PTX ISA, proxy-preserved causality)."""
    out, _ = _split(STAGED)
    assert out is not None
    producers = out.partition("$__wr_producer:")[2]
    assert "fence.proxy.async.shared::cta;" in producers
    first_bulk = producers.index(BULK)
    assert producers.rindex("fence.proxy.async.shared::cta;", 0, first_bulk) > producers.rindex(
        "@!%wr_bulk bra $__wr_fallback;", 0, first_bulk
    )
    init = out.index("mbarrier.init")
    assert out.index("bar.sync 0;", init) < out.index("$__wr_producer:")


@pytest.mark.usefixtures("ptxas")
def test_a_cluster_launch_assembles_with_the_ctas_own_ring() -> None:
    """.reqnctapercluster 2: the copies' destination and mbarrier are .shared::cta addresses, which lie in the
    executing CTA's part of the .shared::cluster window (PTX ISA 5.1.7), so each CTA fills its own ring."""
    text = STAGED.replace(".reqntid 128, 1, 1", ".reqntid 128, 1, 1\n.reqnctapercluster 2, 1, 1")
    out, report = _split(text)
    assert out is not None, report.skipped
    assert "mapa" not in out and ".reqnctapercluster 2, 1, 1" in out
    compile_ptx(out, "split.ptx", "sm_90")


@pytest.mark.parametrize(("version", "target"), [("7.8", "sm_90"), ("8.0", "sm_80"), ("8.0", "sm_89")])
def test_targets_without_bulk_copies_are_refused(version: str, target: str) -> None:
    text = STAGED.replace(".version 8.0", f".version {version}").replace(".target sm_90", f".target {target}")
    out, report = _split(text)
    assert out is None and report.skipped[0].reason


def test_no_producer_warp_count_but_one() -> None:
    for producers in (2, 4):
        out, report = _split(STAGED, producer_warps=producers)
        assert out is None and "one producer warp" in report.skipped[0].reason


GATHER = """.version 8.0
.target sm_90
.address_size 64

.visible .entry gather(
	.param .u64 gather_a,
	.param .u64 gather_out,
	.param .u32 gather_n,
	.param .u32 gather_stride
)
.reqntid THREADS, 1, 1
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<16>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<12>;
	.shared .align 16 .b8 tile[BYTES];

	ld.param.u64 	%rd1, [gather_a];
	ld.param.u64 	%rd2, [gather_out];
	ld.param.u32 	%r1, [gather_n];
	ld.param.u32 	%r13, [gather_stride];
	cvta.to.global.u64 	%rd3, %rd1;
	mov.u32 	%r2, %tid.x;
	mul.wide.u32 	%rd4, %r2, %r13;
	add.s64 	%rd5, %rd3, %rd4;
	mov.u32 	%r6, tile;
	shl.b32 	%r7, %r2, 4;
	add.s32 	%r8, %r6, %r7;
	xor.b32 	%r9, %r2, 1;
	shl.b32 	%r10, %r9, 4;
	add.s32 	%r11, %r6, %r10;
	mov.f32 	%f1, 0f00000000;
	mov.u32 	%r12, 0;
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__done;
$L__loop:
	ld.global.nc.v4.f32 	{%f2, %f3, %f4, %f5}, [%rd5];
	st.shared.v4.f32 	[%r8], {%f2, %f3, %f4, %f5};
	bar.sync 	0;
	ld.shared.f32 	%f6, [%r11+4];
	add.f32 	%f1, %f1, %f6;
	bar.sync 	0;
	add.s64 	%rd5, %rd5, 16;
	add.s32 	%r12, %r12, 1;
	setp.lt.u32 	%p2, %r12, %r1;
	@%p2 bra 	$L__loop;
$L__done:
	cvta.to.global.u64 	%rd6, %rd2;
	mul.wide.u32 	%rd7, %r2, 4;
	add.s64 	%rd8, %rd6, %rd7;
	st.global.f32 	[%rd8], %f1;
	ret;
}
"""


def test_thousands_of_runs_stay_cheap_and_are_refused() -> None:
    """768 threads each gather a float4 from a row `stride` bytes apart: 768 runs of 16 bytes, more than the per-run
    check takes (64): the pass stays within seconds and refuses split-bulk with its reason (split-async stays)."""
    text = GATHER.replace("THREADS", "768").replace("BYTES", str(768 * 16))
    started = time.perf_counter()
    out, report = _split(text)
    assert time.perf_counter() - started < 60
    assert out is None
    assert report.skipped[0].reason.endswith(
        "the per-run check cannot be built: 768 runs, more than the per-run check's 64"
    )
    assert _split(text, variant="split-async", producer_warps=1)[0] is not None


def _simulated(text: str, trips: int, step: int, shift: int, seed: int = 0, blocks: int = 2) -> tuple[bytes, int]:
    """(out, bulk copies issued) of a simulated launch of STAGED-like kernels whose pointer steps `step` bytes a trip,
    the input `shift` bytes past address 0."""
    from ptx_sim_bulk import run_grid
    from ptx_sim_roles import block_threads

    span = blocks * trips * 512 + trips * step + 1024
    rng = random.Random(7)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(span // 4))
    memory = bytearray(shift) + bytearray(data) + bytearray(blocks * 128 * 4)
    issued = run_grid(text, block_threads(text), blocks, [shift, shift + len(data), trips], memory, seed)
    return bytes(memory[shift + len(data) :]), issued


@pytest.mark.parametrize("stages", [2, 3])
def test_bulk_and_fallback_trips_alternate_on_one_slot(stages: int) -> None:
    """The pointer steps 516 bytes a trip: trips 0, 4, ... are 16-byte aligned (bulk), the others not (cp.async),
    so slots take bulk and fallback writes in turn; and from trip 3 on every word is zero-filled (selp on the trip
    counter, a fallback for that reason alone). The simulated bits are the input's."""
    text = _planted(
        (STEP, "\tadd.s64 \t%rd5, %rd5, 516;\n"),
        (
            LOAD,
            "\tld.global.nc.f32 \t%f4, [%rd5];\n\tsetp.lt.u32 \t%p3, %r12, 3;\n"
            "\tselp.f32 \t%f2, %f4, 0f00000000, %p3;\n",
        ),
    )
    out, report = _split(text, stages=stages)
    assert out is not None, report.skipped
    for trips in (1, 6):
        got, issued = _simulated(out, trips, 516, 0, seed=stages)
        assert got == _simulated(text, trips, 516, 0)[0], trips
        aligned = [k for k in range(min(trips, 3)) if (516 * k) % 16 == 0]
        assert issued == 2 * len(aligned), (trips, issued)  # one run a trip, 2 blocks


# ------------------------------------------------------------------------------------------------------ on the GPU


def _gpu_bytes(text: str, kernel: str, grid: int, a: np.ndarray, out_words: int, *scalars: int) -> bytes:
    """`out` after one launch of `kernel(a, out, *scalars)` (32-bit scalars) with the block its `.reqntid` declares
    (a `.reqnctapercluster` kernel launches in clusters of that size without asking)."""
    from ptx_sim_roles import block_threads

    from ptxtool.toolchain.gpu import Gpu

    cubin = compile_ptx(text, f"{kernel}.ptx", "sm_90").cubin
    with Gpu() as gpu:
        function = gpu.function(gpu.load(cubin, kernel, ptx=False), kernel)
        source, out = gpu.alloc(a.nbytes), gpu.alloc(4 * out_words)
        gpu.upload(source, a)
        gpu.fill_bytes(out, 0xFF, 4 * out_words)
        args = [np.uint64(source).tobytes(), np.uint64(out).tobytes(), *(np.uint32(v).tobytes() for v in scalars)]
        gpu.launch(function, (grid, 1, 1), (block_threads(text), 1, 1), args)
        return gpu.download(out, 4 * out_words, timeout=10.0).tobytes()


ALTERNATING = _planted(
    (STEP, "\tadd.s64 \t%rd5, %rd5, 516;\n"),
    (
        LOAD,
        "\tld.global.nc.f32 \t%f4, [%rd5];\n\tsetp.lt.u32 \t%p3, %r12, 3;\n\tselp.f32 \t%f2, %f4, 0f00000000, %p3;\n",
    ),
)


def _gpu_cases() -> list:
    """The held probes run on the GPU (768 runs a trip are refused now, more than the per-run check's 64:
    test_thousands_of_runs_stay_cheap_and_are_refused)."""
    cluster = STAGED.replace(".reqntid 128, 1, 1", ".reqntid 128, 1, 1\n.reqnctapercluster 2, 1, 1")
    return [
        pytest.param(ALTERNATING, "staged", 128, (), id="bulk_and_fallback_alternating"),
        pytest.param(cluster, "staged", 128, (), id="cluster_of_2"),
    ]


@pytest.mark.gpu
@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("text", "kernel", "threads", "more"), _gpu_cases())
def test_held_probes_on_the_gpu(text: str, kernel: str, threads: int, more: tuple[int, ...]) -> None:
    """The input and its split-bulk (S = 2, 3), 20 launches each over random a[], 132 blocks of `n` = 9 trips: bulk
    trips (16-byte aligned runs), fallback trips (4 bytes off, or zero-filled) in turn on one slot; a 2-CTA cluster
    (each CTA's ring at its own .shared::cta address). Every output must be the input's bytes."""
    from ptxtool.toolchain.gpu import probe

    if (reason := probe()) is not None:
        pytest.skip(f"no GPU: {reason}")
    grid, n = 132, 9
    words = (grid * n + 2) * threads * 4 + (threads * max(more, default=0)) // 4 + 4096
    a = np.random.default_rng(0).standard_normal(words).astype(np.float32)
    out_words = grid * threads
    expected = _gpu_bytes(text, kernel, grid, a, out_words, n, *more)
    for stages in (2, 3):
        out, report = _split(text, stages=stages)
        assert out is not None, report.skipped
        for _ in range(20):
            assert _gpu_bytes(out, kernel, grid, a, out_words, n, *more) == expected, stages

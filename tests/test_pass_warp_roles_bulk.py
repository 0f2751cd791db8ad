"""The split with one producer warp issuing cp.async.bulk (`--variant split-bulk`): the trip's staged bytes as runs
(footprint.py; global contiguity proven by sources.py's exact polynomials), each trip checked at run time (every run's
words imply one 16-byte-aligned base, no run word zero-filled) before its bulk copies, with the split-async staging
as the fallback. Checked on the output: the producer trip's structure (reset, check pass, vote, expect_tx of the
runs' bytes, fence, one bulk copy per run, the fallback, one noinc arrival per lane), the run tables, the
runs found on nvcc's benchmark kernels, ptxas's acceptance with UBLKCP in the SASS, and the outputs on the CPU
simulator (tests/ptx_sim_bulk.py): the input's bits with the inputs aligned (bulk copies issued) and 4 bytes off
(every trip falls back), with loose words and with zero-filled words; each refusal planted."""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest
from test_pass_warp_roles import BENCHMARKS, STAGED
from test_pass_warp_roles_pipeline import LOAD, ZERO_FILLS, _planted

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.staging import StagedLoop, find_staged_loop
from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import RoleSettings, sass_proof, warp_roles
from ptxtool.passes.warp_roles.async_producers import producer_copies
from ptxtool.passes.warp_roles.footprint import Footprint, footprint
from ptxtool.passes.warp_roles.zero_fill import bounds
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

MIXED = (Path(__file__).parent / "data" / "warp_roles" / "mixed.ptx").read_text()
BULK = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%wr_o], [%wr_b], %wr_sz0, [%wr_bar];"
NOINC = "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%wr_bar];"


def _split(text: str, **settings) -> tuple[str | None, PassReport]:
    out, report = warp_roles(parse(text), RoleSettings(variant="split-bulk", **settings))
    return (format_module(out) if report.rewrites else None), report


def _trip(out: str) -> str:
    """The producers' loop."""
    producers = out.partition("$__wr_producer:")[2]
    return producers[producers.index("$__wr_p$L__loop:") : producers.index("$__wr_p$L__done:")]


@pytest.mark.parametrize("stages", [2, 3])
def test_structure(stages: int) -> None:
    """One producer warp (the block grows by 32, full counts its 32 lanes); per trip: the empty wait, the per-run
    check (lane 0, run 0's: the atoms it reads, the parameter, its cvta, the trip's offset from the register
    captured before the loop, the widening; run 0's source, its alignment and its no-wrap assumption), no check pass (no
    loose or zero-filled word), the vote, then either lane 0's expect_tx of exactly the runs' bytes, the async-proxy
    fence and one bulk copy per run (its slot offset and size immediates of lane 0's run: no table), or the
    fallback's cp.asyncs; then one noinc arrival per lane for both."""
    out, report = _split(STAGED, stages=stages)
    assert out is not None, report.skipped
    assert ".reqntid 160, 1, 1" in out
    for s in range(stages):
        assert f"mbarrier.init.shared::cta.b64 [__wr_full+{8 * s}], 32;" in out
        assert f"mbarrier.init.shared::cta.b64 [__wr_empty+{8 * s}], 128;" in out
    assert ".const" not in out and "ld.const" not in out
    trip = _trip(out)
    order = [
        "mbarrier.try_wait.parity.shared::cta.b64 %wr_done, [%wr_bar], %wr_eph;",
        "setp.eq.u32 %wr_q, %wr_k, 0;",
        "@%wr_q mov.b64 %wr_init0, %rd5;",  # trip 0: the trip register as the loop found it
        "setp.ne.u32 %wr_q, %wr_vtid, 0;",  # run 0: lane 0, which alone computes the atoms only run 0 reads
        "ld.param.u64 %wr_at0, [staged_a+0];",
        "cvta.to.global.u64 %wr_at1, %wr_ev;",
        "sub.s64 %wr_at2, %rd5, %wr_init0;",  # trip:%rd5
        "and.b64 %wr_at5, %wr_ev, 4294967295;",  # zext32(128 * %ctaid.x * n)
        "and.b64 %wr_mul, %wr_sum, 15;",  # 16-byte aligned
        "add.s64 %wr_mul, %wr_at5, 127;",  # the assumption: 128 * ctaid * n + 127 < 2^32
        "setp.ge.s64 %wr_q, %wr_mul, 4294967296;",
        "mov.u32 %wr_st0, 0;",  # run 0's slot offset and size
        "mov.u32 %wr_sz0, 512;",
        "$__wr_run0:",
        "vote.sync.all.pred %wr_bulk, %wr_ok, -1;",
        "@!%wr_bulk bra $__wr_fallback;",
        "@%wr_lead mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%wr_bar], 512;",
        "fence.proxy.async.shared::cta;",
        BULK,
        "bra $__wr_staged;",
        "$__wr_fallback:",
        "cp.async.ca.shared.global",
        "$__wr_staged:",
        NOINC,
    ]
    places = [trip.index(x) for x in order]
    assert places == sorted(places), list(zip(order, places, strict=True))
    assert trip.count(BULK) == 1 and trip.count("expect_tx") == 1 and trip.count(NOINC) == 1
    assert "$__wr_cstaging" not in trip  # no check pass: no loose or zero-filled word
    assert len([x for x in trip[: trip.index("$__wr_fallback:")].splitlines() if x.strip().endswith(";")]) < 80
    assert "ld.global.nc.f32" not in out.partition("$__wr_producer:")[2] and "st.shared.f32" not in trip
    assert out.rstrip().endswith("cp.async.wait_all;\n\tret;\n}")
    assert "1 run of 512 bytes, 512 bytes per trip" in " ".join(report.rewrites[0].reasons)


def test_loose_words() -> None:
    """`col` holds its floats in the reverse of their global order: no run; its words are copied with cp.async on
    both paths (in the check pass, and never again in the fallback), `tile` is the one run; expect_tx counts the
    run's bytes only. Which store writes which is known statically: no store is told apart at run time."""
    out, report = _split(MIXED)
    assert out is not None, report.skipped
    module = parse(MIXED)
    found = find_staged_loop(module, module.kernels[0], stages=2, extra_threads=32)
    assert isinstance(found, StagedLoop)
    cfg = build_cfg(module.kernels[0])
    laid = footprint(cfg, found, producer_copies(cfg, found))
    assert isinstance(laid, Footprint)
    assert [kind for _, kind in laid.kinds] == ["run", "loose"] and laid.spans == ((0, 512),)
    trip = _trip(out)
    assert "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%wr_bar], 512;" in trip
    check = trip[trip.index("mov.pred %wr_ok, 1;") : trip.index("%wr_at")]  # the check pass: the loose words only
    fallback = trip[trip.index("$__wr_fallback:") : trip.index("$__wr_staged:")]
    assert "%wr_loose" not in trip
    assert len(re.findall(r"cp\.async\.ca", check)) == 4  # col's store, 4 shares: only loose words
    assert len(re.findall(r"cp\.async\.ca", fallback)) == 4  # tile's: the run words only
    assert any("512 bytes per trip (mbarrier.expect_tx), 512 with cp.async" in r for r in report.rewrites[0].reasons)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize("text", [STAGED, MIXED], ids=["staged", "mixed"])
@pytest.mark.parametrize("stages", [2, 3])
def test_ptxas_and_sass(text: str, stages: int) -> None:
    """ptxas takes the output without spills and its SASS holds the bulk copy (UBLKCP), the expect_tx
    (SYNCS.ARRIVE.TRANS64.RED), the fallback's LDGSTS with their ARRIVES.LDGSTSBAR and the ring's SYNCS."""
    from ptxtool.toolchain.sass import disassemble, missing

    out, report = _split(text, stages=stages)
    assert out is not None, report.skipped
    kernel = parse(out).kernels[0]
    compiled = compile_ptx(out, "bulk.ptx", "sm_90")
    assert compiled.functions[kernel.name].spill_bytes == 0
    proof = sass_proof(kernel, "sm_90")
    assert {"UBLKCP", "LDGSTS", "ARRIVES.LDGSTSBAR", "SYNCS.PHASECHK"} <= {m.name for m in proof}, proof
    sass = disassemble(compiled.cubin)[kernel.name]
    assert not missing(proof, sass)
    opcodes = [i.opcode for i in sass]
    assert any(o.startswith("UBLKCP.S.G") for o in opcodes) and any("SYNCS.ARRIVE.TRANS64.RED" in o for o in opcodes)


def _simulated(text: str, trips: int, shift: int, seed: int = 0, blocks: int = 2, pad: int = 0) -> tuple[bytes, int]:
    """(the output buffer, bulk copies issued) after a simulated launch (tests/ptx_sim_bulk.py) over `trips` tiles
    of random floats (and `pad` more) placed `shift` bytes past address 0."""
    from ptx_sim_bulk import run_grid
    from ptx_sim_roles import block_threads

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * trips * 128 + pad))
    memory = bytearray(shift) + bytearray(data) + bytearray(blocks * 128 * 4)
    issued = run_grid(text, block_threads(text), blocks, [shift, shift + len(data), trips], memory, seed)
    return bytes(memory[shift + len(data) :]), issued


@pytest.mark.parametrize("name", ["staged", "mixed", "zero_filled"])
@pytest.mark.parametrize("stages", [2, 3])
def test_outputs_match_on_a_simulated_cta(name: str, stages: int) -> None:
    """The input's bits for 0, 1 and 5 trips: with the tiles 16-byte aligned (trips copied in bulk), 4 bytes off
    (no run's source aligned: every trip falls back to cp.async, no bulk copy is issued), and with words the input
    zero-fills (threads 100..127 here: every trip falls back)."""
    old, new = ZERO_FILLS["branch"]
    source = {"staged": STAGED, "mixed": MIXED, "zero_filled": _planted((old, new.replace("1000", "100")))}[name]
    out, report = _split(source, stages=stages)
    assert out is not None, report.skipped
    for trips in (0, 1, 5):
        for shift in (0, 4):
            got, issued = _simulated(out, trips, shift, seed=stages)
            assert got == _simulated(source, trips, shift)[0], (trips, shift)
            bulk = trips and shift == 0 and name != "zero_filled"
            assert (issued == 2 * trips) if bulk else issued == 0, (trips, shift, issued)


def test_the_check_is_what_keeps_misaligned_copies_out() -> None:
    """Without the vote's branch to the fallback, a trip whose sources are 4 bytes off issues misaligned bulk
    copies (the simulator refuses them, as the ISA does): the run-time check is what the safety rests on."""
    out, _ = _split(STAGED)
    assert out is not None
    broken = out.replace("@!%wr_bulk bra $__wr_fallback;", "", 1)
    assert broken != out
    assert _simulated(broken, 2, 0)[0] == _simulated(STAGED, 2, 0)[0]
    with pytest.raises(AssertionError, match="misaligned bulk copy"):
        _simulated(broken, 2, 4)


STEPPED = ("\tbar.sync \t0;\n\tld.shared", "\tadd.s64 \t%rd5, %rd5, 512;\n\tbar.sync \t0;\n\tld.shared")
BULK_REFUSALS = {
    # two threads write one word (thread 2k and 2k + 1): a bulk copy writes each byte once
    "same_bytes": (
        (("\tshl.b32 \t%r7, %r2, 2;", "\tand.b32 \t%r13, %r2, -2;\n\tshl.b32 \t%r7, %r13, 2;"),),
        "write the same bytes of tile in one trip: a bulk copy writes each byte once",
    ),
    # thread t reads a[base + 127 - t]: contiguous, but in the reverse order of the shared words
    "reversed": (
        (("\tadd.s32 \t%r5, %r4, %r2;", "\tsub.s32 \t%r5, %r4, %r2;\n\tadd.s32 \t%r5, %r5, 127;"),),
        "no run of the trip's staged bytes is proven contiguous in global memory in the same order",
    ),
    # the pointer steps by 512 + 4 * (tid & 1) a trip: not the same in every thread, so not followed past trip 0
    "step_by_thread": (
        (
            (
                "\tmov.u32 \t%r12, 0;",
                "\tmov.u32 \t%r12, 0;\n\tand.b32 \t%r13, %r2, 1;\n\tmul.wide.u32 \t%rd9, %r13, 4;",
            ),
            ("\tadd.s64 \t%rd5, %rd5, 512;", "\tadd.s64 \t%rd5, %rd5, 512;\n\tadd.s64 \t%rd5, %rd5, %rd9;"),
        ),
        "is not followed exactly",
    ),
    # the index's high half (mul.hi): not ring arithmetic, not followed
    "mul_hi": (
        (("\tadd.s32 \t%r5, %r4, %r2;", "\tmul.hi.u32 \t%r5, %r2, 7;\n\tadd.s32 \t%r5, %r4, %r5;"),),
        "is not followed exactly",
    ),
    # the pointer steps in the staging part: the check pass and the fallback would both step it
    "stepped_in_staging": (
        (STEPPED, ("\tadd.s64 \t%rd5, %rd5, 512;\n\tadd.s32 \t%r12", "\tadd.s32 \t%r12")),
        "the check pass and the fallback would step it twice",
    ),
    # the ring of 2 x 24576 bytes and its mbarriers (16 bytes a slot) do not fit 48 KB
    "ring_overflow": (
        (("tile[512]", "tile[24576]"),),
        "shared memory does not fit 2 stages: 49184 bytes > 49152",
    ),
    # a computed value, not a copy: the producers' cp.async conversion refuses it
    "computed": (
        ((LOAD, LOAD + "\tadd.f32 \t%f2, %f2, 0f3F800000;\n"),),
        "cp.async producers: ",
    ),
    # below sm_90: no cp.async.bulk (the ISA tables; emit.Forms)
    "sm_80": ((("\n.target sm_90\n", "\n.target sm_80\n"),), "is not available on .target sm_80"),
    # PTX ISA 7.8: no cp.async.bulk, no mbarrier.expect_tx
    "ptx_7_8": ((("\n.version 8.0\n", "\n.version 7.8\n"),), "requires PTX ISA 8.0 or later (.version is 7.8)"),
}


@pytest.mark.parametrize("cause", sorted(BULK_REFUSALS))
def test_refusals(cause: str) -> None:
    edits, reason = BULK_REFUSALS[cause]
    out, report = _split(_planted(*edits))
    assert out is None
    assert [s.kernel for s in report.skipped] == ["staged"]
    assert reason in report.skipped[0].reason, report.skipped[0].reason


@pytest.mark.parametrize("producers", [2, 4])
def test_one_producer_warp_only(producers: int) -> None:
    out, report = _split(STAGED, producer_warps=producers)
    assert out is None
    assert report.skipped[0].reason == f"split-bulk has one producer warp (P = 1), not {producers}"


@pytest.mark.parametrize(
    ("source", "runs", "loose"),
    [
        ("sgemm.cu", [256] * 16, 4096),  # Bs: 16 rows of 64 floats, N floats apart in B; As is A transposed
        ("sgemm_unrolled.cu", [256] * 16, 4096),
        ("stencil.cu", [4128], 0),  # the tile and its halos: 1032 consecutive floats of x
        ("attention.cu", [8192, 8192], 0),  # K and V tiles: 64 keys x 32 floats each
        ("attention_unrolled.cu", [8192, 8192], 0),
    ],
)
def test_runs_of_nvccs_benchmark_kernels(source: str, runs: list[int], loose: int) -> None:
    """The runs footprint.py finds in nvcc's benchmark kernels (sizes in bytes, in slot order) and the bytes left to
    cp.async."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    module = parse(text)
    kernel = module.kernels[0]
    found = find_staged_loop(module, kernel, stages=2, extra_threads=32)
    assert isinstance(found, StagedLoop), found
    cfg = build_cfg(kernel)
    laid = footprint(cfg, found, producer_copies(cfg, found))
    assert isinstance(laid, Footprint), laid
    assert [r.size for r in laid.runs] == runs and laid.loose == loose
    assert all(r.start % 16 == 0 for r in laid.runs)
    # nvcc's bounds checks proven per run: each compare monotone over the run's words, at its two ends
    compares = [(b.op, b.low, b.high) for r in laid.runs[:1] for b in bounds(r.loaded)]
    assert (
        compares
        == {
            "stencil.cu": [("ge", -4, 1027), ("lt", -4, 1027)],  # 0 <= g < n, g = start + i over the tile and halos
            "attention.cu": [("lt", 0, 63)],  # k0 + i / 32 < nkeys over 64 keys
            "attention_unrolled.cu": [("lt", 0, 63)],
            "sgemm.cu": [("lt", 0, 0), ("lt", 0, 63)],  # B's row k0 + r < K, column col0 + c < N over 64 columns
            "sgemm_unrolled.cu": [("lt", 0, 0), ("lt", 0, 63)],
        }[source]
    )


def test_fuzzed_kernels_are_refused_or_split_with_bulk_copies_ptxas_accepts() -> None:
    """Fixed-seed mutants of the planted kernel: each refused with a reason or split into what ptxas accepts (within
    the time bound of fuzz_split)."""
    from test_pass_warp_roles import fuzz_split

    def split(text: str) -> tuple[str, PassReport]:
        module, report = warp_roles(parse(text), RoleSettings(variant="split-bulk"))
        return format_module(module), report

    outcomes = fuzz_split(3, split)
    assert outcomes["split"] and outcomes["refused"], outcomes


def test_fuzzed_splits_keep_their_inputs_bits_on_the_simulator() -> None:
    """Of the same kind of mutants, each one split gives the mutant's own bits on the CPU simulator, aligned (bulk
    copies where the check holds) and 4 bytes off (the fallback); a mutant the simulator cannot run is skipped."""
    rng = random.Random(4)
    lines = STAGED.splitlines()
    body = [n for n, line in enumerate(lines) if line.startswith("\t") and line.rstrip().endswith(";") and "." in line]
    checked = 0
    for _ in range(12):
        mutant = list(lines)
        n = rng.choice(body)
        if rng.random() < 0.5:
            mutant.insert(rng.choice(body), mutant.pop(n))  # moved
        else:
            mutant.insert(n, mutant[n])  # doubled
        text = "\n".join(mutant) + "\n"
        out, _ = _split(text)
        if out is None:
            continue
        for shift in (0, 4):
            try:
                expected = _simulated(text, 2, shift)[0]
            except (AssertionError, KeyError, IndexError, ValueError, ZeroDivisionError):
                break  # not a kernel the simulator runs (a load out of bounds, ...)
            assert _simulated(out, 2, shift)[0] == expected, (n, shift)
            checked += 1
    assert checked >= 4, f"only {checked} mutant launches were split and simulated"


BULK_FORMS = (
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r], [%s], 16, [bar];",
    "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], 16;",
    "fence.proxy.async.shared::cta;",
)


@pytest.mark.usefixtures("ptxas")
@pytest.mark.parametrize(("ptx", "target"), [("8.0", "sm_90"), ("7.8", "sm_90"), ("8.0", "sm_89"), ("8.0", "sm_80")])
def test_isa_tables_agree_with_ptxas(ptx: str, target: str) -> None:
    """What split-bulk adds to the split's forms: the ISA tables call each legal for the file exactly when the
    wheel's ptxas assembles it, so emit.Forms' refusal is ptxas's."""
    from test_pass_warp_roles_sm80 import _legal

    from ptxtool.errors import InputError

    for line in BULK_FORMS:
        body = f".reg .b64 %s;\n.reg .b32 %r;\n.shared .align 8 .b64 bar;\nmov.u32 %r, 0;\nmov.u64 %s, 0;\n{line}"
        text = f".version {ptx}\n.target {target}\n.address_size 64\n.visible .entry k() {{\n{body}\nret;\n}}\n"
        try:
            compile_ptx(text, "form.ptx", target)
            accepted = True
        except InputError:
            accepted = False
        assert _legal(line, ptx, target) == accepted, (line, ptx, target, accepted)


# odd threads' pointers step one float more per trip than even threads': trip 0 reads 128 consecutive floats, trip 1
# does not; the loop-carried pointer's step is not the same in every thread, so no run is proven
UNEVEN = (
    ("\t.reg .b32 \t%r<16>;", "\t.reg .b32 \t%r<24>;"),
    ("\t.reg .b64 \t%rd<10>;", "\t.reg .b64 \t%rd<16>;"),
    (
        "\tmov.u32 \t%r6, tile;",
        "\tand.b32 \t%r20, %r2, 1;\n\tmul.wide.u32 \t%rd11, %r20, 4;\n\tadd.s64 \t%rd12, %rd11, 512;\n"
        "\tmov.u32 \t%r6, tile;",
    ),
    ("\tadd.s64 \t%rd5, %rd5, 512;", "\tadd.s64 \t%rd5, %rd5, %rd12;"),
)


def test_a_pointer_stepped_unevenly_by_thread_is_no_run() -> None:
    """The uneven kernel's tile is contiguous on trip 0 only: its pointer's step depends on %tid.x, so sources.py
    does not follow it past the loop and no run is proven (refused: nothing for a bulk copy). The same kernel with
    the step the same in every thread (a register set before the loop from a constant) is one run of 512 bytes."""
    out, report = _split(_planted(*UNEVEN))
    assert out is None and "no run" in report.skipped[0].reason and "not followed exactly" in report.skipped[0].reason
    even = _planted(*UNEVEN[:2], (UNEVEN[2][0], "\tmov.u64 \t%rd12, 512;\n\tmov.u32 \t%r6, tile;"), UNEVEN[3])
    out, report = _split(even)
    assert out is not None, report.skipped
    assert any("1 run of 512 bytes" in r for r in report.rewrites[0].reasons)
    expected = _simulated(even, 2, 0, pad=4)[0]
    got, issued = _simulated(out, 2, 0, pad=4)
    assert got == expected and issued == 4  # both trips of each of the 2 blocks


def _zero_filled(index: str, compare: str, before: str = "") -> tuple[tuple[str, str], ...]:
    """The staged kernel with `index` (PTX computing %r13 in the staging part) and its word zero-filled where
    `compare` (setting %p3) holds: nvcc's bounds check, a branch around the load."""
    return (
        (
            LOAD,
            f"{index}{before}\tmov.f32 \t%f2, 0f00000000;\n{compare}\t@%p3 bra \t$L__st;\n" + LOAD + "$L__st:\n",
        ),
    )


# i = %r5 + 64 * trip: block b, trip t reads a[128 b n + t] and i = 128 b n + 64 t + tid
_I = "\tshl.b32 \t%r13, %r12, 6;\n\tadd.s32 \t%r13, %r13, %r5;\n"
ZERO_FILL_RULES = {
    # i >= 300 zero-filled: monotone in the run's word (tid), the bound a constant: proven, checked at both ends
    "monotone": (_zero_filled(_I, "\tsetp.ge.u32 \t%p3, %r13, 300;\n"), True),
    # i == 37 zero-filled: not monotone over the run (both ends are loaded, the middle is not): not proven
    "not_monotone": (_zero_filled(_I, "\tsetp.eq.u32 \t%p3, %r13, 37;\n"), False),
    # i >= 400 - tid zero-filled: the bound differs from word to word as the index does: not proven
    "bound_per_thread": (
        _zero_filled(
            _I, "\tsetp.ge.u32 \t%p3, %r13, %r14;\n", "\tmov.u32 \t%r14, 400;\n\tsub.s32 \t%r14, %r14, %r2;\n"
        ),
        False,
    ),
    # i >= (a[0]'s bits >> 24) zero-filled: a bound loaded from memory is not followed: not proven
    "loaded_bound": (
        _zero_filled(
            _I,
            "\tsetp.ge.u32 \t%p3, %r13, %r14;\n",
            "\tld.global.nc.u32 \t%r14, [%rd3];\n\tshr.u32 \t%r14, %r14, 24;\n",
        ),
        False,
    ),
    # j = i + 429496700 n (n = 5: 2^31 - 148 + i) wraps inside the run on trips 1 and 2; j < -2^31 + 48 zero-filled:
    # on trip 2 both ends are loaded and tid 20..67 are not, so only the no-wrap check keeps the trip off bulk
    "wraps": (
        _zero_filled(
            _I + "\tmul.lo.s32 \t%r14, %r1, 429496700;\n\tadd.s32 \t%r13, %r13, %r14;\n",
            "\tsetp.lt.s32 \t%p3, %r13, -2147483600;\n",
        ),
        True,
    ),
}


@pytest.mark.parametrize("rule", sorted(ZERO_FILL_RULES))
def test_zero_fill_proven_per_run_or_checked_per_word(rule: str) -> None:
    """A bounds check whose compare is monotone over a run's words with a bound the same in every word is proven per
    run (no check pass: the compare at the run's two ends and its no-wrap check); one that is not (a compare not
    monotone, a bound that varies per thread or is loaded) keeps the check pass's per-word flags. Either way the
    input's bits on the simulator, aligned (bulk trips where no run word is zero-filled) and 4 bytes off."""
    edits, proven = ZERO_FILL_RULES[rule]
    source = _planted(*edits)
    out, report = _split(source)
    assert out is not None, report.skipped
    flagged = "and.pred %wr_ok, %wr_ok, %wr_cp0;" in _trip(out)
    assert flagged != proven, flagged
    assert ("%wr_g0" in _trip(out)) == proven
    bulk = 0
    for shift in (0, 4):
        expected = _simulated(source, 5, shift)[0]
        assert expected != _simulated(STAGED, 5, shift)[0]  # some word is zero-filled
        got, issued = _simulated(out, 5, shift, seed=3)
        assert got == expected, shift
        bulk += issued
    assert 0 < bulk < 10  # some trips in bulk (aligned), the zero-filled ones fall back
    if rule == "wraps":  # without the no-wrap check, trip 2 goes in bulk: the wrong bits
        broken = out.replace("setp.lt.s64 %wr_q, %wr_hi, 2147483648;", "setp.lt.s64 %wr_q, %wr_hi, 4294967296;")
        assert broken != out
        assert _simulated(broken, 5, 0, seed=3)[0] != _simulated(source, 5, 0)[0]


# thread t stores tile[t + 1]: slot bytes 4..516, trimmed to the run [16, 512); the one store writes the loose words
# of threads 0, 1, 2 and 127 and the run words of the others
SHIFTED = (
    ("tile[512]", "tile[528]"),
    ("\tshl.b32 \t%r7, %r2, 2;", "\tadd.s32 \t%r13, %r2, 1;\n\tshl.b32 \t%r7, %r13, 2;"),
)


def test_a_store_writing_run_and_loose_words() -> None:
    """A store whose words are in a run for some threads and loose for others tells them apart at run time by its
    slot offset against the runs' span: loose ones copied in the check pass, run ones on the fallback. The input's
    bits on the simulator: with the tile 4 bytes past 16-byte alignment the run's source is aligned (bulk), at 0 it
    is not (every trip falls back)."""
    source = _planted(*SHIFTED)
    out, report = _split(source)
    assert out is not None, report.skipped
    trip = _trip(out)
    assert "setp.lt.u32 %wr_q, %wr_rb, 496;" in trip  # offset - 16 < 496: in the run [16, 512)
    check = trip[trip.index("mov.pred %wr_ok, 1;") : trip.index("%wr_at")]
    fallback = trip[trip.index("$__wr_fallback:") : trip.index("$__wr_staged:")]
    assert len(re.findall(r"@%wr_loose cp\.async\.ca", check)) == 4
    assert len(re.findall(r"@!%wr_loose cp\.async\.ca", fallback)) == 4
    for shift, bulk in ((0, 0), (4, 10)):
        got, issued = _simulated(out, 5, shift, pad=4)
        assert got == _simulated(source, 5, shift, pad=4)[0] and issued == bulk, (shift, issued)
    broken = out.replace("mov.pred %wr_loose, 1;", "mov.pred %wr_loose, 0;")
    assert broken != out  # every word taken as a run word: on bulk trips the loose ones are never copied
    assert _simulated(broken, 5, 4, pad=4)[0] != _simulated(source, 5, 4, pad=4)[0]

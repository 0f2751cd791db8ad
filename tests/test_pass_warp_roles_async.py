"""The split with cp.async producers (`--variant split-async`): the producers' staging stores become cp.async (the
pipeline's conversion and proofs, copies.py) and each producer thread arrives on full[slot] with
`cp.async.mbarrier.arrive.noinc` when its copies land. Checked on the output: the producers' part (copies per
share, one noinc arrival per trip, no st.shared left, wait_all before they return), the consumers' part as the ld+st
split's, mbarrier init counts that match the arrivals; nvcc's bounds-checked staging as zero-filling copies; each
refusal of the conversion planted and said (never a silent ld+st split); ptxas's acceptance with the SASS's LDGSTS
and ARRIVES.LDGSTSBAR on the planted kernel and on nvcc's benchmark inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_pass_warp_roles import BENCHMARKS, STAGED, fuzz_split
from test_pass_warp_roles_pipeline import REFUSALS, ZERO_FILLS, _planted

from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import RoleSettings, sass_proof, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx

ARRIVE = "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%wr_bar];"


def _split(text: str, variant: str = "split-async", **settings) -> tuple[str | None, PassReport]:
    out, report = warp_roles(parse(text), RoleSettings(variant=variant, **settings))
    return (format_module(out) if report.rewrites else None), report


def _roles(text: str) -> tuple[str, str]:
    """The consumers' code (up to the role branch's target) and the producers' (after it)."""
    consumers, _, producers = text.partition("$__wr_producer:")
    return consumers, producers


def _assembles_with_proof(text: str, kernel: str, arch: str = "sm_90") -> None:
    """ptxas takes it without spills and the SASS holds what optimize requires of it (sass_proof): the ring's
    SYNCS, the producers' LDGSTS and their ARRIVES.LDGSTSBAR."""
    from ptxtool.toolchain.sass import disassemble, missing

    compiled = compile_ptx(text, "split.ptx", arch)
    assert compiled.functions[kernel].spill_bytes == 0
    proof = sass_proof(next(k for k in parse(text).kernels if k.name == kernel), arch)
    ring = ["SYNCS.PHASECHK", "SYNCS.ARRIVE"] if arch.startswith("sm_9") else ["MEMBAR.ALL.CTA", "ATOMS.ARRIVE"]
    assert {"LDGSTS", "ARRIVES.LDGSTSBAR", *ring} <= {m.name for m in proof}, proof
    sass = disassemble(compiled.cubin)[kernel]
    assert not missing(proof, sass), (proof, [i.opcode for i in sass])


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("producers", [None, 1, 2])
def test_structure(producers: int | None, stages: int) -> None:
    """Per producer trip: one wait on empty, one cp.async per share into the slot (no ld.global, no st.shared
    left), then exactly one noinc arrival on full[slot] after the last copy and no ordinary arrival; full's init
    count is the producer threads (each arrives once per trip, and .noinc counts that arrival against the init
    count), empty's the consumers (each arrives once per trip); the consumers' part is the ld+st split's."""
    out, report = _split(STAGED, producer_warps=producers, stages=stages)
    assert out is not None, report.skipped
    warps = producers or 4
    shares = 4 // warps
    assert f".reqntid {128 + 32 * warps}, 1, 1" in out
    for s in range(stages):
        assert f"mbarrier.init.shared::cta.b64 [__wr_full+{8 * s}], {32 * warps};" in out
        assert f"mbarrier.init.shared::cta.b64 [__wr_empty+{8 * s}], 128;" in out
    consumers, producer = _roles(out)
    loop = producer[producer.index("$__wr_p$L__loop:") : producer.index("$__wr_p$L__done:")]
    assert loop.count("mbarrier.try_wait") == 1 and loop.count(ARRIVE) == 1
    assert "mbarrier.arrive.shared" not in loop and "st.shared" not in producer and "ld.global" not in producer
    copies = re.findall(r"cp\.async\.ca\.shared\.global \[%wr_a0\], \[%wr_src0\], 4;", loop)
    assert len(copies) == shares
    assert loop.index(ARRIVE) > loop.rindex("cp.async.ca")
    assert "mov.u32 %wr_bar, __wr_full;\n\tmad.lo.u32 %wr_bar, %wr_slot, 8, %wr_bar;\n\t" + ARRIVE in loop
    # each share's copy reads its own pointer and writes its own address moved into the trip's slot
    for j in range(shares):
        prefix = f"%wr_s{j}_" if j else "%"
        taken = f"add.s64 %wr_src0, {prefix}rd5, 0;\n\tmov.u32 %wr_a0, {prefix}r8;\n\t"
        assert taken + "add.u32 %wr_a0, %wr_a0, %wr_off;" in loop
    assert producer.rstrip().endswith("$__wr_p$L__done:\n\tcp.async.wait_all;\n\tret;\n}")
    plain, _ = _split(STAGED, "split", producer_warps=producers, stages=stages)
    after_declarations = "mov.u32 %wr_tid, %tid.x;"
    assert (
        plain is not None
        and _roles(plain)[0].partition(after_declarations)[2] == consumers.partition(after_declarations)[2]
    )
    assert "cp.async" not in consumers.partition(after_declarations)[2]
    said = "producers copy with cp.async: 1 per consumer thread and trip, 0 zero-filled"
    assert said in report.rewrites[0].reasons[3]
    _assembles_with_proof(out, "staged")


@pytest.mark.parametrize("form", sorted(ZERO_FILLS))
def test_bounds_checked_staging_becomes_zero_filling_copies(form: str) -> None:
    """nvcc's `in bounds ? load : 0.f` (a branch around the load, a predicated load, a selp) in the producers: the
    copy reads 4 bytes where the load would have run and 0 (zero-filling all 4) where the zero would have been
    stored, each share's flag set from its own registers."""
    out, report = _split(_planted(ZERO_FILLS[form]), producer_warps=2)
    assert out is not None, report.skipped
    loop = _roles(out)[1].partition("$__wr_p$L__loop:")[2]
    assert loop.count("selp.u32 %wr_n0, 4, 0, %wr_cp0;") == 2
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \[%wr_a0\], \[%wr_src0\], 4, %wr_n0;", loop)) == 2
    if form == "selp":
        assert "mov.pred %wr_cp0, %p3;" in loop and "mov.pred %wr_cp0, %wr_s1_p3;" in loop
    elif form == "predicated":
        assert "@%wr_s1_p3 mov.pred %wr_cp0, 1;" in loop and "@%wr_s1_p3 add.s64 %wr_src0, %wr_s1_rd5, 0;" in loop
    else:
        assert loop.index("mov.pred %wr_cp0, 0;") < loop.index("mov.pred %wr_cp0, 1;")
    assert ", 1 zero-filled where the input stored zero," in report.rewrites[0].reasons[3]
    _assembles_with_proof(out, "staged")


# the pipeline's planted kernels whose staging cannot become cp.async: the ld+st split takes each (it needs no
# conversion), split-async refuses each with the conversion's reason; never an ld+st split said to be cp.async
COPY_REFUSALS = (
    "address_per_trip",
    "computed_value",
    "inner_loop",
    "negative_zero",
    "nonzero_else",
    "overlapping_pair",
    "store_on_some_trips",
    "unaligned_copy",
    "unproven_pair",
)


STALE_SLOTS = ("address_per_trip", "store_on_some_trips")  # refused by the ld+st split as well


@pytest.mark.parametrize("case", COPY_REFUSALS)
def test_conversion_refusal_is_said(case: str) -> None:
    edit, reason, *more = REFUSALS[case]
    text = _planted(edit, *more)
    for producers in (None, 1):
        out, report = _split(text, producer_warps=producers)
        assert out is None and len(report.skipped) == 1, out
        said = report.skipped[0].reason
        assert said.startswith("cp.async producers: ") and reason in said and "\n" not in said, said
        plain, plain_report = _split(text, "split", producer_warps=producers)
        if case in STALE_SLOTS:  # the ld+st split's producers fill ring slots too: a skipped byte would be S trips old
            assert plain is None and "S trips before" in plain_report.skipped[0].reason
        else:
            assert plain is not None


@pytest.mark.parametrize("case", ["plain_read", "relaxed_load"])
def test_the_splits_own_refusals_stand(case: str) -> None:
    """What refuses the ld+st split refuses split-async with the same reason, before any conversion."""
    edit, _, *more = REFUSALS[case]
    text = _planted(edit, *more)
    _, plain = _split(text, "split")
    out, report = _split(text)
    assert out is None and report.skipped[0].reason == plain.skipped[0].reason


def test_disjoint_pair_copies_both() -> None:
    """Two copies of one thread at offsets 0 and 512 from one base (disjoint for every %tid.x): two cp.asyncs per
    share before the one arrival."""
    from test_pass_warp_roles_pipeline import STORE

    text = _planted(
        ("tile[512]", "tile[1024]"),
        (STORE, STORE + "\tld.global.nc.f32 \t%f4, [%rd5+4];\n\tst.shared.f32 \t[%r8+512], %f4;\n"),
    )
    out, report = _split(text, producer_warps=1, stages=3)
    assert out is not None, report.skipped
    loop = _roles(out)[1].partition("$__wr_p$L__loop:")[2]
    assert loop.count("cp.async.ca.shared.global") == 2 * 4 and loop.count(ARRIVE) == 1
    assert "[%wr_a0+512], [%wr_src1], 4;" in loop
    _assembles_with_proof(out, "staged")


def test_setmaxnreg_with_copying_producers() -> None:
    """On sm_90a with one producer warpgroup (P = 4) and setmaxnreg asked: the registers move and the producers
    copy; the SASS shows both (USETMAXREG, LDGSTS)."""
    text = STAGED.replace(".target sm_90", ".target sm_90a")
    out, report = _split(text, producer_warps=4, setmaxnreg=True)
    assert out is not None, report.skipped
    assert "setmaxnreg.dec.sync.aligned.u32" in out and ARRIVE in out
    assert "USETMAXREG" in {m.name for m in sass_proof(parse(out).kernels[0], "sm_90a")}
    _assembles_with_proof(out, "staged", "sm_90a")


def test_split_async_twice_is_refused() -> None:
    once, _ = _split(STAGED)
    assert once is not None
    twice, report = _split(once)
    assert twice is None and report.skipped


@pytest.mark.parametrize("producers", [None, 2])
@pytest.mark.parametrize(
    ("source", "kernel", "copies"),
    [
        ("sgemm_unrolled.cu", "sgemm_unrolled", 8),
        ("attention_unrolled.cu", "attention_unrolled", 32),
        ("sgemm.cu", "sgemm_tiled", 14),
        ("stencil.cu", "stencil_tiled", 7),
        ("attention.cu", "attention_tiled", 14),
    ],
)
def test_nvccs_benchmark_kernels(source: str, kernel: str, copies: int, producers: int | None) -> None:
    """nvcc's benchmark inputs become zero-filling copies in the producers, assembled with the SASS proof: the
    constant-trip fills (8 and 32 bounds-checked stores per consumer thread) and the thread-strided fill loops (14,
    7, 14 stores of nvcc's peeled and unrolled loops, each share running its consumer thread's loop; fills.py)."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_90")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    out, report = _split(text, producer_warps=producers)
    assert out is not None, report.skipped
    assert f"{copies} per consumer thread and trip" in report.rewrites[0].reasons[3]
    assert f", {copies} zero-filled" in report.rewrites[0].reasons[3]
    _assembles_with_proof(out, kernel)


def test_optimize_cli_checks_the_copies_in_the_sass(tmp_path: Path) -> None:
    """`optimize --passes warp-roles --variant split-async` writes the split with copying producers; a refused
    conversion is said on stderr (exit 0, the input kept) without -v."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(STAGED)
    args = ["optimize", "--passes", "warp-roles", "--variant", "split-async", "--producer-warps", "1"]
    run = CliRunner().invoke(main, [*args, str(source), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert ".reqntid 160, 1, 1" in out.read_text() and ARRIVE in out.read_text()
    edit, reason, *more = REFUSALS["computed_value"]
    source.write_text(_planted(edit, *more))
    run = CliRunner().invoke(main, [*args, str(source), "-o", str(out)])
    assert "cp.async producers: " in run.output and reason in run.output


def test_fuzzed_kernels_are_refused_or_split_with_copies_ptxas_accepts() -> None:
    def split(text: str) -> tuple[str, PassReport]:
        module, report = warp_roles(parse(text), RoleSettings(variant="split-async", producer_warps=1))
        return format_module(module), report

    outcomes = fuzz_split(2, split)
    assert outcomes["split"] and outcomes["refused"], outcomes


def _simulated(text: str, trips: int = 5, blocks: int = 2, seed: int = 0) -> bytes:
    """The output buffer after a simulated launch (tests/ptx_sim_roles.py: copies land as late as they may, in a
    random order; mbarrier phases as the PTX ISA counts them) of `blocks` CTAs over `trips` tiles of random floats."""
    import random
    import struct

    from ptx_sim_roles import block_threads, run_grid

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * trips * 128))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    run_grid(text, block_threads(text), blocks, [0, len(data), trips], memory, seed)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize(("producers", "stages"), [(None, 2), (1, 3)])
def test_outputs_match_on_a_simulated_cta(producers: int | None, stages: int) -> None:
    """The split with copying producers gives the input's bits on the CPU simulator for 0..5 trips, as the ld+st
    split does."""
    out, _ = _split(STAGED, producer_warps=producers, stages=stages)
    plain, _ = _split(STAGED, "split", producer_warps=producers, stages=stages)
    assert out is not None and plain is not None
    for trips in (0, 1, 5):
        assert _simulated(out, trips, seed=stages) == _simulated(STAGED, trips)
    assert _simulated(plain, seed=stages) == _simulated(STAGED)


def test_wrong_arrivals_are_caught_on_a_simulated_cta() -> None:
    """What the simulator catches: an ordinary arrival in place of the copies' (the consumers may read a slot before
    its copies land) gives other bits; a full count the arrivals never reach does not finish."""
    out, _ = _split(STAGED, producer_warps=1)
    assert out is not None
    early = out.replace(ARRIVE, "mbarrier.arrive.shared::cta.b64 %wr_state, [%wr_bar];")
    assert _simulated(early, blocks=1) != _simulated(STAGED, blocks=1)
    short = out.replace("[__wr_full+0], 32;", "[__wr_full+0], 64;")
    with pytest.raises(AssertionError, match="does not finish"):
        _simulated(short, blocks=1)


@pytest.mark.parametrize("form", sorted(ZERO_FILLS))
def test_zero_filled_outputs_match_on_a_simulated_cta(form: str) -> None:
    """Threads of the second CTA past element 700 take the zero path: the producers' zero-filling copies give the
    input's bits; copying 4 bytes on the zero path too gives other bits."""
    text = _planted((ZERO_FILLS[form][0], ZERO_FILLS[form][1].replace("1000", "700")))
    expected = _simulated(text)
    out, _ = _split(text, producer_warps=2, stages=3)
    assert out is not None
    assert _simulated(out, seed=3) == expected
    assert _simulated(out.replace("selp.u32 %wr_n0, 4, 0,", "selp.u32 %wr_n0, 4, 4,"), seed=3) != expected


def test_optimize_requires_the_copies_in_the_sass(monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize keeps the input and fails (a problem naming the kernel) where the SASS of a split promised to copy
    asynchronously lacks the copies (LDGSTS) or their arrival (ARRIVES.LDGSTSBAR): nvdisasm's answer without them."""
    from ptxtool.passes.warp_roles import NAME
    from ptxtool.services import optimize
    from ptxtool.sources import Source

    real = optimize.disassemble

    def without_copies(cubin: bytes):
        return {k: [i for i in v if not i.opcode.startswith(("LDGSTS", "ARRIVES"))] for k, v in real(cubin).items()}

    options = optimize.Options(passes=(NAME,), roles=RoleSettings(variant="split-async"))
    source = Source("staged.ptx", STAGED)
    assert optimize.execute(options, source).verified
    monkeypatch.setattr(optimize, "disassemble", without_copies)
    result = optimize.execute(options, source)
    assert not result.verified and result.text == STAGED
    said = " ".join(str(p) for p in result.problems)
    assert "staged: the SASS lacks LDGSTS, ARRIVES.LDGSTSBAR" in said, said

"""The split (ld+st and cp.async producers) on sm_80..sm_89: `mbarrier.test_wait` where the target has no try_wait,
`.shared` where the file's PTX ISA predates `.shared::cta` (7.8), a refusal naming the first instruction the file
cannot hold; every choice asked of the ISA tables, which the wheel's ptxas confirms form by form. The output is
assembled for each target and its SASS holds what `sass_proof` asks of that generation (no SYNCS unit before sm_90:
ATOMS.ARRIVE after MEMBAR.ALL.CTA, and the test of the mbarrier's phase bit), which the input and a split with its
barrier operations taken out do not; the CPU simulator gives the input's bits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_pass_warp_roles import BENCHMARKS, STAGED

from ptxtool import isa
from ptxtool.errors import InputError
from ptxtool.isa.targets import Target, version
from ptxtool.passes.report import PassReport
from ptxtool.passes.warp_roles import RoleSettings, sass_proof, warp_roles
from ptxtool.syntax import ast, format_module, parse
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.sass import disassemble, missing

AMPERE = ("sm_80", "sm_86", "sm_87", "sm_89")
VARIANTS = ("split", "split-async")
PHASE_BIT = "LOP3.LUT P,RZ,R,0x80000000 (phase bit)"


def _retargeted(text: str, target: str, ptx: str | None = None) -> str:
    text = re.sub(r"^\.target sm_\w+$", f".target {target}", text, count=1, flags=re.M)
    return re.sub(r"^\.version \d+\.\d+$", f".version {ptx}", text, count=1, flags=re.M) if ptx else text


def _split(text: str, variant: str = "split", **settings) -> tuple[str | None, PassReport]:
    out, report = warp_roles(parse(text), RoleSettings(variant=variant, **settings))
    return (format_module(out) if report.rewrites else None), report


def _missing(text: str, kernel: str, arch: str, proof_of: str | None = None) -> list[str]:
    """What the split's SASS proof for `arch` (of the split `proof_of`, else of `text` itself) misses in `text`'s
    SASS, ptxas assembling it for `arch`."""
    compiled = compile_ptx(text, "split.ptx", arch)
    assert compiled.functions[kernel].spill_bytes == 0
    function = next(k for k in parse(proof_of or text).kernels if k.name == kernel)
    return missing(sass_proof(function, arch), disassemble(compiled.cubin)[kernel])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("target", AMPERE)
def test_split_assembles_with_its_proof(target: str, variant: str) -> None:
    """On each sm_8x target both splits are made (not refused), use test_wait (try_wait is sm_90's), ptxas takes
    them, and their SASS shows the generation's mbarrier marks; the roles and ring are the sm_90 split's."""
    text = _retargeted(STAGED, target)
    out, report = _split(text, variant)
    assert out is not None, report.skipped
    assert "mbarrier.try_wait" not in out
    consumers, _, producers = out.partition("$__wr_producer:")
    assert "mbarrier.test_wait.parity.shared::cta.b64 %wr_done, [%wr_bar], %wr_ph;" in consumers
    assert "mbarrier.test_wait.parity.shared::cta.b64 %wr_done, [%wr_bar], %wr_eph;" in producers
    assert "mbarrier.arrive.shared::cta.b64 %wr_state, [%wr_ebar];" in consumers
    arrival = "cp.async.mbarrier.arrive.noinc" if variant == "split-async" else "mbarrier.arrive"
    assert f"{arrival}.shared::cta.b64" in producers
    sm90, _ = _split(STAGED, variant)
    assert sm90 is not None
    assert out.replace("test_wait", "try_wait").replace(f".target {target}", ".target sm_90") == sm90
    assert _missing(out, "staged", target) == []
    proof = {m.name for m in sass_proof(parse(out).kernels[0], target)}
    assert {PHASE_BIT, "MEMBAR.ALL.CTA", "ATOMS.ARRIVE"} <= proof and not any("SYNCS" in m for m in proof)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("ptx", "space"), [("7.1", "shared"), ("7.7", "shared"), ("7.8", "shared::cta")])
def test_shared_cta_only_from_ptx_7_8(ptx: str, space: str, variant: str) -> None:
    """`.shared::cta` on mbarrier and cp.async.mbarrier came with PTX ISA 7.8; before, the split writes `.shared`
    (the same state space: the CTA's shared memory), which ptxas takes at that version."""
    text = _retargeted(STAGED, "sm_80", ptx)
    out, report = _split(text, variant, producer_warps=1)
    assert out is not None, report.skipped
    mbarriers = [line for line in out.splitlines() if "mbarrier." in line]
    assert mbarriers and all(f".{space}.b64 " in line for line in mbarriers), mbarriers
    assert ("::cta" in out) == (space == "shared::cta")
    assert _missing(out, "staged", "sm_80") == []


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    ("target", "ptx", "reason"),
    [
        (
            "sm_80",
            "7.0",
            "the split would write mbarrier.test_wait.parity.shared.b64: '.parity' on 'mbarrier.test_wait' requires "
            "PTX ISA 7.1 or later (.version is 7.0)",
        ),
        (
            "sm_75",
            "7.8",
            "the split would write mbarrier.init.shared::cta.b64: instruction 'mbarrier.init' is not available on "
            ".target sm_75 (needs sm_80 or later)",
        ),
    ],
)
def test_refused_where_the_file_cannot_hold_an_instruction(target: str, ptx: str, reason: str, variant: str) -> None:
    """Below PTX ISA 7.1 there is no parity wait, below sm_80 no mbarrier: one line names the first instruction the
    split would write that the file's .version/.target does not allow, and the kernel is left as it is."""
    text = _retargeted(STAGED, target, ptx)
    out, report = _split(text, variant)
    assert out is None and [s.reason for s in report.skipped] == [reason]


@pytest.mark.parametrize(("target", "ptx"), [("sm_90", "7.8"), ("sm_90a", "8.0"), ("sm_100", "8.6")])
def test_sm90_and_later_keep_try_wait(target: str, ptx: str) -> None:
    """Targets with try_wait keep it (and `.shared::cta`), and their SASS proof is SYNCS as before."""
    out, _ = _split(_retargeted(STAGED, target, ptx))
    assert out is not None and "mbarrier.try_wait.parity.shared::cta.b64" in out and "test_wait" not in out
    assert {m.name for m in sass_proof(parse(out).kernels[0], target)} == {"SYNCS.PHASECHK", "SYNCS.ARRIVE"}
    assert _missing(out, "staged", target) == []


@pytest.mark.parametrize("target", ("sm_80", "sm_89"))
def test_proof_fails_without_the_barrier_operations(target: str) -> None:
    """The proof is not met by code that merely resembles the split: the input kernel's SASS lacks every mark, a
    split whose waits are taken out lacks the phase-bit test, one whose ordinary arrivals are taken out lacks
    ATOMS.ARRIVE (and the release fence before it)."""
    out, _ = _split(_retargeted(STAGED, target))
    assert out is not None
    proof = [m.name for m in sass_proof(parse(out).kernels[0], target)]
    assert _missing(_retargeted(STAGED, target), "staged", target, proof_of=out) == proof
    no_waits = re.sub(r"mbarrier\.test_wait\.parity\.shared::cta\.b64 %wr_done, [^;]*;", "mov.pred %wr_done, 1;", out)
    assert no_waits != out and _missing(no_waits, "staged", target, proof_of=out) == [PHASE_BIT]
    no_arrivals = re.sub(r"\tmbarrier\.arrive\.shared::cta\.b64 [^;]*;\n", "", out)
    assert no_arrivals != out
    assert _missing(no_arrivals, "staged", target, proof_of=out) == ["MEMBAR.ALL.CTA", "ATOMS.ARRIVE"]


def test_optimize_checks_the_sm80_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """`optimize` assembles the sm_80 split for sm_80 and asks its SASS for the sm_8x marks: with them the split is
    written; where nvdisasm's answer lacks the arrivals, the input is kept and the run fails naming them."""
    from ptxtool.passes.warp_roles import NAME
    from ptxtool.services import optimize
    from ptxtool.sources import Source

    source = Source("staged.ptx", _retargeted(STAGED, "sm_80"))
    options = optimize.Options(passes=(NAME,), roles=RoleSettings())
    result = optimize.execute(options, source)
    assert result.verified and result.changed and "mbarrier.test_wait" in result.text
    real = optimize.disassemble

    def without_arrivals(cubin: bytes):
        return {k: [i for i in v if not i.opcode.startswith("ATOMS.ARRIVE")] for k, v in real(cubin).items()}

    monkeypatch.setattr(optimize, "disassemble", without_arrivals)
    result = optimize.execute(options, source)
    assert not result.verified and result.text == source.text
    said = " ".join(str(p) for p in result.problems)
    assert "staged: the SASS lacks ATOMS.ARRIVE" in said, said


@pytest.mark.parametrize(
    ("source", "kernel", "variant"),
    [
        ("sgemm.cu", "sgemm_tiled", "split"),
        ("stencil.cu", "stencil_tiled", "split"),
        ("attention.cu", "attention_tiled", "split"),
        ("sgemm_unrolled.cu", "sgemm_unrolled", "split-async"),
    ],
)
def test_nvccs_sm80_benchmark_kernels(source: str, kernel: str, variant: str) -> None:
    """nvcc's sm_80 PTX of the benchmark kernels is split (P = N/32 and 1), ptxas takes it for sm_80 without spills
    and its SASS holds the proof; the proof is missing from the input's SASS (ordinary code does not forge it)."""
    from ptxtool.errors import EnvironmentProblem
    from ptxtool.toolchain.compile import cuda_to_ptx

    try:
        text = cuda_to_ptx(str(BENCHMARKS / source), "sm_80")
    except EnvironmentProblem as problem:
        pytest.skip(f"no nvcc: {problem}")
    for producers in (None, 1):
        out, report = _split(text, variant, producer_warps=producers)
        assert out is not None and [r.kernel for r in report.rewrites] == [kernel], report.skipped
        assert "mbarrier.test_wait.parity" in out and "try_wait" not in out
        assert _missing(out, kernel, "sm_80") == []
    assert PHASE_BIT in _missing(text, kernel, "sm_80", proof_of=out)


def _legal(line: str, ptx: str, target: str) -> bool:
    """What the ISA tables say of one instruction in a file of this .version and .target."""
    module = parse(f".version {ptx}\n.target {target}\n.address_size 64\n.entry k() {{\n{line}\n}}\n")
    (i,) = module.kernels[0].body.statements
    assert isinstance(i, ast.Instruction)
    v, t = version(ptx), Target.parse(target)
    assert v is not None and t is not None
    return all(isa.satisfied(r.needs, v, (t,)) for r in isa.requirements(i))


FORMS = (
    "mbarrier.init.{space}.b64 [bar], 32;",
    "mbarrier.arrive.{space}.b64 %s, [bar];",
    "mbarrier.test_wait.parity.{space}.b64 %q, [bar], %r;",
    "mbarrier.try_wait.parity.{space}.b64 %q, [bar], %r;",
    "cp.async.mbarrier.arrive.noinc.{space}.b64 [bar];",
)


@pytest.mark.parametrize(("ptx", "target"), [("7.0", "sm_80"), ("7.1", "sm_80"), ("7.7", "sm_86"), ("7.8", "sm_89")])
def test_isa_tables_agree_with_ptxas(ptx: str, target: str) -> None:
    """Each form the split may write, with `.shared` and `.shared::cta`: the ISA tables call it legal for the file
    exactly when the wheel's ptxas assembles it (so the pass's choices and refusals are ptxas's)."""
    for form in FORMS:
        for space in ("shared", "shared::cta"):
            line = form.format(space=space)
            body = f".reg .pred %q;\n.reg .b64 %s;\n.reg .b32 %r;\n.shared .align 8 .b64 bar;\nmov.u32 %r, 0;\n{line}"
            text = f".version {ptx}\n.target {target}\n.address_size 64\n.visible .entry k() {{\n{body}\nret;\n}}\n"
            try:
                compile_ptx(text, "form.ptx", target)
                accepted = True
            except InputError:
                accepted = False
            assert _legal(line, ptx, target) == accepted, (line, ptx, target, accepted)


def _simulated(text: str, trips: int = 5, blocks: int = 2, seed: int = 0) -> bytes:
    """The output buffer after a simulated launch of `blocks` CTAs over `trips` tiles of random floats
    (tests/ptx_sim_roles.py: mbarrier phases as the PTX ISA counts them; test_wait as try_wait, a probe that
    yields)."""
    import random
    import struct

    from ptx_sim_roles import block_threads, run_grid

    rng = random.Random(1)
    data = b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(blocks * trips * 128))
    memory = bytearray(data) + bytearray(blocks * 128 * 4)
    run_grid(text, block_threads(text), blocks, [0, len(data), trips], memory, seed)
    return bytes(memory[len(data) :])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("ptx", "producers", "stages"), [("8.0", None, 2), ("7.1", 1, 3)])
def test_sm80_split_gives_the_inputs_bits_on_the_simulator(
    ptx: str, producers: int | None, stages: int, variant: str
) -> None:
    """The sm_80 splits (test_wait; `.shared` at PTX 7.1) give the input's bits for 0, 1 and 5 trips; without the
    consumers' wait on full they run a phase ahead of the producers, whose parity wait on empty then never passes
    (the simulated CTA does not finish)."""
    text = _retargeted(STAGED, "sm_80", ptx)
    out, _ = _split(text, variant, producer_warps=producers, stages=stages)
    assert out is not None and "mbarrier.test_wait.parity" in out
    for trips in (0, 1, 5):
        assert _simulated(out, trips, seed=stages) == _simulated(STAGED, trips)
    consumers, _, producers_code = out.partition("$__wr_producer:")
    unguarded = re.sub(r"mbarrier\.test_wait\.parity\.[\w:]+\.b64 %wr_done, [^;]*;", "mov.pred %wr_done, 1;", consumers)
    unguarded += "$__wr_producer:" + producers_code
    with pytest.raises(AssertionError, match="does not finish"):  # consumers run phases ahead: parity waits hang
        _simulated(unguarded, 1, seed=stages)


def test_refusal_is_said_by_the_cli(tmp_path: Path) -> None:
    """`optimize --passes warp-roles` on an sm_80 file at PTX ISA 7.0 writes the input and says why (exit 0)."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(_retargeted(STAGED, "sm_80", "7.0"))
    run = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", str(source), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "'.parity' on 'mbarrier.test_wait' requires PTX ISA 7.1" in run.output, run.output
    assert out.read_text() == source.read_text()

"""setmaxnreg in the warp-role split: registers move from producer warpgroups to consumer warpgroups where
ptxas's count for the input does not fit the grown block (or when asked). The PTX ISA's rules are planted one by
one: a target without setmaxnreg, roles not aligned to warpgroups, a kernel with its own .maxnreg, a pool too small
for the consumers; the output must declare the launch count, keep C x consumers + D x producers within the pool,
and ptxas's SASS must show USETMAXREG."""

from __future__ import annotations

import pytest
from test_pass_warp_roles import STAGED

from ptxtool.isa.targets import REGISTERS_PER_CTA
from ptxtool.passes.warp_roles import RoleSettings, launch_registers, warp_roles
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.sass import disassemble


def _wide(target: str = "sm_90a") -> str:
    """The planted kernel with 512 threads (four warpgroups), one float per thread per trip as before."""
    text = STAGED.replace(".target sm_90", f".target {target}").replace(".reqntid 128, 1, 1", ".reqntid 512, 1, 1")
    for old, new in (
        ("shl.b32 \t%r4, %r4, 7;", "shl.b32 \t%r4, %r4, 9;"),
        ("add.s64 \t%rd5, %rd5, 512;", "add.s64 \t%rd5, %rd5, 2048;"),
        ("tile[512]", "tile[2048]"),
        ("mad.lo.s32 \t%r14, %r3, 128, %r2;", "mad.lo.s32 \t%r14, %r3, 512, %r2;"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    return text


def _split(text: str, registers: int | None = None, **settings) -> tuple[str, object]:
    given = {"staged": registers} if registers else None
    out, report = warp_roles(parse(text), RoleSettings(registers=given, **settings))
    return format_module(out), report


def test_consumers_that_would_not_fit_get_the_producers_registers() -> None:
    """512 consumers needing 100 registers, 4 producer warps: 640 threads launch with 96 each (.maxnreg 96);
    producers give up to 40, consumers take 104 >= 100, and 512 x 104 + 128 x 40 fits the 640 x 96 pool."""
    text, report = _split(_wide(), registers=100, producer_warps=4)
    (rewrite,) = report.rewrites
    assert rewrite.after == "640 threads (.reqntid)"
    assert rewrite.reasons[-1] == "setmaxnreg: launch 96 registers per thread (.maxnreg), producers 40, consumers 104"
    assert ".reqntid 640, 1, 1" in text and ".maxnreg 96" in text
    assert 512 * 104 + 128 * 40 <= 96 * 640 <= REGISTERS_PER_CTA
    consumer, _, producer = text.partition("$__wr_producer:")
    # one setmaxnreg per role, right after the warpgroup-uniform role branch
    assert consumer.count("setmaxnreg") == 1 and producer.count("setmaxnreg") == 1
    assert "@%wr_p bra $__wr_producer;\n\tsetmaxnreg.inc.sync.aligned.u32 104;" in consumer
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in producer
    compiled = compile_ptx(text, "wide.ptx", "sm_90a")
    assert compiled.functions["staged"].registers == 96
    opcodes = [i.opcode for i in disassemble(compiled.cubin)["staged"]]
    assert any(o.startswith("USETMAXREG.TRY_ALLOC") for o in opcodes)
    assert any(o.startswith("USETMAXREG.DEALLOC") for o in opcodes)


def test_producers_give_more_when_the_consumers_need_it() -> None:
    """1,024 threads launch with 64: consumers needing 100 get 104 only with producers at 24 (40 and 32 leave 88
    and 96)."""
    _, report = _split(_wide(), registers=100)
    assert (
        report.rewrites[0]
        .reasons[-1]
        .endswith("launch 64 registers per thread (.maxnreg), producers 24, consumers 104")
    )


def test_no_setmaxnreg_where_the_consumers_fit() -> None:
    text, report = _split(_wide(), registers=40, producer_warps=4)
    assert report.rewrites and "setmaxnreg" not in text and ".maxnreg" not in text
    text, _ = _split(_wide(), registers=200, producer_warps=4, setmaxnreg=False)
    assert "setmaxnreg" not in text


@pytest.mark.parametrize(
    ("text", "registers", "settings", "reason"),
    [
        (
            _wide("sm_90"),
            130,
            {},
            "registers do not fit: 130 per thread x 1024 threads > 65536 per CTA; setmaxnreg needs sm_90a",
        ),
        (_wide(), None, {"producer_warps": 2, "setmaxnreg": True}, "setmaxnreg needs roles of whole warpgroups"),
        (STAGED.replace(".target sm_90", ".target sm_90a"), None, {"setmaxnreg": True}, None),
        (
            _wide().replace(".reqntid 512, 1, 1", ".reqntid 512, 1, 1\n.maxnreg 128"),
            None,
            {"producer_warps": 4, "setmaxnreg": True},
            "the kernel declares .maxnreg",
        ),
        (
            _wide(),
            250,
            {},
            "registers do not fit: 250 per thread x 1024 threads > 65536 per CTA; setmaxnreg cannot make room: "
            "consumers need 250, producers at 24 leave them 104",
        ),
        (
            _wide(),
            None,
            {"producer_warps": 4, "setmaxnreg": True, "stages": 2},
            None,
        ),
    ],
    ids=["no-sm90a", "not-warpgroups", "small-block", "own-maxnreg", "pool-too-small", "asked"],
)
def test_setmaxnreg_refusals(text: str, registers: int | None, settings: dict, reason: str | None) -> None:
    """Each rule planted: the split is refused with its one-line reason (None: it is split with setmaxnreg)."""
    out, report = _split(text, registers=registers, **settings)
    if reason is None:
        assert report.rewrites and "setmaxnreg.inc" in out, report.skipped
        compile_ptx(out, "asked.ptx", "sm_90a")
        return
    assert not report.rewrites
    assert report.skipped[0].reason.startswith(reason), report.skipped[0].reason
    assert "\n" not in report.skipped[0].reason


@pytest.mark.parametrize("threads", [128, 256, 384, 512, 640, 1024])
def test_launch_registers_fit_the_register_file(threads: int) -> None:
    n = launch_registers(threads)
    assert n % 8 == 0 and n * threads <= REGISTERS_PER_CTA and (n + 8) * threads > REGISTERS_PER_CTA or n == 248


@pytest.mark.usefixtures("ptxas")
def test_optimize_requires_usetmaxreg_in_the_sass(monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize's proof of a split that moves registers: the SASS must show USETMAXREG. The same split without the
    .maxnreg that lets ptxas count registers is assembled with setmaxnreg ignored, and optimize writes nothing."""
    from ptxtool.services import optimize as service
    from ptxtool.sources import Source

    text, report = _split(_wide(), registers=100, producer_warps=4)
    for ignored, verified in ((False, True), (True, False)):
        split = parse(text.replace(".maxnreg 96", "") if ignored else text)
        monkeypatch.setattr(service, "run_pipeline", lambda module, passes, settings, split=split: (split, [report]))
        result = service.optimize(Source("wide.ptx", _wide()), passes=("warp-roles",))
        assert result.verified is verified, result.problems
        assert verified or any("USETMAXREG" in p for p in result.problems)

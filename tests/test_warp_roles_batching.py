"""The consumers' loads in flight that `optimize --passes warp-roles` reports per split kernel (docs/warp-roles.md,
"Loads in flight"): measured in the input's SASS and the split's, on planted staged kernels whose batching is known
and on nvcc's attention loop, where they fall and the report says so loudly without refusing the split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.services.optimize import Batching, Options, execute
from ptxtool.sources import Source

DATA = Path(__file__).parent / "data" / "warp_roles"
STAGED = (DATA / "staged.ptx").read_text()
COMPUTE = "\tld.shared.f32 \t%f3, [%r11];\n\tfma.rn.f32 \t%f1, %f3, 0f3F000000, %f1;\n"


def _four_loads(batched: bool) -> str:
    """The planted kernel with four shared loads in its compute part: all four then their sum, or each summed at once
    into the address of the next (a chain ptxas cannot batch)."""
    if batched:
        body = "".join(f"\tld.shared.f32 \t%f{3 + k}, [%r11+{4 * k}];\n" for k in range(4))
        body += "".join(f"\tadd.f32 \t%f1, %f1, %f{3 + k};\n" for k in range(4))
    else:
        body = "\tmov.u32 \t%r13, %r11;\n"
        for k in range(4):
            body += f"\tld.shared.u32 \t%r14, [%r13+{4 * k}];\n\tand.b32 \t%r14, %r14, 4;\n"
            body += "\tadd.s32 \t%r13, %r13, %r14;\n\tcvt.rn.f32.u32 \t%f3, %r14;\n\tadd.f32 \t%f1, %f1, %f3;\n"
    assert COMPUTE in STAGED
    return STAGED.replace(COMPUTE, body).replace("%f<6>", "%f<8>").replace("tile[512]", "tile[544]")


# The compute part also reads a read-only global value per trip: ptxas unrolls the input's loop 4 times and issues
# the 4 trips' global loads ahead, across the barriers; the consumers' loop, one trip per mbarrier wait, cannot.
GLOBAL_TOO = STAGED.replace(
    COMPUTE,
    COMPUTE.replace(
        "fma.rn.f32 \t%f1, %f3, 0f3F000000", "ld.global.nc.f32 \t%f4, [%rd5+4];\n\tfma.rn.f32 \t%f1, %f3, %f4"
    ),
)


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [(STAGED, 1, 1), (_four_loads(True), 4, 4), (_four_loads(False), 1, 1), (GLOBAL_TOO, 5, 2)],
    ids=["staged", "four-batched", "four-chained", "global-too"],
)
def test_planted_kernels_report_their_loads_in_flight(ptxas, text: str, before: int, after: int) -> None:
    """Chained loads stay 1 in flight; with a global load in the compute part the input's unrolled loop keeps the 4
    trips' global loads and a shared one in flight (5), the consumers' loop one of each (2)."""
    result = execute(Options(passes=("warp-roles",)), Source("staged.ptx", text))
    assert result.verified and result.changed, result.problems
    assert result.checks.batching == [Batching("staged", before, after)]
    data = result.to_data()["checks"]["consumer_loads_in_flight"]
    assert data == [{"kernel": "staged", "before": before, "after": after, "fell": after < before}]


def test_the_report_shows_before_and_after(ptxas, tmp_path: Path) -> None:
    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(_four_loads(True))
    run = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", str(source), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "staged: consumers' loads in flight per trip 4 -> 4\n" in run.output
    assert "warning" not in run.output


def test_a_planted_fall_is_reported_loudly_and_the_split_kept(ptxas, tmp_path: Path) -> None:
    source, out = tmp_path / "staged.ptx", tmp_path / "out.ptx"
    source.write_text(GLOBAL_TOO)
    run = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", str(source), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "warning: staged: consumers' loads in flight per trip 5 -> 2 (ptxas batches them less" in run.output
    assert ".reqntid 256, 1, 1" in out.read_text()


def test_nvccs_attention_falls(ptxas, tmp_path: Path) -> None:
    """nvcc's attention loop: ptxas keeps 4 of the consumers' 16 shared loads per key in flight in the input and
    fewer in the split. The split is still written (the H200 times in docs/warp-roles.md do not tie such a fall to
    a slower split), with a warning naming both numbers, and `fell` in the JSON."""
    source, out = tmp_path / "attention.ptx", tmp_path / "out.ptx"
    source.write_text((DATA / "attention.ptx").read_text())
    run = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", str(source), "-o", str(out), "--json"])
    assert run.exit_code == 0, run.output
    assert ".reqntid 256, 1, 1" in out.read_text()
    report = json.loads(run.stdout)
    (fall,) = report["checks"]["consumer_loads_in_flight"]
    assert fall["kernel"] == "attention_tiled" and fall["fell"] and fall["before"] == 4 and fall["after"] < 4
    text = CliRunner().invoke(main, ["optimize", "--passes", "warp-roles", str(source), "-o", str(out)])
    assert f"warning: attention_tiled: consumers' loads in flight per trip 4 -> {fall['after']}" in text.output


def test_unmapped_loops_read_as_unknown() -> None:
    assert str(Batching("k", None, 3)) == "k: consumers' loads in flight per trip ? -> 3"
    assert not Batching("k", None, 3).fell and Batching("k", 8, 3).fell and not Batching("k", 3, 8).fell

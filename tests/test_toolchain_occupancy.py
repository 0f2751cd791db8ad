"""Theoretical occupancy against values worked out by hand from the CUDA occupancy rules."""

from __future__ import annotations

import pytest

from ptxtool.toolchain.occupancy import SM_LIMITS, limits_for, occupancy


@pytest.mark.parametrize(
    ("arch", "registers", "shared", "block", "expected", "limited_by"),
    [
        ("sm_80", 32, 0, 256, 1.0, "warps"),
        ("sm_80", 128, 0, 256, 0.25, "registers"),  # 4096 registers a warp: 4 warps per sub-partition
        ("sm_80", 56, 2048, 256, 0.5, "registers"),  # pressure.sm80 nbody_tile: 1792 a warp, 9 per partition
        ("sm_90a", 168, 32800, 384, 12 / 64, "registers"),  # hopper ws_tma_scale
        ("sm_86", 32, 48 * 1024, 128, 8 / 48, "shared memory"),  # 48 KB + 1 KB reserved: 2 blocks in 100 KB
        ("sm_75", 0, 0, 1024, 1.0, "warps"),  # one block of 32 warps fills the SM
        ("sm_89", 16, 0, 32, 24 / 48, "blocks"),  # 24 blocks of one warp
        ("sm_80", 256, 0, 128, 0.0, "registers"),  # more than 255 registers cannot launch
    ],
)
def test_known_occupancies(arch, registers, shared, block, expected, limited_by):
    result = occupancy(arch, registers, shared, block)
    assert result.occupancy == pytest.approx(expected)
    assert result.limited_by == limited_by
    assert result.active_warps == round(expected * result.max_warps)


def test_table_covers_sm75_to_sm121_and_suffixes():
    assert {75, 80, 86, 89, 90, 100, 120, 121} <= set(SM_LIMITS)
    assert limits_for("sm_90a") is SM_LIMITS[90] and limits_for("sm_100f") is SM_LIMITS[100]
    assert occupancy("sm_88", 32, 0, 256) is None

"""Theoretical occupancy: how many warps of a kernel fit on one SM, and which resource stops more from fitting.

The per-architecture limits follow the CUDA programming guide's table of compute capabilities and the rules of
`cuda_occupancy.h` (registers allocated per warp in 256-register units across 4 SM sub-partitions; shared memory
rounded up to the allocation unit, plus the 1 KB the system reserves per block from sm_80 on).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.syntax.names import target_number


@dataclass(frozen=True, slots=True)
class SmLimits:
    """One architecture's per-SM limits (shared memory at its largest carve-out)."""

    max_warps: int
    max_blocks: int
    max_shared: int
    reserved_shared: int = 1024
    shared_unit: int = 128
    registers: int = 65536
    register_unit: int = 256
    max_registers_per_thread: int = 255


_KB = 1024
SM_LIMITS: dict[int, SmLimits] = {
    75: SmLimits(32, 16, 64 * _KB, reserved_shared=0, shared_unit=256),
    80: SmLimits(64, 32, 164 * _KB),
    86: SmLimits(48, 16, 100 * _KB),
    87: SmLimits(48, 16, 164 * _KB),
    89: SmLimits(48, 24, 100 * _KB),
    90: SmLimits(64, 32, 228 * _KB),
    100: SmLimits(64, 32, 228 * _KB),
    103: SmLimits(64, 32, 228 * _KB),
    110: SmLimits(48, 32, 228 * _KB),
    120: SmLimits(48, 32, 100 * _KB),
    121: SmLimits(48, 32, 100 * _KB),
}
_SUB_PARTITIONS = 4
_WARP = 32


def limits_for(arch: str) -> SmLimits | None:
    """The limits for `sm_90a`, `sm_100f`, ... (suffixes do not change them); None for an unknown architecture."""
    number = target_number(arch)
    return SM_LIMITS.get(number) if number is not None else None


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Active warps per SM over the maximum, the blocks that fit, and the resource that limits them."""

    occupancy: float
    active_warps: int
    max_warps: int
    blocks_per_sm: int
    limited_by: str
    block_size: int


def occupancy(arch: str, registers: int, shared: int, block_size: int) -> Occupancy | None:
    """Theoretical occupancy of a kernel using `registers` per thread and `shared` bytes of static shared memory
    per block, launched with `block_size` threads; None when the architecture is not in SM_LIMITS."""
    limits = limits_for(arch)
    if limits is None or block_size <= 0:
        return None
    warps_per_block = -(-block_size // _WARP)
    bounds: dict[str, int] = {
        "blocks": limits.max_blocks,
        "warps": limits.max_warps // warps_per_block,
    }
    if registers > limits.max_registers_per_thread:
        bounds["registers"] = 0
    elif registers:
        per_warp = -(-registers * _WARP // limits.register_unit) * limits.register_unit
        warps_per_partition = limits.registers // _SUB_PARTITIONS // per_warp
        bounds["registers"] = warps_per_partition * _SUB_PARTITIONS // warps_per_block
    if shared:
        per_block = -(-(shared + limits.reserved_shared) // limits.shared_unit) * limits.shared_unit
        bounds["shared memory"] = limits.max_shared // per_block
    limited_by = min(bounds, key=lambda k: bounds[k])  # first of the smallest, in the order above
    blocks = bounds[limited_by]
    active = blocks * warps_per_block
    return Occupancy(active / limits.max_warps, active, limits.max_warps, blocks, limited_by, block_size)

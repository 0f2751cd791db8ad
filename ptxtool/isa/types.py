"""PTX's fundamental types by the word a declaration writes (`.f32`): bytes, from the one width table
(`isa.caching.TYPE_BITS`), and the lanes of a vector."""

from __future__ import annotations

from ptxtool.isa.caching import TYPE_BITS

TYPE_BYTES: dict[str, int] = {f".{t}": bits // 8 for t, bits in TYPE_BITS.items() if bits >= 8}
VECTOR_LANES: dict[str, int] = {".v2": 2, ".v4": 4, ".v8": 8}

"""PTX's fundamental types and their sizes in bytes (PTX ISA, "Fundamental Types"), the one table of widths."""

from __future__ import annotations

TYPE_BYTES: dict[str, int] = {
    **dict.fromkeys((".b8", ".s8", ".u8", ".e4m3", ".e5m2", ".e2m3", ".e3m2", ".ue8m0"), 1),
    **dict.fromkeys((".b16", ".s16", ".u16", ".f16", ".bf16", ".e4m3x2", ".e5m2x2"), 2),
    **dict.fromkeys((".b32", ".s32", ".u32", ".f32", ".f16x2", ".bf16x2", ".tf32"), 4),
    **dict.fromkeys((".b64", ".s64", ".u64", ".f64"), 8),
    ".b128": 16,
}
VECTOR_LANES: dict[str, int] = {".v2": 2, ".v4": 4, ".v8": 8}

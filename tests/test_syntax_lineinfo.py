"""Line info as `nvdisasm -g` reads it: the last `.loc` at or before a PTX line in its function names the source
line; the innermost line for inlined code; nothing for line 0, unknown files, or outside functions."""

from __future__ import annotations

from ptxtool.sources import Source, parse_source
from ptxtool.syntax.lineinfo import LineInfo, SourceLine

PTX = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry k(.param .u32 n)
{
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    .loc 1 10 3
    add.s32 %r2, %r1, 1;
    .loc 1 20 5, function_name $L__info_string0, inlined_at 1 11 7
    add.s32 %r3, %r2, 1;
    .loc 1 0 0
    mov.u32 %r1, 0;
    .loc 7 30 1
    ret;
}
.file 1 "/src/k.cu"
"""


def test_find_by_the_last_mark_in_the_function() -> None:
    info = LineInfo.of(parse_source(Source("k.ptx", PTX)))
    assert info.files == {1: "/src/k.cu"}
    found = {n: info.find(n) for n in range(1, 19)}
    assert found[8] is None  # before the first mark
    assert found[9] == found[10] == SourceLine("/src/k.cu", 10)
    assert found[12] == SourceLine("/src/k.cu", 20)  # inlined: the callee's line, the innermost
    assert found[14] is None  # line 0: code no source line made
    assert found[16] is None  # file 7 is not in the .file table
    assert found[2] is None and found[18] is None  # outside any function

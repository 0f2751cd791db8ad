"""SASS statistics from nvdisasm -json, checked against `cuobjdump -sass` text read independently here."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from ptxtool.toolchain import sass
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.discover import find_tool
from ptxtool.toolchain.sass import (
    ListingLine,
    LiveCount,
    disassemble,
    instructions,
    life_ranges,
    listing,
    statistics,
    with_lines,
)

SAMPLES = Path(__file__).parent.parent / "samples"


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@cache
def _compiled(name: str, arch: str, lineinfo: bool = False):
    return compile_ptx((SAMPLES / name).read_text(), name, arch, lineinfo=lineinfo)


@cache
def _disassembled(name: str, arch: str):
    return disassemble(_compiled(name, arch).cubin)


def _cuobjdump_opcodes(cubin: bytes, tmp_path: Path) -> dict[str, Counter[str]]:
    (tmp_path / "k.cubin").write_bytes(cubin)
    text = subprocess.run(
        [find_tool("cuobjdump").path, "-sass", str(tmp_path / "k.cubin")], capture_output=True, text=True
    ).stdout
    functions: dict[str, Counter[str]] = {}
    for chunk in re.split(r"\n\s*Function : ", text)[1:]:
        name = chunk.split()[0]
        opcodes = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", chunk)
        functions[name] = Counter(opcodes)
    return functions


@pytest.mark.parametrize(
    ("name", "arch"),
    [("tensorcore.sm80.ptx", "sm_80"), ("hopper.sm90a.ptx", "sm_90a"), ("pressure.sm80.ptx", "sm_80")],
)
def test_opcodes_match_cuobjdump(name, arch, tmp_path):
    ours = {f: Counter(i.opcode for i in instructions) for f, instructions in _disassembled(name, arch).items()}
    assert ours == _cuobjdump_opcodes(_compiled(name, arch).cubin, tmp_path)


def _stats(name: str, arch: str):
    return {f: statistics(i) for f, i in _disassembled(name, arch).items()}


def test_tensor_core_and_memory_classes():
    tensor = _stats("tensorcore.sm80.ptx", "sm_80")
    assert any(k.startswith("HMMA.16816") for s in tensor.values() for k in s.tensor_core)
    assert any(k.startswith("IMMA") for s in tensor.values() for k in s.tensor_core)
    hopper = _stats("hopper.sm90a.ptx", "sm_90a")
    assert any(k.startswith("HGMMA") for k in hopper["wgmma_tile"].tensor_core)
    assert any(k.startswith("SYNCS") for k in hopper["ws_tma_scale"].barriers)
    pressure = _stats("pressure.sm80.ptx", "sm_80")
    assert {"LDL", "STL"} <= {k.split(".")[0] for k in pressure["long_live_ranges"].local_memory}
    assert pressure["stencil_25pt"].local_memory == {}
    assert pressure["nbody_tile"].barriers["BAR.SYNC.DEFER_BLOCKING"] >= 1


def test_cache_operator_variants_kept_whole():
    comm = _stats("comm.sm90.lineinfo.ptx", "sm_90")
    assert comm["ring_dispatch"].global_memory["LDG.E.NA.LTC256B.128.CONSTANT"] > 0
    assert "STG.E.EF.128" in comm["streaming_scale"].global_memory
    stats = comm["plain_copy"]
    assert stats.count == sum(stats.histogram.values())


def test_listing_maps_sass_to_ptx_lines():
    text = (SAMPLES / "comm.sm90.lineinfo.ptx").read_text()
    lines = text.splitlines()
    compiled = _compiled("comm.sm90.lineinfo.ptx", "sm_90", lineinfo=True)
    plain_copy = listing(compiled.cubin, with_ptx_lines=True)["plain_copy"]
    ctaid = next(entry for entry in plain_copy if "SR_CTAID.X" in entry.text)
    assert "%ctaid.x" in lines[ctaid.ptx_line - 1]
    loads = [entry for entry in plain_copy if entry.text.startswith("LDG")]
    assert loads and all("ld.global" in lines[entry.ptx_line - 1] for entry in loads)
    assert all(entry.ptx_line == 0 for entry in listing(compiled.cubin, with_ptx_lines=False)["plain_copy"])


def test_disassembly_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path))
    cubin = _compiled("tensorcore.sm80.ptx", "sm_80").cubin
    first = disassemble(cubin)
    assert len(list(tmp_path.glob("*.sass"))) == 1
    assert disassemble(cubin) == first
    disassemble(cubin + b"\0")  # other bytes, another entry
    assert len(list(tmp_path.glob("*.sass"))) == 2


@pytest.mark.parametrize(
    ("name", "arch"),
    [("tensorcore.sm80.ptx", "sm_80"), ("hopper.sm90a.ptx", "sm_90a"), ("comm.sm90.lineinfo.ptx", "sm_90")],
)
def test_listing_gives_the_instructions_of_json(name, arch):
    """What `inspect --pressure` and `report` read from the `-gp` listing they need anyway (one nvdisasm run fewer):
    -json's opcodes and guards in the same order, so the same statistics."""
    cubin = _compiled(name, arch, lineinfo=True).cubin
    from_json, from_listing = disassemble(cubin), instructions(listing(cubin, with_ptx_lines=True))
    assert from_listing.keys() == from_json.keys()
    for f, ours in from_listing.items():
        assert [(i.opcode, i.predicate) for i in ours] == [(i.opcode, i.predicate) for i in from_json[f]], f
        assert statistics(ours) == statistics(from_json[f]), f


_LISTING = """\t.headerflags\t@"EF_CUDA_SM80"
        /*0000*/                   NOP ;
.text.k:
\t//## File ".nv_debug_ptx_txt", line 12
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
\t//## File ".nv_debug_ptx_txt", line 14
        /*0010*/               @P0 BRA `(.L_x_0) ;
        /*0020*/                   EXIT;
.text.j:
        /*0000*/                   RET.REL.NODEC R20 `(j)  ;
"""

_LIFE_RANGES = """.text.k:                                          // |
        // +-------+--------+
        // | GPR   | PRED   |
        // |   #   |   #    |
        // +-------+--------+
        /*0000*/                   MOV R1, c[0x0][0x28] ;   // |   1   |        |
.L_x_0:                                                      // |   1   |        |
        /*0010*/               @P0 BRA `(.L_x_0) ;        // |   2   |   1    |
        /*0020*/                   EXIT ;                  // |       |        |
"""


def test_listing_and_life_ranges_read_as_nvdisasm_prints_them(monkeypatch):
    """Instructions without the `;` and padding, labels, PTX lines carried down to the next mark, code before any
    function skipped; live counts per instruction (an empty cell is 0), placed at the listing's lines by address."""
    monkeypatch.setattr(sass, "_nvdisasm", lambda cubin, options: _LIFE_RANGES if "-plr" in options else _LISTING)
    lines = listing(b"", with_ptx_lines=True)
    assert lines == {
        "k": [
            ListingLine("MOV R1, c[0x0][0x28]", 12, 0),
            ListingLine(".L_x_0:"),
            ListingLine("@P0 BRA `(.L_x_0)", 14, 16),
            ListingLine("EXIT", 14, 32),
        ],
        "j": [ListingLine("RET.REL.NODEC R20 `(j)", 0, 0)],
    }
    counts = life_ranges(b"")
    assert counts == {"k": [LiveCount(0, gpr=1), LiveCount(16, gpr=2, predicates=1), LiveCount(32)]}
    assert with_lines(counts, lines)["k"] == [
        LiveCount(0, 1, ptx_line=12),
        LiveCount(16, 2, 1, ptx_line=14),
        LiveCount(32, ptx_line=14),
    ]

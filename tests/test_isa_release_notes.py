"""The ISA tables against the PTX ISA manual's release notes for 9.0-9.5 ("Changes in PTX ISA Version 9.x"): every
instruction and qualifier those notes add is known, with the version the notes give, and the wheel's ptxas agrees:
it takes each sample under that `.version` and refuses it under the one before (`parse --check` says the same)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ptxtool import isa
from ptxtool.analysis.legality import check_module
from ptxtool.isa.targets import TARGET_INTRODUCED
from ptxtool.syntax import parse

# (PTX ISA version of the release note, target, a sample that uses what the note adds)
RELEASE_NOTES = [
    ("9.1", "sm_90", "multimem.cp.async.bulk.global.shared::cta.bulk_group [%rd1], [smem], 16;"),
    ("9.1", "sm_90", "multimem.cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [smem], 16;"),
    ("9.3", "sm_80", "clmad.lo.u64 %rd1, %rd2, %rd3, %rd4;"),
    ("9.3", "sm_80", "clmad.hi.u64 %rd1, %rd2, %rd3, %rd4;"),
    ("9.3", "sm_90", "mbarrier.check_layout.layout::v1.shared::cta.b64 %p1, [bar];"),
    ("9.3", "sm_100a", "fabric.wait.sync_restrict::reads;"),
    ("9.3", "sm_100a", "fabric.submit;"),
    ("9.3", "sm_100a", "fabric.submit.op_restrict::fetching;"),
    ("9.3", "sm_100a", "multimem.st.async.release.sys.global.b32 [%rd1], %r1;"),
    ("9.3", "sm_100a", "multimem.red.async.release.sys.global.add.u32 [%rd1], %r1;"),
    ("9.5", "sm_100a", "fabric.submit.commit_group;"),
    ("9.5", "sm_100a", "fabric.wait.sync_restrict::read 0;"),
    ("9.5", "sm_90", "cp.async.bulk.wait_group.sync_restrict::proxy::async 0;"),
    ("9.5", "sm_90", "fence.alias.sync_restrict::read.release.sys;"),
    ("9.5", "sm_80", "sin.approx.ftz.2pi.f32 %f1, %f2;"),
    ("9.5", "sm_100a", "mov.u32 %r1, %locality_domain_id;"),
]
# Instructions the notes add whose operand syntax the notes do not spell out: known, with the notes' version.
NEW_FAMILIES = {
    "fabric.try_get": "9.3",
    "fabric.try_put": "9.3",
    "fabric.try_red": "9.3",
    "fabric.try_pullred": "9.3",
    "spcompress": "9.4",
    "spdecompress": "9.4",
    "applypriority.async.bulk": "9.4",
    "tensormap.query": "9.5",
}
TARGETS_94 = ("sm_107", "sm_107a", "sm_107f")
DECLARATIONS = (
    ".reg .b64 %rd<8>;\n.reg .b32 %r<8>;\n.reg .f32 %f<4>;\n.reg .pred %p<4>;\n"
    ".shared .align 16 .b64 bar;\n.shared .align 128 .b8 smem[1024];\n"
)


def module_text(version: str, target: str, line: str) -> str:
    return (
        f".version {version}\n.target {target}\n.address_size 64\n\n.visible .entry k()\n{{\n{DECLARATIONS}"
        f"{line}\nret;\n}}\n"
    )


def before(version: str) -> str:
    major, minor = map(int, version.split("."))
    return f"{major}.{minor - 1}" if minor else f"{major - 1}.8"


def assembles(ptxas: str, text: str, target: str, tmp_path: Path) -> bool:
    source = tmp_path / "t.ptx"
    source.write_text(text)
    command = [ptxas, f"-arch={target}", str(source), "-o", str(tmp_path / "t.cubin")]
    return subprocess.run(command, capture_output=True).returncode == 0


@pytest.mark.parametrize(("version", "target", "line"), RELEASE_NOTES, ids=[line for _, _, line in RELEASE_NOTES])
def test_each_release_note_is_known_with_its_version(
    ptxas: str, tmp_path: Path, version: str, target: str, line: str
) -> None:
    text = module_text(version, target, line)
    instruction = next(s for s in parse(text).kernels[0].body.statements if getattr(s, "line", 0) == 13)
    assert isa.find(instruction) is not None, line
    assert assembles(ptxas, text, target, tmp_path)
    assert check_module(parse(text)) == []
    older = module_text(before(version), target, line)
    assert not assembles(ptxas, older, target, tmp_path)
    assert any(version in p.message for p in check_module(parse(older))), check_module(parse(older))


@pytest.mark.parametrize(("family", "version"), NEW_FAMILIES.items())
def test_new_families_are_known(family: str, version: str) -> None:
    info = isa.find(family)
    assert info is not None and info.family == family
    assert min(n.ptx for n in info.needs) == isa.version(version)


def test_targets_of_9_4(ptxas: str, tmp_path: Path) -> None:
    for target in TARGETS_94:
        assert TARGET_INTRODUCED[target] == (9, 4)
        assert assembles(ptxas, module_text("9.4", target, ""), target, tmp_path)
        assert not assembles(ptxas, module_text("9.3", target, ""), target, tmp_path)

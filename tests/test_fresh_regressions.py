"""Bugs found by running ptxtool over fresh PTX (tests/corpus/fresh: nvcc 13.5, numba-cuda, Triton, hand-written),
each pinned on the smallest real input that showed it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS

from ptxtool.analysis.legality import check_module
from ptxtool.cli import main
from ptxtool.lint import load_settings
from ptxtool.services.lint import lint_file
from ptxtool.services.optimize import optimize
from ptxtool.sources import read_source
from ptxtool.syntax import parse

FRESH = CORPUS / "fresh"
HEADER = ".version 9.0\n.target {target}\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n"
DECLS = "\t.reg .b16 %rs<2>;\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<9>;\n"


def _flagged(target: str, line: str) -> list[str]:
    """The legality problems of one instruction in a kernel for this target."""
    return [p.message for p in check_module(parse(HEADER.format(target=target) + DECLS + f"\t{line}\n\tret;\n}}\n"))]


@pytest.mark.parametrize(
    ("line", "target", "oldest"),
    [
        ("max.f16x2 %r1, %r2, %r3;", "sm_75", "sm_80"),  # cuda_fp16.hpp's __hmax2: sm_80, not sm_53 like add.f16x2
        ("min.NaN.f16 %r1, %r2, %r3;", "sm_75", "sm_80"),
        ("add.u16x2 %r1, %r2, %r3;", "sm_80", "sm_90"),  # nvcc packs char pairs with it
        ("max.f32 %f1, %f2, %f3, %f4;", "sm_90", "sm_100"),  # Triton's softmax for sm_120: three inputs
        ("add.rn.f32x2 %rd1, %rd2, %rd2;", "sm_90", "sm_100"),
        ("sub.rn.f32.f16 %f1, %rs1, %f2;", "sm_90", "sm_100"),  # Triton's layernorm for sm_100: mixed precision
        (
            "wmma.store.d.sync.aligned.col.m16n16k8.f32 [%rd1], {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %r1;",
            "sm_75",
            "sm_80",
        ),  # a tf32 accumulator store names no tf32 type, only the shape
    ],
)
def test_instructions_newer_than_their_family(line: str, target: str, oldest: str) -> None:
    assert _flagged(target, line), f"{line} passed on {target}"
    assert not _flagged(oldest, line)


def test_two_input_min_max_and_add_f16x2_stay_legal_on_sm75() -> None:
    assert not _flagged("sm_75", "max.f32 %f1, %f2, %f3;")
    assert not _flagged("sm_75", "add.f16x2 %r1, %r2, %r3;")


def test_l2_256b_on_sm80_is_verified_as_ptxas_lowers_it(ptxas) -> None:
    """ptxas 13.5 makes `.L2::256B` a 128-byte prefetch on sm_80 (LTC128B; LTC256B on sm_86 and later): the promise
    follows, so a wide double-precision grid-stride reduction is optimized instead of failing verification."""
    result = optimize(read_source(str(FRESH / "nvcc.k01_templates.sm80.ptx")))
    assert result.verified, result.problems
    kernel = next(k for k in result.kernels if k.name == "_Z13reduce_kernelIdLi128EEvPKT_PS0_i")
    assert kernel.memory_after.get("LDG.E.NA.LTC128B.64.CONSTANT") == 1


def test_new_output_files_follow_the_umask(tmp_path: Path) -> None:
    """`fmt -o` (and optimize -o) wrote new files 0600, the mode of the temporary they are renamed from."""
    out = tmp_path / "out.ptx"
    old = os.umask(0o022)
    try:
        result = CliRunner().invoke(main, ["fmt", str(FRESH / "hand.old_texmode.ptx"), "-o", str(out)])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o644


def test_readonly_note_names_the_noalias_it_takes() -> None:
    """PTX005 said '`ptxtool optimize` adds it' where optimize does not: the kernel writes another pointer, so `.nc`
    needs --noalias (nvcc's and clang's kernels without __restrict__)."""
    settings = load_settings({}, "test", select=("PTX005",), ptxas=False)
    found = lint_file(read_source(str(FRESH / "nvcc.k11_restrict.sm75.ptx")), settings).findings
    note = next(f.message for f in found if "'stencil_alias_param_0'" in f.message)
    assert note.endswith("`ptxtool optimize --noalias stencil_alias` adds it if it never aliases stencil_alias_param_1")


def test_a_target_this_ptxas_dropped_says_which_arch_to_give(tmp_path: Path, ptxas) -> None:
    """ZLUDA's test suite is `.target sm_30` PTX: inspect said only ptxas's "Value 'sm_30' is not defined for option
    'gpu-name'"; now it says what to do, and doing it works."""
    old = tmp_path / "old.ptx"
    old.write_text(HEADER.format(target="sm_30").replace("9.0", "6.5") + "\tret;\n}\n")
    result = CliRunner().invoke(main, ["inspect", str(old)])
    assert result.exit_code == 2 and "give --arch sm_75" in result.output
    assert CliRunner().invoke(main, ["inspect", "--arch", "sm_75", str(old)]).exit_code == 0


def test_parse_check_summary_does_not_say_ok_beside_legality_errors(tmp_path: Path) -> None:
    """`parse --check` printed 'FILE: ok — ...' on stdout for a file it then failed (exit 1) for legality problems."""
    illegal = tmp_path / "mixed.ptx"
    illegal.write_text(HEADER.format(target="sm_90") + DECLS + "\tsub.rn.f32.f16 %f1, %rs1, %f2;\n\tret;\n}\n")
    result = CliRunner().invoke(main, ["parse", "--check", str(illegal)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{illegal}: 1 legality problem(s) — PTX 9.0, sm_90;")

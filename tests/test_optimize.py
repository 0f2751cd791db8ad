"""`ptxtool optimize` against ptxas and nvdisasm: the SASS variants appear exactly where promised and nowhere else,
a broken promise or output ptxas rejects writes nothing, and the command's modes, flags and config."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES

from ptxtool.cli import main
from ptxtool.passes import cache_operators as pass_module
from ptxtool.passes.cache_operators import Policy, Settings
from ptxtool.services.optimize import optimize
from ptxtool.sources import Source, read_source

DATA = Path(__file__).parent / "data" / "passes" / "cache_operators"
COMM = str(SAMPLES / "comm.sm90.ptx")

pytestmark = pytest.mark.usefixtures("ptxas")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _kernels(result) -> dict:
    return {k.name: k for k in result.kernels}


def test_comm_sass_exactly_where_promised() -> None:
    result = optimize(read_source(COMM))
    assert result.verified and result.changed, result.problems
    k = _kernels(result)
    assert k["plain_copy"].memory_before == {"LDG.E.128": 1, "STG.E.128": 1}
    assert k["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128": 1, "STG.E.EF.128": 1}
    assert k["streaming_scale"].memory_after == {"LDG.E.NA.LTC256B.128": 1, "STG.E.EF.128": 1}
    for name in ("ring_dispatch", "cache_ops_mix"):  # flags, ring reads and the author's operators: untouched
        assert k[name].memory_after == k[name].memory_before
        assert k[name].after.registers == k[name].before.registers
    assert k["ring_dispatch"].memory_after["LDG.E.STRONG.SYS"] == 2
    assert k["ring_dispatch"].memory_after["LDG.E.128"] == 7


def test_line_info_input() -> None:
    """A file with .loc/.file: SASS is still tied to its own PTX lines, and the directives stay in the output."""
    result = optimize(read_source(str(SAMPLES / "comm.sm90.lineinfo.ptx")), settings=Settings(noalias=("*",)))
    assert result.verified, result.problems
    assert _kernels(result)["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128.CONSTANT": 1, "STG.E.EF.128": 1}
    assert ".loc" in result.text and ".file" in result.text


def test_noalias_and_evict_first_verified() -> None:
    result = optimize(read_source(COMM), settings=Settings(noalias=("plain_copy",), l2_evict_first=Policy(True)))
    assert result.verified, result.problems
    assert _kernels(result)["plain_copy"].memory_after == {"LDG.E.NA.LTC256B.128.CONSTANT": 1, "STG.E.EF.128": 1}
    assert "createpolicy.fractional.L2::evict_first.b64 %ptxtool_evict_first, 1.0;" in result.text
    assert result.reports[0].inserted == ["plain_copy"]


def test_elementwise_noalias() -> None:
    result = optimize(read_source(str(SAMPLES / "elementwise.sm90.ptx")), settings=Settings(noalias=("*",)))
    assert result.verified, result.problems
    k = _kernels(result)
    assert k["_Z5hadd2iPK7__half2S1_PS_"].memory_after == {"LDG.E.NA.CONSTANT": 2, "STG.E.EF": 1}
    assert k["saxpy"].memory_after == {"LDG.E": 1, "LDG.E.NA.CONSTANT": 1, "STG.E": 1}
    copy = k["_Z8copy_vecIfLi4EEvmPKT_PS0_"]
    assert copy.memory_after == copy.memory_before == {"LDG.E.CONSTANT": 4, "STG.E": 4}


@pytest.mark.parametrize("name", ["gemm_smem.sm80.ptx", "pressure.sm80.ptx"])
def test_nothing_to_do_keeps_the_text(name: str) -> None:
    source = read_source(str(SAMPLES / name))
    result = optimize(source, settings=Settings(noalias=("*",)))
    assert result.verified and not result.changed and result.text == source.text
    assert all(k.memory_after == k.memory_before for k in result.kernels)


def test_a_broken_promise_drops_that_rewrite_and_keeps_the_rest(tmp_path: Path, monkeypatch) -> None:
    """A pass that promises the wrong SASS for `.L1::no_allocate`: those loads are dropped (the SASS says why), the
    stores' `.cs` is kept and written, exit 0; --strict writes nothing and exits 1."""
    monkeypatch.setitem(pass_module.SASS_MODIFIER, "L1::no_allocate", "EF")
    source = read_source(COMM)
    result = optimize(source)
    assert result.exit_code == 0 and result.verified
    dropped = {(d.properties["kernel"], d.location.line): d.properties["reason"] for d in result.dropped}
    assert set(dropped) == {("plain_copy", 487), ("streaming_scale", 358)}
    assert dropped["plain_copy", 487] == "promised SASS .EF.LTC256B but ptxas made LDG.E.NA.LTC256B.128"
    kept = [(r.kernel, r.line, r.after) for report in result.reports for r in report.rewrites]
    assert kept == [("plain_copy", 488, "st.global.cs.v4.u32")]
    assert "st.global.cs.v4.u32" in result.text and "ld.global.L1::no_allocate" not in result.text
    assert _kernels(result)["plain_copy"].memory_after == {"LDG.E.128": 1, "STG.E.EF.128": 1}
    out = tmp_path / "out.ptx"
    cli = run("optimize", COMM, "-o", str(out))
    assert cli.exit_code == 0 and out.read_text() == result.text
    said = "optimize/dropped warning: plain_copy: dropped ld.global.v4.u32 -> ld.global.L1::no_allocate.L2::256B.v4.u32"
    assert re.search(rf"comm\.sm90\.ptx:487:\d+: {re.escape(said)}\n    note: promised SASS \.EF", cli.stderr)
    assert "1 rewrite kept, 2 dropped" in cli.stderr
    strict_out = tmp_path / "strict.ptx"
    cli = run("optimize", COMM, "-o", str(strict_out), "--strict")
    assert cli.exit_code == 1 and not strict_out.exists()
    assert "verification failed" in cli.stderr and "nothing written" in cli.stderr
    assert "promised SASS .EF.LTC256B" in cli.stderr


def test_output_ptxas_rejects_is_dropped(tmp_path: Path, monkeypatch) -> None:
    """A pass that ignored the file's .version (PTX 7.0 has no .L1::no_allocate): ptxas rejects the load's line, so
    that rewrite is dropped and the store's `.cs` (PTX 2.0) is kept; --strict fails the file and writes nothing."""
    monkeypatch.setattr(pass_module, "_unmet", lambda *_: None)
    target = tmp_path / "old.ptx"
    shutil.copy(DATA / "old_version.input.ptx", target)
    before = target.read_text()
    cli = run("optimize", str(target), "--in-place", "--noalias", "grid_copy")
    assert cli.exit_code == 0 and "ptxas rejects it" in cli.stderr and "1 rewrite kept, 1 dropped" in cli.stderr
    after = target.read_text()
    assert "st.global.cs.v4.u32" in after and "ld.global.nc.L1::no_allocate" not in after
    assert after == before.replace("st.global.v4.u32", "st.global.cs.v4.u32")
    shutil.copy(DATA / "old_version.input.ptx", target)
    cli = run("optimize", str(target), "--in-place", "--noalias", "grid_copy", "--strict")
    assert cli.exit_code == 1 and "ptxas rejects it" in cli.stderr and target.read_text() == before


def test_diff_is_the_rewrites_and_writes_nothing(tmp_path: Path) -> None:
    cli = run("optimize", COMM, "--diff")
    assert cli.exit_code == 0
    removed = [line for line in cli.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in cli.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert (
        removed
        == [
            "-\tld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd10];",
            "-\tld.global.v4.u32 \t{%r4, %r5, %r6, %r7}, [%rd8];",
            "-\tst.global.v4.u32 \t[%rd9], {%r4, %r5, %r6, %r7};",
        ]
        or len(removed) == 3
    )
    assert len(added) == 3 and all("L1::no_allocate" in a or ".cs." in a for a in added)
    assert "\x1b[" not in cli.stdout  # not a terminal: no colour
    assert run("optimize", COMM, "--diff", "-o", str(tmp_path / "x.ptx")).exit_code == 2
    assert not (tmp_path / "x.ptx").exists()


def test_stdin_with_gpu_verification_reads_the_input_once(monkeypatch) -> None:
    """`optimize - --verify-gpu spec < k.ptx`: the GPU run gets the texts read from stdin (the service never
    reads the input again). The GPU itself is faked here; tests/test_optimize_gpu.py runs the real one."""
    import ptxtool.services.run

    seen = {}

    class Report:
        verdict, trials, exit_code = "identical", 3, 0

    def fake_run(sources, spec, *args, **kwargs):
        seen["texts"] = [s.text for s in sources]
        return Report()

    monkeypatch.setattr(ptxtool.services.run, "run", fake_run)
    text = Path(COMM).read_text()
    cli = CliRunner().invoke(
        main, ["optimize", "-", "--verify-gpu", str(SAMPLES / "plain_copy.toml")], input=text, catch_exceptions=False
    )
    assert cli.exit_code == 0, cli.stderr
    assert seen["texts"][0] == text and seen["texts"][1] == cli.stdout != text
    assert "GPU: outputs identical, 3 trials" in cli.stderr


def test_verbose_lists_skips_and_json_lists_drops(tmp_path: Path, monkeypatch) -> None:
    cli = run("optimize", COMM, "-v")
    assert "ring_dispatch: skipped" in cli.stderr
    monkeypatch.setitem(pass_module.SASS_MODIFIER, "L1::no_allocate", "EF")
    cli = run("optimize", COMM, "-o", str(tmp_path / "o.ptx"), "--json")
    data = json.loads(cli.stdout)
    assert cli.exit_code == 0 and data["schema"] == "ptxtool.optimize/2" and data["verified"]
    reasons = {(d["kernel"], d["line"]): d["reason"] for d in data["dropped"]}
    assert reasons["plain_copy", 487] == "promised SASS .EF.LTC256B but ptxas made LDG.E.NA.LTC256B.128"
    assert data["checks"]["promised_modifiers"] == data["checks"]["present_modifiers"] == 1


def test_cli_stdout_file_and_in_place(tmp_path: Path) -> None:
    cli = run("optimize", COMM)
    printed = cli.stdout
    assert cli.exit_code == 0
    assert "ld.global.L1::no_allocate.L2::256B.v4.u32" in cli.stdout and "st.global.cs.v4.u32" in cli.stdout
    assert "comm.sm90.ptx:487: plain_copy: ld.global.v4.u32 -> ld.global.L1::no_allocate.L2::256B.v4.u32" in cli.stderr
    assert "grid-stride loop" in cli.stderr and "LDG.E.NA.LTC256B.128: 0 -> 1" in cli.stderr
    assert "3 rewrites kept · ptxas ok · 5/5 promised SASS modifiers present · no access crossed" in cli.stderr
    assert "note: plain_copy: loads could be .nc if its pointers never alias (--noalias plain_copy)" in cli.stderr
    out = tmp_path / "o.ptx"
    cli = run("optimize", COMM, "-o", str(out), "--json", "--noalias", "plain_copy")
    data = json.loads(cli.stdout)
    assert cli.exit_code == 0 and data["schema"] == "ptxtool.optimize/2" and data["verified"]
    assert "ld.global.nc.L1::no_allocate.L2::256B.v4.u32" in out.read_text()
    rewrite = next(r for r in data["passes"][0]["rewrites"] if r["line"] == 487)
    assert rewrite["sass"] == ["CONSTANT", "NA", "LTC256B"] and rewrite["reasons"][0].startswith(".nc: read-only")
    copy = tmp_path / "c.ptx"
    shutil.copy(COMM, copy)
    assert run("optimize", str(copy), "-i").exit_code == 0
    assert copy.read_text() == printed


def test_cli_usage_errors() -> None:
    assert run("optimize", COMM, "--json").exit_code == 2
    assert run("optimize", COMM, "-o", "x.ptx", "--in-place").exit_code == 2
    bad = run("optimize", COMM, "--passes", "no-such-pass")
    assert bad.exit_code == 2 and "unknown pass 'no-such-pass'" in bad.stderr
    assert run("optimize", "missing.ptx").exit_code == 2


def test_unsafe_volatile_nc_is_loud() -> None:
    source = str(DATA / "volatile_recv.input.ptx")
    plain = run("optimize", source)
    assert plain.exit_code == 0 and "ld.volatile.global.v4.u32" in plain.stdout and "OUTSIDE" not in plain.stderr
    unsafe = run("optimize", source, "--unsafe-volatile-nc")
    assert unsafe.exit_code == 0 and "ld.global.nc.L1::no_allocate.L2::256B.v4.u32" in unsafe.stdout
    assert "warning:" in unsafe.stderr and "OUTSIDE the PTX memory model" in unsafe.stderr
    assert "ld.volatile.global.u32" in unsafe.stdout  # the flag poll stays volatile


def test_config_table(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(DATA / "grid_copy.input.ptx", tmp_path / "k.ptx")
    (tmp_path / "pyproject.toml").write_text('[tool.ptxtool.optimize]\nnoalias = ["grid_*"]\nstores = false\n')
    monkeypatch.chdir(tmp_path)
    cli = run("optimize", "k.ptx")
    assert cli.exit_code == 0 and "ld.global.nc.L1::no_allocate" in cli.stdout and ".cs." not in cli.stdout
    assert ".cs." in run("optimize", "k.ptx", "--stores").stdout  # a flag overrides the table
    assert ".nc." not in run("optimize", "k.ptx", "--no-readonly").stdout
    (tmp_path / "pyproject.toml").write_text("[tool.ptxtool.optimize]\nstreaming = 3\n")
    cli = run("optimize", "k.ptx")
    assert cli.exit_code == 2 and "streaming must be true, false or a table" in cli.stderr


def test_counts_allow_only_the_if_conversion_of_a_rewritten_access() -> None:
    """ptxas may turn the branch around a rewritten load into a predicated load (reduce.sm80's count_positive
    with --l2-evict-first): one BRA, BSSY and BSYNC per such line may go; nothing else may change."""
    from collections import Counter

    from ptxtool.services.optimize import _same_counts

    old = Counter({"BRA": 4, "BSSY": 2, "BSYNC": 2, "LDG.E": 1, "BAR": 1})
    assert _same_counts(old, old, 0)
    converted = old - Counter({"BRA": 1, "BSSY": 1, "BSYNC": 1})
    assert _same_counts(old, converted, 1)
    assert not _same_counts(old, converted, 0)  # no line was if-converted: the branch must stay
    assert not _same_counts(old, converted - Counter({"BRA": 1}), 1)  # two branches gone for one line
    assert not _same_counts(old, converted + Counter({"BRA": 2}), 1)  # a branch came instead
    assert not _same_counts(old, old - Counter({"BAR": 1}), 1)  # a barrier is never explained
    assert _same_counts(converted, old, -1)  # ptxas went back from predication to a branch


def test_csr_spmv_noalias_keeps_every_rewrite() -> None:
    """nvcc's CSR SpMV (tests/data/optimize/spmv.cu), alias-free: ptxas unrolls the row loop and schedules the
    `.nc` loads freely (90 LDG.E.CONSTANT); nothing crosses an ordering instruction, every promise shows."""
    result = optimize(
        read_source(str(Path(__file__).parent / "data" / "optimize" / "spmv.sm90.ptx")),
        settings=Settings(noalias=("*",)),
    )
    assert result.exit_code == 0 and not result.dropped
    kernel = result.kernels[0]
    assert kernel.memory_after.get("LDG.E.CONSTANT", 0) == kernel.memory_before["LDG.E"] > 10
    assert result.checks.present == result.checks.promised > 10


def test_crlf_file_keeps_its_line_endings() -> None:
    """A Windows-style file: the spliced opcodes and the inserted lines keep its CRLF endings, nothing else moves."""
    text = Path(COMM).read_text().replace("\n", "\r\n")
    settings = Settings(noalias=("*",), l2_evict_first=Policy(True))
    result = optimize(Source("crlf.ptx", text), settings=settings)
    assert result.exit_code == 0 and result.changed and len(result.insertions) == 2
    assert result.text.count("\n") == result.text.count("\r\n") == text.count("\r\n") + 2


def _evict_first(text: str):
    result = optimize(Source("k.ptx", text), settings=Settings(noalias=("*",), l2_evict_first=Policy(True)))
    assert result.exit_code == 0 and not result.dropped and len(result.insertions) == 2
    return result


def test_an_insertion_before_an_anchor_that_shares_its_line_goes_in_the_line() -> None:
    text = (DATA / "grid_copy.input.ptx").read_text()
    text = text.replace(".reg .b64 %rd<9>;\n\n\tld.param.u64 %rd3", ".reg .b64 %rd<9>; ld.param.u64 %rd3")
    result = _evict_first(text)
    assert ".reg .b64 %rd<9>; .reg .b64 %ptxtool_evict_first; createpolicy" in result.text
    assert result.text.count("\n") == text.count("\n")


def test_an_insertion_before_a_guarded_anchor_goes_before_the_guard() -> None:
    first = "\tld.param.u64 %rd3, [grid_copy_param_0];\n"
    guarded = "\t@%p1 ld.param.u64 %rd3, [grid_copy_param_0];\n"
    result = _evict_first((DATA / "grid_copy.input.ptx").read_text().replace(first, guarded))
    policy = "\tcreatepolicy.fractional.L2::evict_first.b64 %ptxtool_evict_first, 1.0;\n"
    assert policy + guarded in result.text

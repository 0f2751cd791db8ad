"""The comparison behind `ptxtool run` and the sizing behind `bench`, on host data (no GPU needed), and the CLI's
answers before any GPU work: bad specs exit 2, and a machine without a driver exits 3 with a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ptxtool.cli import main
from ptxtool.services.bench import bytes_moved, rotation_copies
from ptxtool.services.launch import Buffer, load_spec, to_bf16
from ptxtool.services.run import compare, element_text, first_change, summarize
from ptxtool.toolchain.gpu import DeviceInfo, probe

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
H200 = DeviceInfo("NVIDIA H200", "sm_90", 132, 60 * 2**20, 141 * 2**30, "13.0")


def raw(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values).view(np.uint8)


def test_identical_bytes_are_equal_and_one_flipped_bit_is_not() -> None:
    y = Buffer("y", "f32", 1000, output=True)
    a = np.linspace(-1, 1, 1000, dtype=np.float32)
    assert compare(y, raw(a), raw(a.copy()), 0, 1) is None
    b = a.copy()
    b[617] = np.nextafter(b[617], np.float32(2))
    d = compare(y, raw(a), raw(b), 2, 9)
    assert (d.buffer, d.index, d.differing, d.elements, d.trial, d.seed) == ("y", 617, 1, 1000, 2, 9)
    assert d.left != d.right and d.left.split()[0] == repr(float(a[617]))


def test_bitwise_means_bitwise() -> None:
    """+0 and -0 compare equal as floats, and NaNs never do; as bytes, both are judged by their bits."""
    y = Buffer("y", "f32", 2, output=True)
    nan = np.array([np.nan, 0.0], dtype=np.float32)
    assert compare(y, raw(nan), raw(nan.copy()), 0, 1) is None
    signed = np.array([np.nan, -0.0], dtype=np.float32)
    d = compare(y, raw(nan), raw(signed), 0, 1)
    assert d.index == 1 and d.left == "0.0 (0x00000000)" and d.right == "-0.0 (0x80000000)"


def test_unwritten_output_shows_the_poison() -> None:
    c = Buffer("c", "f16", 4, output=True, init=None)
    written = np.array([1, 2, 3, 4], dtype=np.float16)
    poisoned = written.copy()
    poisoned.view(np.uint16)[3] = 0x5A5A
    d = compare(c, raw(written), raw(poisoned), 0, 1)
    assert d.index == 3 and d.right.endswith("(0x5a5a)") and d.left == "4.0 (0x4400)"


def test_tolerance_applies_to_values_not_bits() -> None:
    out = Buffer("out", "f32", 3, output=True, init="zeros", rtol=1e-4)
    a = np.array([1000.0, np.nan, 5.0], dtype=np.float32)
    near = np.array([1000.05, np.nan, 5.0], dtype=np.float32)
    assert compare(out, raw(a), raw(near), 0, 1) is None
    far = np.array([1000.0, np.nan, 5.01], dtype=np.float32)
    d = compare(out, raw(a), raw(far), 0, 1)
    assert d.index == 2 and d.differing == 1 and d.max_abs_error == pytest.approx(0.01, rel=1e-3)
    nan_vs_number = np.array([1000.0, 1.0, 5.0], dtype=np.float32)
    assert compare(out, raw(a), raw(nan_vs_number), 0, 1).index == 1


def test_typed_values() -> None:
    assert element_text(raw(to_bf16(np.array([1.5], np.float32))), "bf16") == "1.5 (0x3fc0)"
    assert element_text(raw(np.array([-2], np.int16)), "s16") == "-2 (0xfffe)"
    assert element_text(raw(np.array([2**64 - 1], np.uint64)), "u64") == f"{2**64 - 1} (0x{'f' * 16})"


def test_guard_zone() -> None:
    guard = np.full(4096, 0x5A, dtype=np.uint8)
    assert first_change(guard, 0x5A) is None
    guard[12] = 0
    assert first_change(guard, 0x5A) == 12


def test_summary_counts_unwritten_elements() -> None:
    spec = load_spec(str(SAMPLES / "math_mix.toml"))
    n = 262144
    x = raw(np.ones(n, np.float32))
    y = np.arange(n, dtype=np.float32)
    y.view(np.uint32)[-5:] = 0x5A5A5A5A
    z = np.full(n, np.nan)
    y_summary, z_summary = summarize(spec, [x, raw(y), raw(z)])
    assert (y_summary.buffer, y_summary.unwritten, y_summary.nan) == ("y", 5, 0)
    assert y_summary.low == 0 and y_summary.high == n - 6
    assert (z_summary.unwritten, z_summary.nan, z_summary.low) == (0, n, None)


def test_rotation_outgrows_the_l2() -> None:
    spec = load_spec(str(SAMPLES / "saxpy.toml"))  # 8 MiB of buffers
    copies = rotation_copies(spec.buffer_bytes, H200)
    assert copies * spec.buffer_bytes >= 3 * H200.l2_bytes and copies <= 32
    assert rotation_copies(16, H200) == 512  # tiny inputs: capped
    assert rotation_copies(100 * 2**30, H200) == 2  # huge inputs: at least two, memory permitting


def test_bytes_moved_counts_read_write_buffers_twice() -> None:
    assert bytes_moved(load_spec(str(SAMPLES / "saxpy.toml"))) == 3 * 4 * 1048576
    assert bytes_moved(load_spec(str(SAMPLES / "plain_copy.toml"))) == 2 * 4 * 16777216


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_bad_spec_exits_2_before_any_gpu_work(tmp_path: Path) -> None:
    bad = tmp_path / "s.toml"
    bad.write_text('grid = 1\nblock = 32\n[[param]]\nname = "n"\ntype = "s32"\nvalue = 1\n')
    result = invoke("run", str(SAMPLES / "elementwise.sm90.ptx"), "--kernel", "saxpy", "--spec", str(bad))
    assert result.exit_code == 2 and "takes 4 parameters; the spec gives 1" in result.output
    result = invoke("bench", str(SAMPLES / "elementwise.sm90.ptx"), "--spec", str(tmp_path / "none.toml"))
    assert result.exit_code == 2 and "no such launch spec" in result.output


def test_three_files_is_a_usage_error() -> None:
    ptx = str(SAMPLES / "elementwise.sm90.ptx")
    result = invoke("run", ptx, ptx, ptx, "--spec", str(SAMPLES / "saxpy.toml"))
    assert result.exit_code == 2 and "give one file to run, or two" in result.output


@pytest.mark.skipif(probe() is None, reason="a GPU driver is present")
@pytest.mark.parametrize("command", ["run", "bench", "optimize"])
def test_no_driver_exits_3_with_a_clear_message(command: str, tmp_path) -> None:
    ptx = str(SAMPLES / "elementwise.sm90.ptx")
    spec = str(SAMPLES / "saxpy.toml")
    gpu = ["--spec", spec] if command != "optimize" else ["--verify-gpu", spec, "-o", str(tmp_path / "out.ptx")]
    result = invoke(command, ptx, *gpu, "--json")
    assert result.exit_code == 3, result.output
    assert "no CUDA driver: `run`, `bench` and `optimize --verify-gpu` need an NVIDIA GPU" in result.output
    assert not (tmp_path / "out.ptx").exists()
    assert "Traceback" not in result.output
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout or "x")  # nothing half-written on stdout

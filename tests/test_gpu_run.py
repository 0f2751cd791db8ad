"""`ptxtool run` and `bench` on a real GPU: every sample kernel against a NumPy reference, mutants that must be
caught (a rounding mode, a missing store, a write past the end), a cubin against the driver's JIT, and timing.
Skipped where no CUDA driver is found: `pytest -m gpu` runs exactly these on a machine with an NVIDIA GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SPEC_PTX

from ptxtool.cli import main
from ptxtool.errors import EnvironmentProblem
from ptxtool.report.gpu import run_lines
from ptxtool.services import bench as bench_service
from ptxtool.services import run as run_service
from ptxtool.services.launch import fill, from_bf16, load_spec, spec_from_data
from ptxtool.sources import read_inputs
from ptxtool.syntax import format_module, parse
from ptxtool.toolchain.gpu import probe


def run(paths, *args, **kwargs):
    """The run service on files read as the command reads them (a .cubin as bytes)."""
    return run_service.run(read_inputs([str(p) for p in paths], binary=True), *args, **kwargs)


def bench(paths, *args, **kwargs):
    return bench_service.bench(read_inputs([str(p) for p in paths], binary=True), *args, **kwargs)


SAMPLES = Path(__file__).resolve().parent.parent / "samples"
ELEMENTWISE = SAMPLES / "elementwise.sm90.ptx"
REASON = probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]


def inputs(name: str) -> dict[str, np.ndarray]:
    spec = load_spec(str(SAMPLES / f"{name}.toml"))
    return {b.name: fill(b, spec.seed, 0, i) for i, b in enumerate(spec.buffers)}


def f32(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float64)


def warp_reference(keys: np.ndarray) -> np.ndarray:
    out = np.empty_like(keys)
    for w in range(0, len(keys), 32):
        k = keys[w : w + 32]
        for lane, key in enumerate(k):
            peers = sum(1 << j for j in range(32) if k[j] == key)
            out[w + lane] = (peers + int(k.sum()) + int(k.max())) & 0xFFFFFFFF
    return out


def gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))


def erf(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(v)


def e4m3(values: np.ndarray) -> np.ndarray:
    """cvt.rn.satfinite.e4m3x2.f32 byte by byte: nearest of the 127 finite magnitudes (ties to the even code, whose
    mantissa is even), clamped to 448, the sign kept (also on zero)."""
    codes = np.arange(0x7F)
    exponent, mantissa = codes >> 3, codes & 7
    table = np.where(exponent == 0, mantissa / 8 * 2.0**-6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    magnitude = np.minimum(np.abs(values.astype(np.float64)), table[-1])
    upper = np.minimum(np.searchsorted(table, magnitude), len(table) - 1)
    lower = np.maximum(upper - 1, 0)
    below, above = magnitude - table[lower], table[upper] - magnitude
    code = np.where((above < below) | ((above == below) & (upper % 2 == 0)), upper, lower)
    return (code | (np.signbit(values) << 7)).astype(np.uint8)


# What each sample must compute, from its trial-0 inputs (regenerated here from the same seed).
REFERENCES = {
    "saxpy": lambda d, i: np.array_equal(d["y"], (2.5 * f32(i["x"]) + f32(i["y"])).astype(np.float32)),
    "daxpy_grid_stride": lambda d, i: np.allclose(d["y"], -0.75 * i["x"] + i["y"], rtol=1e-15, atol=1e-15),
    "hadd2": lambda d, i: np.array_equal(d["c"], (f32(i["a"]) * f32(i["b"]) + 1).astype(np.float16)),
    "bf16_gelu": lambda d, i: np.allclose(from_bf16(d["y"]), gelu(f32(from_bf16(i["x"]))), rtol=1e-2, atol=1e-2),
    "math_mix": lambda d, i: np.allclose(
        d["z"],
        np.sqrt(f32(i["x"])) / 7 + f32(i["x"]) ** 2.5 + erf(f32(i["x"])),
        rtol=1e-12,
    ),
    "block_sum": lambda d, i: np.isclose(d["out"][0], f32(i["x"]).sum(), rtol=1e-4),
    "count_positive": lambda d, i: int(d["count"][0]) & 0xFFFFFFFF == int((i["x"] > 0).sum()),
    "histogram": lambda d, i: np.array_equal(d["hist"], np.bincount(i["data"], minlength=256)),
    "grid_reduce_cg": lambda d, i: np.allclose(d["out"], [i["x"].sum(), i["x"].mean()], rtol=1e-12),
    "match_and_redux": lambda d, i: np.array_equal(d["out"], warp_reference(i["keys"])),
    "plain_copy": lambda d, i: np.array_equal(d["dst"].view(np.uint32), i["src"].view(np.uint32)),
    "streaming_scale": lambda d, i: np.array_equal(d["y"], i["x"] * np.float32(1.5)),
    "fp8_quantize": lambda d, i: np.array_equal(d["y"].view(np.uint8), e4m3(i["x"] * np.float32(0.75))),
}


@pytest.mark.parametrize("name", sorted(SPEC_PTX))
def test_sample_kernel_computes_its_reference(name: str) -> None:
    spec = load_spec(str(SAMPLES / f"{name}.toml"))
    report = run([str(SAMPLES / SPEC_PTX[name])], spec, trials=2)
    assert report.verdict == "ran", run_lines(report)
    assert all(o.unwritten in (None, 0) for o in report.outputs), run_lines(report)
    assert REFERENCES[name](report.data, inputs(name)), run_lines(report)


def test_formatted_ptx_is_identical(tmp_path: Path) -> None:
    formatted = tmp_path / "saxpy.fmt.ptx"
    formatted.write_text(format_module(parse(ELEMENTWISE.read_text())))
    report = run([str(ELEMENTWISE), str(formatted)], load_spec(str(SAMPLES / "saxpy.toml")))
    assert report.verdict == "identical" and report.exit_code == 0 and not report.differences


def mutant(tmp_path: Path, source: Path, old: str, new: str) -> str:
    text = source.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / f"mutant.{source.name}"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("fma.rn.f32 \t%f4, %f2, %f1, %f3;", "fma.rz.f32 \t%f4, %f2, %f1, %f3;"),  # rounding mode: a few ulps
        ("st.global.f32 \t[%rd7], %f4;", ""),  # the store is gone: y keeps its input
    ],
)
def test_mutants_of_saxpy_are_caught(tmp_path: Path, old: str, new: str) -> None:
    report = run([str(ELEMENTWISE), mutant(tmp_path, ELEMENTWISE, old, new)], load_spec(str(SAMPLES / "saxpy.toml")))
    assert report.verdict == "differ" and report.exit_code == 1
    (d,) = report.differences
    assert d.buffer == "y" and d.trial == 0 and 0 < d.differing <= d.elements and d.left != d.right


def test_unwritten_output_keeps_the_poison(tmp_path: Path) -> None:
    b = mutant(tmp_path, ELEMENTWISE, "st.global.u32 \t[%rd10], %r7;", "")
    report = run([str(ELEMENTWISE), b], load_spec(str(SAMPLES / "hadd2.toml")), kernel="hadd2", trials=1)
    (d,) = report.differences
    assert report.verdict == "differ" and d.index == 0 and d.right.endswith("(0x5a5a)") and d.differing == d.elements
    alone = run([b], load_spec(str(SAMPLES / "hadd2.toml")), trials=1)
    assert alone.outputs[0].unwritten == 1048576


def test_write_past_the_end_is_caught() -> None:
    """dst is 96 floats shorter than the copy: the guard zone after it changes. (An in-place update such as saxpy's
    y = a*x + y past the end can write the poison's own bytes back, which no guard sees.)"""
    data = {
        "kernel": "plain_copy",
        "grid": 4,
        "block": 256,
        "param": [
            {"name": "src", "type": "f32", "count": 4096},
            {"name": "dst", "type": "f32", "count": 4000, "output": True},
            {"name": "n", "type": "s32", "value": 1024},
        ],
    }
    report = run([str(SAMPLES / "comm.sm90.ptx")], spec_from_data(data, "short.toml", SAMPLES), trials=1)
    assert report.verdict == "overrun" and report.exit_code == 1
    assert report.overruns[0].buffer == "dst" and report.overruns[0].offset == 0


def test_float_atomics_agree_within_tolerance() -> None:
    spec = load_spec(str(SAMPLES / "block_sum.toml"))
    path = str(SAMPLES / "reduce.sm90.ptx")
    report = run([path, path], spec, trials=5)
    assert report.verdict == "within_tolerance" and report.exit_code == 0, run_lines(report)


def test_cubin_from_ptxas_matches_the_driver_jit(tmp_path: Path) -> None:
    from ptxtool.toolchain.compile import compile_ptx

    try:
        cubin = compile_ptx(ELEMENTWISE.read_text(), str(ELEMENTWISE), "sm_90").cubin
    except EnvironmentProblem as problem:
        pytest.skip(f"no ptxas: {problem}")
    path = tmp_path / "elementwise.sm90.cubin"
    path.write_bytes(cubin)
    report = run([str(ELEMENTWISE), str(path)], load_spec(str(SAMPLES / "saxpy.toml")))
    assert report.verdict == "identical", run_lines(report)


def test_bench_ratio_of_a_file_with_itself_is_near_one(tmp_path: Path) -> None:
    formatted = tmp_path / "saxpy.fmt.ptx"
    formatted.write_text(format_module(parse(ELEMENTWISE.read_text())))
    report = bench([str(ELEMENTWISE), str(formatted)], load_spec(str(SAMPLES / "saxpy.toml")), launches=60)
    assert report.working_set_bytes > report.device.l2_bytes and report.copies >= 2
    assert all(len(t.samples) == 60 and min(t.samples) > 0 for t in report.timings)
    assert 0.8 < report.ratio < 1.25 and 0.8 < report.noise < 1.25, run_lines(report)


def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    spec = str(SAMPLES / "saxpy.toml")
    b = mutant(tmp_path, ELEMENTWISE, "fma.rn.f32 \t%f4, %f2, %f1, %f3;", "fma.rz.f32 \t%f4, %f2, %f1, %f3;")
    same = CliRunner().invoke(main, ["run", str(ELEMENTWISE), str(ELEMENTWISE), "--spec", spec, "--json"])
    assert same.exit_code == 0 and json.loads(same.stdout)["verdict"] == "identical"
    differ = CliRunner().invoke(main, ["run", str(ELEMENTWISE), b, "--spec", spec, "--json", "-n", "1"])
    data = json.loads(differ.stdout)
    assert differ.exit_code == 1 and data["verdict"] == "differ" and data["differences"][0]["buffer"] == "y"
    timed = CliRunner().invoke(main, ["bench", str(ELEMENTWISE), "--spec", spec, "--json", "--launches", "20"])
    assert timed.exit_code == 0 and json.loads(timed.stdout)["results"][0]["median_us"] > 0


def test_fault_is_a_finding_with_a_report(tmp_path: Path) -> None:
    """Reads far past a small buffer: the launch fails and `run` says so (exit 1, verdict fault). After such a fault
    CUDA refuses the GPU to the whole process, so this runs the command in a process of its own."""
    spec = tmp_path / "fault.toml"
    spec.write_text(
        'kernel = "saxpy"\ngrid = 1048576\nblock = 256\n'
        '[[param]]\nname = "n"\ntype = "s32"\nvalue = 268435456\n'
        '[[param]]\nname = "a"\ntype = "f32"\nvalue = 2.0\n'
        '[[param]]\nname = "x"\ntype = "f32"\ncount = 16\n'
        '[[param]]\nname = "y"\ntype = "f32"\ncount = 16\ninit = "random"\noutput = true\n'
    )
    command = [sys.executable, "-m", "ptxtool.cli", "run", str(ELEMENTWISE), "--spec", str(spec), "--json", "-n", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["verdict"] == "fault" and "ILLEGAL_ADDRESS" in data["fault"], done.stderr

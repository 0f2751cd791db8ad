"""Launch specs: every sample spec matches its corpus kernel, mistakes are clear errors, contents are reproducible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SPEC_PTX

from ptxtool.errors import InputError
from ptxtool.services import launch
from ptxtool.services.launch import Buffer, Scalar, fill, from_bf16, load_spec, spec_from_data, to_bf16
from ptxtool.sources import read_source


def load_program(path: str, *args, **kwargs):
    return launch.load_program(read_source(path), *args, **kwargs)


SAMPLES = Path(__file__).resolve().parent.parent / "samples"


SAXPY = {
    "grid": 4,
    "block": 256,
    "param": [
        {"name": "n", "type": "s32", "value": 1024},
        {"name": "a", "type": "f32", "value": 2.0},
        {"name": "x", "type": "f32", "count": 1024},
        {"name": "y", "type": "f32", "count": 1024, "init": "random", "output": True},
    ],
}


def spec(data: dict, tmp: Path = SAMPLES):
    return spec_from_data(data, "test.toml", tmp)


def message(excinfo: pytest.ExceptionInfo) -> str:
    d = excinfo.value.diagnostics[0]
    return f"{d.location.path}:{d.location.line}: {d.message}"


@pytest.mark.parametrize("name", sorted(SPEC_PTX))
def test_sample_spec_matches_its_kernel(name: str) -> None:
    loaded = load_spec(str(SAMPLES / f"{name}.toml"))
    program = load_program(str(SAMPLES / SPEC_PTX[name]), None, loaded)
    assert program.ptx and program.image.startswith(b"//")
    assert program.kernel == name or program.kernel.startswith(f"_Z{len(name)}{name}")
    assert loaded.outputs, "every sample declares what it writes"


def test_every_sample_spec_is_listed() -> None:
    assert {p.stem for p in SAMPLES.glob("*.toml")} >= set(SPEC_PTX)


def test_geometry_and_defaults() -> None:
    s = spec(SAXPY)
    assert s.grid == (4, 1, 1) and s.block == (256, 1, 1)
    assert (s.seed, s.trials, s.poison, s.shared_bytes, s.cooperative) == (1, 3, 0x5A, 0, False)
    x, y = s.buffers
    assert not x.output and x.init == "random" and y.output and not y.poisoned
    assert s.buffer_bytes == 2 * 1024 * 4
    assert [p.size for p in s.params] == [4, 4, 8, 8]


def test_output_without_init_is_poisoned() -> None:
    data = {**SAXPY, "param": SAXPY["param"][:3] + [{"name": "y", "type": "f32", "count": 8, "output": True}]}
    assert spec(data).buffers[1].poisoned


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"grid": None}, "`grid` is missing"),
        ({"block": [64, 64]}, "4096 threads"),
        ({"block": [1, 1, 128]}, "at most [1024, 1024, 64] in x, y, z"),
        ({"grid": [1, 0]}, "`grid` must be a positive integer"),
        ({"poison": 300}, "`poison` is one byte"),
        ({"warps": 4}, "unknown key warps"),
        ({"trials": 0}, "`trials` must be at least 1"),
    ],
)
def test_spec_mistakes_are_input_errors(change: dict, expected: str) -> None:
    data = {k: v for k, v in {**SAXPY, **change}.items() if v is not None}
    with pytest.raises(InputError) as excinfo:
        spec(data)
    assert expected in message(excinfo)


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ({"name": "y", "type": "f33", "count": 4}, "`type` must be one of"),
        ({"name": "y", "type": "f32"}, "a scalar needs a `value`"),
        ({"name": "y", "type": "f32", "count": 0}, "`count` (elements) must be a positive integer"),
        ({"name": "y", "type": "f32", "count": 4, "init": "ones"}, "`init` must be one of"),
        ({"name": "y", "type": "f32", "count": 4, "rtol": 1e-3}, "applies to outputs only"),
        ({"name": "y", "type": "f32", "count": 4, "range": [1, 0]}, "low < high"),
        ({"name": "y", "type": "u8", "value": 256}, "does not fit in u8"),
        ({"name": "y", "type": "s32", "value": 1.5}, "must be an integer"),
        ({"name": "y", "type": "f32", "count": 4, "init": "npy", "file": "nope.npy"}, "no such .npy file"),
    ],
)
def test_param_mistakes_are_input_errors(param: dict, expected: str) -> None:
    with pytest.raises(InputError) as excinfo:
        spec({**SAXPY, "param": SAXPY["param"][:3] + [param]})
    assert expected in message(excinfo)


def test_toml_syntax_error_has_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("grid = 4\nblock = 256 256\nseed = 1\n")
    with pytest.raises(InputError) as excinfo:
        load_spec(str(bad))
    d = excinfo.value.diagnostics[0]
    assert d.location.line == 2 and "not valid TOML" in d.message


def test_spec_checked_against_kernel_signature() -> None:
    ptx = str(SAMPLES / "elementwise.sm90.ptx")
    with pytest.raises(InputError) as excinfo:
        load_program(ptx, "saxpy", spec({**SAXPY, "param": SAXPY["param"][:3]}))
    assert "takes 4 parameters; the spec gives 3" in message(excinfo)
    swapped = [SAXPY["param"][2], *SAXPY["param"][1:2], SAXPY["param"][0], SAXPY["param"][3]]
    with pytest.raises(InputError) as excinfo:
        load_program(ptx, "saxpy", spec({**SAXPY, "param": swapped}))
    assert "param 0 (x): kernel saxpy declares .u32 (4 bytes) there; the spec gives a buffer" in message(excinfo)


def test_kernel_lookup() -> None:
    ptx = str(SAMPLES / "elementwise.sm90.ptx")
    s = spec(SAXPY)
    with pytest.raises(InputError) as excinfo:
        load_program(ptx, "sazpy", s)
    assert "no kernel named sazpy; kernels here: saxpy, daxpy_grid_stride" in message(excinfo)
    with pytest.raises(InputError) as excinfo:
        load_program(ptx, "copy_vec", s)
    assert "copy_vec names several kernels" in message(excinfo)
    with pytest.raises(InputError) as excinfo:
        load_program(ptx, None, s)
    assert "give --kernel" in message(excinfo)


def test_random_contents_depend_on_seed_trial_and_buffer() -> None:
    x = Buffer("x", "f32", 1000, range=(-2.0, 3.0))
    first = fill(x, 7, 0, 2)
    assert np.array_equal(first, fill(x, 7, 0, 2)) and first.dtype == np.float32
    assert -2.0 <= first.min() and first.max() < 3.0 and len(np.unique(first)) > 990
    for other in (fill(x, 8, 0, 2), fill(x, 7, 1, 2), fill(x, 7, 0, 3)):
        assert not np.array_equal(first, other)
    bits = fill(Buffer("k", "u32", 4096), 1, 0, 0)
    assert bits.dtype == np.uint32 and bits.max() > 2**31 and bits.min() < 2**20
    small = fill(Buffer("k", "s8", 4096, range=(-3, 3)), 1, 0, 0)
    assert set(np.unique(small)) == {-3, -2, -1, 0, 1, 2}


def test_fixed_contents(tmp_path: Path) -> None:
    assert fill(Buffer("i", "s32", 5, init="iota", start=10, step=-3), 1, 0, 0).tolist() == [10, 7, 4, 1, -2]
    assert fill(Buffer("c", "f64", 3, init="constant", value=0.25), 1, 0, 0).tolist() == [0.25] * 3
    assert fill(Buffer("c", "u16", 2, init="constant", value=65535), 1, 0, 0).tolist() == [65535] * 2
    assert not fill(Buffer("z", "u64", 9, init="zeros"), 1, 0, 0).any()
    np.save(tmp_path / "data.npy", np.arange(12, dtype=np.int32).reshape(3, 4))
    loaded = spec(
        {**SAXPY, "param": [{"name": "d", "type": "u32", "count": "file", "init": "npy", "file": "data.npy"}]}, tmp_path
    )
    data = fill(loaded.buffers[0], 1, 0, 0)
    assert data.dtype == np.uint32 and data.tolist() == list(range(12))
    np.save(tmp_path / "wide.npy", np.zeros(4, dtype=np.float64))
    wide = spec(
        {**SAXPY, "param": [{"name": "d", "type": "f32", "count": 4, "init": "npy", "file": "wide.npy"}]}, tmp_path
    )
    with pytest.raises(InputError, match="8 bytes; buffer d is f32"):
        fill(wide.buffers[0], 1, 0, 0)


def test_bf16_round_to_nearest_even() -> None:
    values = np.array([1.0, -2.5, np.nan], dtype=np.float32)
    assert to_bf16(values).tolist()[:2] == [0x3F80, 0xC020] and from_bf16(to_bf16(values))[2] != 0  # NaN stays NaN
    assert np.isnan(from_bf16(to_bf16(values))[2])
    ties = np.array([0x3F808000, 0x3F818000, 0x3F808001], dtype=np.uint32).view(np.float32)
    assert to_bf16(ties).tolist() == [0x3F80, 0x3F82, 0x3F81]


def test_scalar_bytes() -> None:
    assert Scalar("n", "u32", 4294967295).encode() == b"\xff\xff\xff\xff"
    assert Scalar("a", "f32", 1.0).encode() == bytes.fromhex("0000803f")
    assert Scalar("a", "bf16", 1.0).encode() == bytes.fromhex("803f")
    assert spec({**SAXPY, "param": [{"name": "n", "type": "u32", "value": -1}]}).params[0].encode() == b"\xff" * 4

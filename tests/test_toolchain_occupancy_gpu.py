"""Occupancy and registers checked against the GPU driver's own answer (cuOccupancyMaxActiveBlocksPerMultiprocessor)
for every corpus kernel of the samples, at every block size it can launch with."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.discover import gpu_driver
from ptxtool.toolchain.occupancy import occupancy

SAMPLES = Path(__file__).parent.parent / "samples"
FILES = ["pressure.sm80.ptx", "gemm_smem.sm80.ptx", "tensorcore.sm80.ptx", "control.sm80.ptx", "reduce.sm80.ptx"]
HOPPER = ["hopper.sm90a.ptx", "comm.sm90.lineinfo.ptx"]
BLOCKS = (32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)


def _check(result):
    status, *values = result
    assert int(status) == 0, status
    return values[0] if len(values) == 1 else values


@pytest.fixture(scope="module")
def device():
    present, detail = gpu_driver()
    if not present:
        pytest.skip(f"no GPU: {detail}")
    from cuda.bindings import driver

    _check(driver.cuInit(0))
    dev = _check(driver.cuDeviceGet(0))
    context = _check(driver.cuDevicePrimaryCtxRetain(dev))
    _check(driver.cuCtxSetCurrent(context))
    attr = driver.CUdevice_attribute
    major = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    yield driver, f"sm_{major}{minor}"
    driver.cuDevicePrimaryCtxRelease(dev)


@pytest.mark.gpu
def test_occupancy_matches_driver(device, tmp_path, monkeypatch):
    driver, arch = device
    monkeypatch.setenv("PTXTOOL_CACHE_DIR", str(tmp_path))
    files = [(name, arch) for name in FILES] + [(name, arch + "a") for name in HOPPER if arch == "sm_90"]
    checked, mismatches = 0, []
    for name, target in files:
        compiled = compile_ptx((SAMPLES / name).read_text(), name, target)
        module = _check(driver.cuModuleLoadData(compiled.cubin))
        for kernel, resources in compiled.functions.items():
            if not resources.is_kernel:
                continue
            function = _check(driver.cuModuleGetFunction(module, kernel.encode()))
            fattr = driver.CUfunction_attribute
            registers = _check(driver.cuFuncGetAttribute(fattr.CU_FUNC_ATTRIBUTE_NUM_REGS, function))
            largest = _check(driver.cuFuncGetAttribute(fattr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function))
            assert registers == resources.registers, (name, kernel)
            for block in (b for b in BLOCKS if b <= largest):
                theirs = _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, block, 0))
                ours = occupancy(target, resources.registers, resources.shared, block)
                checked += 1
                if ours.blocks_per_sm != theirs:
                    mismatches.append((name, kernel, block, registers, resources.shared, ours.blocks_per_sm, theirs))
        _check(driver.cuModuleUnload(module))
    print(f"\n{checked} (kernel, block size) pairs on {arch}; mismatches: {mismatches}")
    assert checked > 100 and not mismatches

"""The CUDA driver through `cuda.bindings.driver`: load PTX (JIT, keeping its logs) or a cubin, move memory, launch,
time with events. Every driver result is checked; no driver at all is an EnvironmentProblem, not a traceback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptxtool.errors import EXIT_FOUND, Diagnostic, EnvironmentProblem, InputError, Location, PtxtoolError

_LOG_BYTES = 64 * 1024
_NO_DRIVER = "no CUDA driver: `run`, `bench` and `optimize --verify-gpu` need an NVIDIA GPU and its driver"
_JIT_LINE = re.compile(r"line (\d+); (error|warning)\s*:\s*(.*)")


class KernelFault(PtxtoolError):
    """A kernel that ran and failed (illegal address, trap, no finish in time): a finding, exit code 1."""

    exit_code = EXIT_FOUND


class LaunchRefused(PtxtoolError):
    """The driver would not start the launch (block too large, too much shared memory, grid too large for a
    cooperative launch): the spec asks for something this kernel or GPU cannot do."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What results depend on: which GPU, its L2 (for input rotation) and the driver's CUDA version."""

    name: str
    arch: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver: str

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arch": self.arch,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "memory_bytes": self.memory_bytes,
            "driver_cuda": self.driver,
        }


@dataclass(frozen=True, slots=True)
class LoadedModule:
    """A loaded module and what the JIT said about it (empty for a cubin)."""

    handle: Any
    name: str
    info_log: str


def probe() -> str | None:
    """Why no GPU can be used here, or None when one can (for skipping GPU tests without a traceback)."""
    try:
        with Gpu():
            return None
    except EnvironmentProblem as problem:
        return str(problem)


class Gpu:
    """One device's primary context and a stream; buffers, modules and events made here are released by close()."""

    def __init__(self, ordinal: int = 0) -> None:
        try:
            from cuda.bindings import driver
        except ImportError as error:
            raise EnvironmentProblem(f"{_NO_DRIVER} (cuda-bindings is not installed: {error})") from None
        self._cu = driver
        try:
            (status,) = driver.cuInit(0)
        except Exception as error:  # noqa: BLE001 - cuda.bindings raises its own loader errors when libcuda is absent
            raise EnvironmentProblem(f"{_NO_DRIVER} ({error})") from None
        if status != driver.CUresult.CUDA_SUCCESS:
            raise EnvironmentProblem(f"{_NO_DRIVER} (cuInit: {self._describe(status)})")
        count = self._call(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if ordinal >= count:
            raise EnvironmentProblem(f"{_NO_DRIVER} (the driver sees {count} GPUs; asked for device {ordinal})")
        self._device = self._call(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self._context = self._call(driver.cuDevicePrimaryCtxRetain(self._device), "cuDevicePrimaryCtxRetain")
        self._call(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        flags = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self._stream = self._call(driver.cuStreamCreate(flags), "cuStreamCreate")
        self._side = self._call(driver.cuStreamCreate(flags), "cuStreamCreate")  # releases gates on _stream
        self._streams: list[Any] = []  # more streams (a neighbour workload beside the kernel)
        self._buffers: list[int] = []
        self._modules: list[LoadedModule] = []
        self._events: list[Any] = []
        self.info = self._info()

    # -------------------------------------------------------------- lifetime

    def __enter__(self) -> Gpu:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Free everything; errors are ignored here, since after a fault the context refuses every call (and, by
        CUDA's rule, so does every later context in this process: one command is one process)."""
        cu = self._cu
        for event in self._events:
            cu.cuEventDestroy(event)
        for ptr in self._buffers:
            cu.cuMemFree(ptr)
        for module in self._modules:
            cu.cuModuleUnload(module.handle)
        for stream in (self._stream, self._side, *self._streams):
            cu.cuStreamDestroy(stream)
        cu.cuDevicePrimaryCtxRelease(self._device)
        self._events, self._buffers, self._modules, self._streams = [], [], [], []

    def stream(self) -> Any:
        """One more stream on this context, for work that must run beside the kernel's (`stream=` of the calls)."""
        flags = int(self._cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        stream = self._call(self._cu.cuStreamCreate(flags), "cuStreamCreate")
        self._streams.append(stream)
        return stream

    # -------------------------------------------------------------- modules

    def load(self, image: bytes, name: str, *, ptx: bool) -> LoadedModule:
        """Load PTX text (JIT-compiled by the driver, logs kept) or a cubin; JIT errors become line diagnostics."""
        cu = self._cu
        info, error = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)
        opt = cu.CUjit_option
        options = [
            opt.CU_JIT_INFO_LOG_BUFFER,
            opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_ERROR_LOG_BUFFER,
            opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_LOG_VERBOSE,
        ]
        values = [info, _LOG_BYTES, error, _LOG_BYTES, 1]
        data = image + b"\0" if ptx else image
        status, handle = cu.cuModuleLoadDataEx(data, len(options), options, values)
        info_log, error_log = _text(info), _text(error)
        if status != cu.CUresult.CUDA_SUCCESS:
            raise self._load_error(status, name, error_log or info_log, ptx)
        module = LoadedModule(handle, name, info_log)
        self._modules.append(module)
        return module

    def function(self, module: LoadedModule, kernel: str) -> Any:
        status, handle = self._cu.cuModuleGetFunction(module.handle, kernel.encode())
        if status != self._cu.CUresult.CUDA_SUCCESS:
            raise InputError.at(
                module.name, f"no kernel named {kernel} in the loaded module ({self._describe(status)})"
            )
        return handle

    def _load_error(self, status: Any, name: str, log: str, ptx: bool) -> PtxtoolError:
        reason = self._describe(status)
        if status == self._cu.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
            return EnvironmentProblem(
                f"{name}: the GPU driver (CUDA {self.info.driver}) cannot JIT this PTX version; compile it to a "
                "cubin with a ptxas that knows it (e.g. the nvidia-cuda-nvcc wheel) and run the .cubin"
            )
        diagnostics = [
            Diagnostic(Location(name, int(m.group(1))), m.group(3).strip(), m.group(2)) for m in _JIT_LINE.finditer(log)
        ]
        if not diagnostics:
            notes = tuple([line for line in log.splitlines() if line.strip()][:20])
            what = "the driver's JIT rejected this PTX" if ptx else "the driver could not load this cubin"
            diagnostics = [Diagnostic(Location(name), f"{what}: {reason} (GPU {self.info.arch})", notes=notes)]
        return InputError(diagnostics)

    # -------------------------------------------------------------- memory

    def alloc(self, nbytes: int) -> int:
        status, ptr = self._cu.cuMemAlloc(max(nbytes, 1))
        if status == self._cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            raise InputError.at("<spec>", f"the GPU has no room for a buffer of {nbytes} bytes")
        self._check(status, "cuMemAlloc")
        address = int(ptr)
        self._buffers.append(address)
        return address

    def upload(self, ptr: int, data: np.ndarray) -> None:
        """Copy host data in, ordered on our stream (from pageable memory the call returns once it is staged)."""
        data = np.ascontiguousarray(data)
        status = self._cu.cuMemcpyHtoDAsync(ptr, data.ctypes.data, data.nbytes, self._stream)[0]
        self._check(status, "cuMemcpyHtoDAsync", during_kernel=True)

    def download(self, ptr: int, nbytes: int, timeout: float = 60.0) -> np.ndarray:
        """The bytes at `ptr` after all work queued so far (a fault shows up here as KernelFault)."""
        self.synchronize(timeout)
        out = np.empty(nbytes, dtype=np.uint8)
        status = self._cu.cuMemcpyDtoHAsync(out.ctypes.data, ptr, nbytes, self._stream)[0]
        self._check(status, "cuMemcpyDtoHAsync", during_kernel=True)
        self.synchronize(timeout)
        return out

    def fill_bytes(self, ptr: int, byte: int, nbytes: int) -> None:
        self._check(self._cu.cuMemsetD8Async(ptr, byte, nbytes, self._stream)[0], "cuMemsetD8Async")

    # -------------------------------------------------------------- launches and time

    def launch(
        self,
        function: Any,
        grid: Sequence[int],
        block: Sequence[int],
        args: Sequence[bytes],
        shared_bytes: int = 0,
        cooperative: bool = False,
        stream: Any = None,
    ) -> None:
        """Queue one launch; `args` are the parameters' bytes in order. Refusals raise at once, faults on sync."""
        cu = self._cu
        if shared_bytes > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._refused(cu.cuFuncSetAttribute(function, attr, shared_bytes)[0], "set dynamic shared memory")
        holders, pointers = _pack(args)
        dims = (
            *grid,
            *block,
            shared_bytes,
            self._stream if stream is None else stream,
            pointers.ctypes.data if args else None,
        )
        if cooperative:
            status = cu.cuLaunchCooperativeKernel(function, *dims)[0]
        else:
            status = cu.cuLaunchKernel(function, *dims, 0)[0]
        del holders  # the driver copies parameter values when the launch is queued
        self._refused(status, "launch")

    def gate(self) -> int:
        """A device flag for hold/release: launches queued while the stream is held start back to back when it is
        released, so events time the kernels rather than Python submitting them."""
        return self.alloc(4)

    def hold(self, gate: int, stream: Any = None) -> None:
        cu, stream = self._cu, self._stream if stream is None else stream
        self._check(cu.cuMemsetD32Async(gate, 0, 1, stream)[0], "cuMemsetD32Async")
        wait = int(cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        self._check(cu.cuStreamWaitValue32(stream, gate, 1, wait)[0], "cuStreamWaitValue32")

    def release(self, gate: int) -> None:
        cu = self._cu
        write = int(cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT)
        self._check(cu.cuStreamWriteValue32(self._side, gate, 1, write)[0], "cuStreamWriteValue32")

    def event(self) -> Any:
        event = self._call(self._cu.cuEventCreate(int(self._cu.CUevent_flags.CU_EVENT_DEFAULT)), "cuEventCreate")
        self._events.append(event)
        return event

    def record(self, event: Any, stream: Any = None) -> None:
        self._check(self._cu.cuEventRecord(event, self._stream if stream is None else stream)[0], "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self._call(self._cu.cuEventElapsedTime(start, end), "cuEventElapsedTime", during_kernel=True))

    def synchronize(self, timeout: float = 60.0, stream: Any = None) -> None:
        """Wait for queued work, polling so that a kernel that never finishes is reported instead of hanging us."""
        cu = self._cu
        deadline = time.monotonic() + timeout
        pause = 1e-5
        while True:
            (status,) = cu.cuStreamQuery(self._stream if stream is None else stream)
            if status != cu.CUresult.CUDA_ERROR_NOT_READY:
                self._check(status, "a kernel", during_kernel=True)
                return
            if time.monotonic() > deadline:
                raise KernelFault(f"the kernel did not finish within {timeout:g} s (a hang, or raise --timeout)")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    # -------------------------------------------------------------- checking

    def devices(self) -> list[DeviceInfo]:
        """Every GPU the driver sees, in ordinal order (what `--gpus` spreads work over)."""
        count = self._call(self._cu.cuDeviceGetCount(), "cuDeviceGetCount")
        return [self._describe_device(self._call(self._cu.cuDeviceGet(i), "cuDeviceGet")) for i in range(count)]

    def _info(self) -> DeviceInfo:
        return self._describe_device(self._device)

    def _describe_device(self, dev: Any) -> DeviceInfo:
        cu = self._cu
        attr = cu.CUdevice_attribute

        def get(a: Any) -> int:
            return int(self._call(cu.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute"))

        name = self._call(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        version = int(self._call(cu.cuDriverGetVersion(), "cuDriverGetVersion"))
        major, minor = (
            get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        )
        return DeviceInfo(
            name=bytes(name).split(b"\0", 1)[0].decode(errors="replace"),
            arch=f"sm_{major}{minor}",
            sm_count=get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            l2_bytes=get(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            memory_bytes=int(self._call(cu.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
            driver=f"{version // 1000}.{version % 1000 // 10}",
        )

    def _describe(self, status: Any) -> str:
        _, name = self._cu.cuGetErrorName(status)
        _, text = self._cu.cuGetErrorString(status)
        return f"{_decode(name)}: {_decode(text)}" if name else f"CUDA error {int(status)}"

    def _check(self, status: Any, what: str, during_kernel: bool = False) -> None:
        if status == self._cu.CUresult.CUDA_SUCCESS:
            return
        if during_kernel:
            raise KernelFault(f"{what} failed on the GPU: {self._describe(status)}")
        raise EnvironmentProblem(f"the GPU driver failed in {what}: {self._describe(status)}")

    def _refused(self, status: Any, what: str) -> None:
        if status != self._cu.CUresult.CUDA_SUCCESS:
            raise LaunchRefused(f"the driver refused to {what}: {self._describe(status)}")

    def _call(self, result: tuple, what: str, during_kernel: bool = False) -> Any:
        self._check(result[0], what, during_kernel)
        return result[1] if len(result) == 2 else result[1:]


def _pack(args: Sequence[bytes]) -> tuple[list[np.ndarray], np.ndarray]:
    """Each parameter's bytes in its own 16-byte-aligned host block, and the array of their addresses (void**)."""
    holders = []
    for arg in args:
        block = np.zeros((len(arg) + 15) // 16 * 2, dtype=np.uint64)
        block.view(np.uint8)[: len(arg)] = np.frombuffer(arg, dtype=np.uint8)
        holders.append(block)
    return holders, np.array([h.ctypes.data for h in holders], dtype=np.uint64)


def _decode(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _text(log: bytearray) -> str:
    return bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip()

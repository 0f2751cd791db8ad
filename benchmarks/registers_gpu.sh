#!/usr/bin/env bash
# The GPU half of benchmarks/registers.py on a machine with a driver, numpy and cuda-bindings (no ptxas/nvcc needed:
# the driver JIT-compiles the PTX): run from the repository root after
# `python benchmarks/registers.py prepare .bench-registers` here (carry .bench-registers).
set -uo pipefail
export PYTHONPATH="${PYTHONPATH:-}:$PWD" PYTHONUNBUFFERED=1
out="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== input vs the register pass's output: outputs bit for bit, then timed side by side (median of 200)"
python3 benchmarks/registers.py gpu .bench-registers 2>&1 | tee "$out/registers_gpu.txt"
if python3 -c "from ptxtool.toolchain.discover import find_tool; find_tool('ptxas')" 2>/dev/null; then
  echo "== the same, assembled by the wheel's ptxas (the numbers the pass judged)"
  python3 benchmarks/registers.py gpu .bench-registers --ptxas 2>&1 | tee "$out/registers_gpu_ptxas.txt"
fi
cp .bench-registers/registers_gpu.json "$out/" 2>/dev/null
echo "== pytest -m gpu for the register pass"
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_pass_registers.py tests/test_pass_registers_remat_gpu.py 2>&1 | tail -5

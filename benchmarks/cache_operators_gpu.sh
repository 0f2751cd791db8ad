#!/usr/bin/env bash
# The GPU half of benchmarks/cache_operators.py on a machine with torch and a driver but maybe no ptxas in a wheel:
# run from the repository root after `python benchmarks/cache_operators.py prepare .bench` (carry .bench and .whl).
set -uo pipefail
export PYTHONPATH="${PYTHONPATH:-}:$PWD" PYTHONUNBUFFERED=1
out="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== outputs bit for bit: original vs each variant (ptxtool run)"
python3 benchmarks/cache_operators.py verify .bench 2>&1 | tee "$out/verify.txt"
echo "== ptxtool optimize --verify-gpu with the machine's own ptxas/nvdisasm"
export PTXTOOL_PTXAS="$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)"
export PTXTOOL_NVDISASM="$(command -v nvdisasm || echo /usr/local/cuda/bin/nvdisasm)"
python3 -m ptxtool optimize samples/comm.sm90.ptx --noalias plain_copy --l2-evict-first \
  --verify-gpu samples/plain_copy.toml -o "$out/comm.optimized.ptx" 2>&1 | tail -4
echo "exit $?"
echo "== bandwidth and interference"
python3 benchmarks/cache_operators.py measure .bench --json "$out/cache_operators.json" 2>&1 | tee "$out/measure.txt"

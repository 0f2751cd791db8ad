#!/usr/bin/env bash
# The GPU half of benchmarks/warp_roles.py on a machine with a driver, cuda-bindings and numpy (no nvcc, ptxas or
# lark needed): run from the repository root after `python benchmarks/warp_roles.py prepare .bench-wr` here (carry
# .bench-wr). Bit-identity over 100 launches per case and variant with a watchdog, then the side-by-side times.
set -uo pipefail
export PYTHONPATH="${PYTHONPATH:-}:$PWD" PYTHONUNBUFFERED=1
out="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# a hung kernel cannot be stopped from inside the process: bound the whole run too
timeout 1500 python3 benchmarks/warp_roles.py measure .bench-wr --json "$out/warp_roles.json" 2>&1 | tee "$out/warp_roles.txt"
echo "exit ${PIPESTATUS[0]}"

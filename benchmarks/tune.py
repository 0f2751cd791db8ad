"""What `ptxtool tune` buys, before and after, on the GPU: every sample kernel with a launch spec, tuned alone and
beside the neighbour (an L2-resident sum on another stream), and a grid-size search for comm's `plain_copy` beside
the neighbour (the DeepSeek question: how many SMs to give communication).

    python benchmarks/tune.py                    # on a machine with a GPU: the tables (and --json FILE)
    python benchmarks/tune.py --dry-run          # anywhere: the candidates and their ptxas numbers only

Each row: the input's median and the winner's (the kernel's own time; beside the neighbour for that objective), the
winner's ratio to the input with its confidence interval, and the neighbour's slowdown beside each (its time beside
the kernel over its time alone). A winner other than the input is faster beyond the noise, at the stated confidence.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = ROOT / "samples"
# each sample launch spec and the PTX that holds its kernel (as tests/conftest.py's SPEC_PTX)
SPECS = {
    "saxpy": "elementwise.sm90.ptx",
    "daxpy_grid_stride": "elementwise.sm90.ptx",
    "hadd2": "elementwise.sm90.ptx",
    "bf16_gelu": "elementwise.sm90.ptx",
    "fp8_quantize": "elementwise.sm90.ptx",
    "math_mix": "elementwise.sm90.ptx",
    "block_sum": "reduce.sm90.ptx",
    "count_positive": "reduce.sm90.ptx",
    "histogram": "reduce.sm90.ptx",
    "grid_reduce_cg": "reduce.sm90.ptx",
    "match_and_redux": "reduce.sm90.ptx",
    "plain_copy": "comm.sm90.ptx",
    "streaming_scale": "comm.sm90.ptx",
}
GRIDS = [20, 40, 66, 132, 264, 528, 1056]


def tune(spec: str, ptx: str, dry_run: bool, **config):
    from ptxtool.services import tune as service
    from ptxtool.sources import read_source

    options = service.Options(str(SAMPLES / f"{spec}.toml"), config=config, dry_run=dry_run, fresh=True)
    return service.execute(options, [read_source(str(SAMPLES / ptx))])


def _iv(i, suffix: str = "") -> str:
    if i is None:
        return "-"
    return f"{i.median:.3f}{suffix}" + (f" [{i.low:.3f}, {i.high:.3f}]" if i.low is not None else "")


def _us(value: float | None) -> str:
    """A median in microseconds, or a dash where nothing was timed (a kernel whose only candidate is the input)."""
    return f"{value:9.2f}" if value is not None else f"{'-':>9}"


def samples(dry_run: bool, launches: int) -> list[dict]:
    rows = []
    header = f"{'kernel':20} {'objective':9} {'n':>3} {'winner':28} {'input us':>9} {'winner us':>9}  "
    if not dry_run:
        print(header + f"{'ratio [interval]':26} neighbour slowdown: input -> winner")
    for spec, ptx in SPECS.items():
        if not (SAMPLES / f"{spec}.toml").exists():
            continue
        for objective in ("alone",) if dry_run else ("alone", "neighbour"):
            result = tune(spec, ptx, dry_run, objective=objective, launches=launches)
            rows.append(result.to_data())
            if dry_run:
                names = ", ".join(c.name for c in result.candidates[1:]) or "none"
                print(f"{spec:20} {len(result.candidates):>3} candidates: {names}")
                continue
            base = result.candidates[0]
            winner = next(c for c in result.candidates if c.name == result.winner)
            print(
                f"{spec:20} {objective:9} {len(result.candidates):>3} {result.winner:28} {_us(base.median_us)} "
                f"{_us(winner.median_us)}  {_iv(winner.ratio) if winner is not base else '1':26} "
                f"{_iv(base.neighbour_slowdown, 'x')} -> {_iv(winner.neighbour_slowdown, 'x')}"
            )
    return rows


def grid_search(dry_run: bool, launches: int) -> dict:
    """plain_copy on N blocks beside the neighbour: the kernel's time and the neighbour's slowdown for each N."""
    result = tune("plain_copy", "comm.sm90.ptx", dry_run, objective="neighbour", grid=GRIDS, launches=launches)
    print(f"\nplain_copy beside a {result.space.neighbour_mib} MiB L2-resident sum, grid from {GRIDS}:")
    print(f"{'candidate':34} {'kernel us':>9}  {'kernel ratio':26} {'neighbour slowdown':26} {'neighbour ratio':26}")
    for c in result.candidates:
        us = _us(c.median_us)
        kernel = "1" if c.name == "input" else _iv(c.kernel_ratio)
        ratio = "1" if c.name == "input" else _iv(c.ratio)
        print(f"{c.name:34} {us}  {kernel:26} {_iv(c.neighbour_slowdown, 'x'):26} {ratio:26}")
    if not dry_run:
        print(f"winner (the kernel itself no slower beyond noise): {result.winner}")
    return result.to_data()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="candidates and ptxas numbers only (no GPU)")
    parser.add_argument("--launches", type=int, default=200, help="timed rounds at most per tune")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    data = {"samples": samples(args.dry_run, args.launches), "grid_search": grid_search(args.dry_run, args.launches)}
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()

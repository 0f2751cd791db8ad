"""What `ptxtool tune` buys, before and after, on the GPU: every sample kernel with a launch spec, tuned alone and
beside the neighbour (an L2-resident sum on another stream), a grid-size search for comm's `plain_copy` beside
the neighbour (the DeepSeek question: how many SMs to give communication), and tune's neighbour-objective winner for
`plain_copy` on 20 SMs against the hand-hinted variants of OPTIMIZATIONS.md (benchmarks/tune/), timed in one run,
and a kernel of each code-restructuring pass (registers: long_live_ranges; warp roles: staged) tuned alone.

    python benchmarks/tune.py                    # on a machine with a GPU: the tables (and --json FILE)
    python benchmarks/tune.py --only hand        # one section: samples, grid, hand or passes
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
HAND = ROOT / "benchmarks" / "tune"  # hand-hinted plain_copy variants and their launch spec (its README)
HAND_SPEC = HAND / "plain_copy_20sm.toml"
GRIDS = [20, 40, 66, 132, 264, 528, 1056]


def sample_specs() -> dict[str, Path]:
    """Each sample launch spec that names its PTX file (`ptx = "..."`): spec stem -> that file."""
    from ptxtool.services.launch import load_spec

    specs = ((p.stem, load_spec(str(p)).ptx) for p in sorted(SAMPLES.glob("*.toml")))
    return {stem: ptx for stem, ptx in specs if ptx is not None}


def tune(spec: Path, dry_run: bool, **config):
    """tune the kernel of a launch spec in the PTX file the spec names, measured afresh."""
    from ptxtool.services import tune as service
    from ptxtool.services.launch import load_spec
    from ptxtool.sources import read_source

    options = service.Options(str(spec), config=config, dry_run=dry_run, fresh=True)
    return service.execute(options, [read_source(str(load_spec(str(spec)).ptx))])


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
    for spec in sample_specs():
        for objective in ("alone",) if dry_run else ("alone", "neighbour"):
            result = tune(SAMPLES / f"{spec}.toml", dry_run, objective=objective, launches=launches)
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
    result = tune(SAMPLES / "plain_copy.toml", dry_run, objective="neighbour", grid=GRIDS, launches=launches)
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


def _hand_candidates(context):
    """benchmarks/tune's hand-hinted files, each a code candidate (a module of plain_copy alone)."""
    from ptxtool.services.tuning.space import Candidate

    for path in sorted(HAND.glob("plain_copy.*.ptx")):
        name = f"hand:{path.stem.removeprefix('plain_copy.')}"
        yield Candidate(name, "hand-hinted", path.read_text(), context.input.launch, code_changed=True)


def hand_hinted(dry_run: bool, launches: int) -> dict:
    """plain_copy on 20 blocks of 1024 threads beside the neighbour (OPTIMIZATIONS.md's setting), tune's own
    candidates and the hand-hinted variants timed together, interleaved with nvcc's code; tune's winner is decided
    among its own candidates only, and compared with the best hand-hinted variant."""
    from ptxtool.services.tune import decide
    from ptxtool.services.tuning.space import GENERATORS, Generator, register_generator

    if "hand-hinted" not in GENERATORS:
        register_generator(Generator("hand-hinted", "code", _hand_candidates))
    generators = ["cache-operators", "hand-hinted"]
    result = tune(HAND_SPEC, dry_run, objective="neighbour", generators=generators, launches=launches)
    mib = result.space.neighbour_mib
    print(f"\nplain_copy on 20 blocks of 1024 threads beside a {mib} MiB L2-resident sum: tune against the hand hints")
    print(f"{'candidate':28} {'verified':9} {'kernel us':>9}  {'kernel ratio':26} {'neighbour slowdown':26}")
    for c in result.candidates:
        kernel = "1" if c.name == "input" else _iv(c.kernel_ratio)
        verified = {True: "yes", False: "NO", None: "-"}[c.verified]
        print(f"{c.name:28} {verified:9} {_us(c.median_us)}  {kernel:26} {_iv(c.neighbour_slowdown, 'x'):26}")
    data = result.to_data()
    if dry_run:
        return data
    own = [c for c in result.candidates if c.candidate.origin != "hand-hinted"]
    winner = next(c for c in own if c.name == decide(own, result.space))
    hand = [c for c in result.candidates if c.candidate.origin == "hand-hinted" and c.neighbour_slowdown]
    best = min(hand, key=lambda c: c.neighbour_slowdown.median) if hand else None
    nvcc = result.candidates[0].neighbour_slowdown
    print(f"nvcc's code: neighbour slowdown {_iv(nvcc, 'x')}")
    print(
        f"tune's winner (its own candidates): {winner.name}, neighbour slowdown {_iv(winner.neighbour_slowdown, 'x')}"
    )
    if best is not None:
        print(f"best hand-hinted variant: {best.name}, neighbour slowdown {_iv(best.neighbour_slowdown, 'x')}")
        reached = (
            winner.neighbour_slowdown is not None and winner.neighbour_slowdown.median <= best.neighbour_slowdown.median
        )
        print(f"tune reaches the best hand hint: {'yes' if reached else 'no'} (medians; intervals above)")
    data["tune_winner"] = winner.name
    data["best_hand"] = best.name if best else None
    return data


# kernels the register and warp-role passes change (benchmarks/tune/*.toml): spec -> the generator that tunes it
PASS_KERNELS = {"long_live_ranges": "registers", "staged": "warp-roles"}


def passes(dry_run: bool, launches: int) -> list[dict]:
    """A kernel of each pass tuned alone with that pass's candidates only: each candidate's ptxas numbers, its
    block, outputs verified, ratio to the input, and the winner."""
    rows = []
    for spec, generator in PASS_KERNELS.items():
        result = tune(HAND / f"{spec}.toml", dry_run, generators=[generator], launches=launches)
        rows.append(result.to_data())
        print(f"\n{spec}: {generator} candidates (alone)")
        print(
            f"{'candidate':44} {'block':>5} {'regs':>4} {'spill':>5} {'verified':9} {'median us':>9}  ratio [interval]"
        )
        for c in result.candidates:
            r, verified = c.resources, {True: "yes", False: "NO", None: "-"}[c.verified]
            ratio = "1" if c.name == "input" else _iv(c.ratio)
            block = c.candidate.launch.block[0]
            print(
                f"{c.name:44} {block:>5} {r.registers!s:>4} {r.spill_bytes:>5} {verified:9} {_us(c.median_us)}  {ratio}"
            )
        print(*(f"  note: {n}" for n in result.notes), sep="\n")
        if not dry_run:
            print(f"winner: {result.winner}")
    return rows


SECTIONS = {"samples": samples, "grid": grid_search, "hand": hand_hinted, "passes": passes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="candidates and ptxas numbers only (no GPU)")
    parser.add_argument("--launches", type=int, default=200, help="timed rounds at most per tune")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append", help="run only these sections")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    data = {name: SECTIONS[name](args.dry_run, args.launches) for name in args.only or SECTIONS}
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()

"""What CI fails on: budgets (limits per kernel name or glob, from TOML) and baselines (a committed snapshot of
each kernel's numbers, where any change for the worse is a regression).

Budget file:

    [kernels."*"]
    max_registers = 128
    max_spill_bytes = 0
    min_occupancy = 0.5
    local_memory = false
    [kernels."nbody_*"]
    max_registers = 168

Each limit comes from the most specific table that sets it: the exact kernel name, then the globs that match in
file order, then `"*"`.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ptxtool.config import read_toml
from ptxtool.errors import Diagnostic, InputError, Location
from ptxtool.services.inspect import FileReport, KernelReport
from ptxtool.sources import write_atomic

BASELINE_SCHEMA = "ptxtool.baseline/1"


def violation(path: str, line: int, kernel: str, check: str, message: str, origin: str) -> Diagnostic:
    """One broken budget limit or one regression against the baseline (`origin` "budget" or "baseline"), at the
    kernel's line; or (`--strict`) a budget table that matches no kernel, at its line in the budget file (kernel "").
    Its code is `origin/check`; `kernel`, `check` and `origin` are the JSON document's."""
    properties = {"kernel": kernel, "check": check, "origin": origin}
    return Diagnostic(Location(path, line), message, "error", code=f"{origin}/{check}", properties=properties)


def _local_ops(k: KernelReport) -> int:
    return sum(k.sass.local_memory.values())


# limit key -> (value type, measured value (None: not known), True if exceeding the limit is the violation, unit)
LIMITS: dict[str, tuple[type, Callable[[KernelReport], float | None], bool, str]] = {
    "max_registers": (int, lambda k: k.resources.registers, True, "registers"),
    "max_spill_bytes": (int, lambda k: k.resources.spill_bytes, True, "bytes"),
    "max_stack_bytes": (int, lambda k: k.resources.stack_frame, True, "bytes of stack"),
    "max_shared_bytes": (int, lambda k: k.resources.shared, True, "bytes of shared memory"),
    "min_occupancy": (float, lambda k: k.occupancy.occupancy if k.occupancy else None, False, "occupancy"),
}


# limit key -> the values it may take: (least, most, what to say otherwise). Occupancy is a fraction, as JSON shows it.
RANGES: dict[str, tuple[float, float, str]] = {
    "max_registers": (0, 255, "a thread has at most 255 registers (give 0 to 255)"),
    "max_spill_bytes": (0, 1 << 40, "a byte count is 0 or more"),
    "max_stack_bytes": (0, 1 << 40, "a byte count is 0 or more"),
    "max_shared_bytes": (0, 1 << 40, "a byte count is 0 or more"),
    "min_occupancy": (0, 1, "occupancy is a fraction of the SM's warps from 0 to 1 (0.5 for 50%)"),
}


@dataclass(frozen=True, slots=True)
class Budget:
    """The tables of a budget file, in file order: (kernel name or glob, its limits)."""

    path: str
    tables: tuple[tuple[str, dict], ...]

    def limits(self, kernel: str) -> dict[str, tuple[object, str]]:
        """Each limit that applies to `kernel`, with the key of the table it came from."""
        exact = [(k, t) for k, t in self.tables if k == kernel]
        globs = [(k, t) for k, t in self.tables if k not in (kernel, "*") and fnmatch.fnmatchcase(kernel, k)]
        star = [(k, t) for k, t in self.tables if k == "*"]
        found: dict[str, tuple[object, str]] = {}
        for key, table in exact + globs + star:
            for name, value in table.items():
                found.setdefault(name, (value, key))
        return found


def load_budget(path: str) -> Budget:
    """Read and check a budget file: only `[kernels."PATTERN"]` tables with known limits of the right type."""
    data = read_toml(Path(path))
    unknown = set(data) - {"kernels"}
    if unknown or not isinstance(data.get("kernels"), dict):
        raise InputError.at(path, 'a budget holds only [kernels."NAME or GLOB"] tables (e.g. [kernels."*"])')
    allowed = {**{k: v[0] for k, v in LIMITS.items()}, "local_memory": bool}
    for pattern, table in data["kernels"].items():
        if not isinstance(table, dict):
            raise InputError.at(path, f'kernels."{pattern}" must be a table of limits')
        for key, value in table.items():
            if key not in allowed:
                raise InputError.at(path, f'[kernels."{pattern}"]: unknown limit {key!r}; known: {", ".join(allowed)}')
            kind = allowed[key]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                if not (kind is float and isinstance(value, int) and not isinstance(value, bool)):
                    raise InputError.at(path, f'[kernels."{pattern}"]: {key} must be {kind.__name__}, not {value!r}')
            low, high, wanted = RANGES.get(key, (None, None, ""))
            if low is not None and not low <= value <= high:
                raise InputError.at(path, f'[kernels."{pattern}"]: {key} = {value!r} is impossible: {wanted}')
    return Budget(path, tuple(data["kernels"].items()))


def _header_line(lines: list[str], pattern: str) -> int:
    """The line of a `[kernels."PATTERN"]` header (quoted or bare); 0 when the table is written another way."""
    name = re.escape(pattern)
    header = re.compile(rf"""^\s*\[\s*kernels\s*\.\s*(?:"{name}"|'{name}'|{name})\s*\]""")
    return next((n for n, line in enumerate(lines, 1) if header.match(line)), 0)


def unmatched(budget: Budget, reports: list[FileReport]) -> list[Diagnostic]:
    """Each table that names no kernel of these reports (a typo, or a kernel renamed), `"*"` aside, at its line."""
    names = [k.name for r in reports for k in r.kernels]
    files = len(reports)
    try:
        lines = Path(budget.path).read_text(errors="replace").splitlines()
    except OSError:  # read a moment ago; gone now: the table is still named
        lines = []
    return [
        violation(
            budget.path,
            _header_line(lines, pattern),
            "",
            "unmatched",
            f'[kernels."{pattern}"] matches no kernel of the {files} file{"s" * (files != 1)} inspected',
            "budget",
        )
        for pattern, _ in budget.tables
        if pattern != "*" and not any(fnmatch.fnmatchcase(name, pattern) for name in names)
    ]


def check_budget(budget: Budget, reports: list[FileReport]) -> list[Diagnostic]:
    """Every limit each kernel breaks, in input order."""
    found = []
    for report in reports:
        for k in report.kernels:
            for key, (limit, pattern) in budget.limits(k.name).items():
                where = f'(budget {budget.path} [kernels."{pattern}"])'
                if key == "local_memory":
                    if limit is False and (k.resources.uses_local_memory or _local_ops(k)):
                        r = k.resources
                        message = (
                            f"kernel {k.name} uses local memory ({r.spill_stores} bytes spill stores, {r.spill_loads} "
                            f"bytes spill loads, {r.stack_frame} bytes of stack, {_local_ops(k)} LDL/STL) but "
                            f"local_memory = false {where}"
                        )
                        found.append(violation(report.path, k.line, k.name, key, message, "budget"))
                    continue
                _, measure, above_is_bad, unit = LIMITS[key]
                value = measure(k)
                if value is None or (value <= limit if above_is_bad else value >= limit):  # type: ignore[operator]
                    continue
                shown = f"{value:.1%}" if key == "min_occupancy" else str(value)
                if key == "max_spill_bytes":  # stores and loads apart, as ptxas reports them
                    r = k.resources
                    shown = f"{r.spill_stores} bytes spill stores + {r.spill_loads} bytes spill loads = {value}"
                limit_shown = f"{limit:.1%}" if key == "min_occupancy" else str(limit)
                sign = ">" if above_is_bad else "<"
                message = f"kernel {k.name}: {shown} {unit} {sign} {key} = {limit_shown} {where}"
                found.append(violation(report.path, k.line, k.name, key, message, "budget"))
    return found


# ---------------------------------------------------------------- baselines

# metric -> (measured value, True if a rise is a regression)
METRICS: dict[str, tuple[Callable[[KernelReport], float | None], bool]] = {
    "registers": (lambda k: k.resources.registers, True),
    "spill_bytes": (lambda k: k.resources.spill_bytes, True),
    "stack_bytes": (lambda k: k.resources.stack_frame, True),
    "local_memory_ops": (_local_ops, True),
    "occupancy": (lambda k: round(k.occupancy.occupancy, 6) if k.occupancy else None, False),
}


def snapshot(reports: list[FileReport]) -> dict:
    """The baseline document for these reports: each kernel's metrics under `PATH::KERNEL`, sorted."""
    kernels = {
        f"{Path(r.path).as_posix()}::{k.name}": {m: fn(k) for m, (fn, _) in METRICS.items()}
        for r in reports
        for k in r.kernels
    }
    return {"schema": BASELINE_SCHEMA, "kernels": dict(sorted(kernels.items()))}


def load_baseline(path: str) -> dict:
    """A baseline written by --update-baseline; InputError if it is missing or not one."""
    if not Path(path).is_file():
        raise InputError.at(path, "no baseline here: create it with --update-baseline")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise InputError.at(path, f"not a baseline (invalid JSON: {error})") from None
    if not isinstance(data, dict) or data.get("schema") != BASELINE_SCHEMA or not isinstance(data.get("kernels"), dict):
        raise InputError.at(path, f"not a ptxtool baseline (expected schema {BASELINE_SCHEMA!r})")
    for key, metrics in data["kernels"].items():
        number = lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool))  # noqa: E731
        if not isinstance(metrics, dict) or not all(number(metrics.get(m)) for m in METRICS):
            raise InputError.at(path, f"not a ptxtool baseline: {key!r} must map {', '.join(METRICS)} to numbers")
    return data


def write_baseline(path: str, reports: list[FileReport]) -> None:
    write_atomic(path, json.dumps(snapshot(reports), indent=1) + "\n")


def check_baseline(baseline: dict, path: str, reports: list[FileReport]) -> list[Diagnostic]:
    """Every metric that got worse than the baseline says; kernels not in the baseline are not compared."""
    found = []
    now = snapshot(reports)["kernels"]
    line_of = {f"{Path(r.path).as_posix()}::{k.name}": (r.path, k.line) for r in reports for k in r.kernels}
    for key, metrics in now.items():
        before = baseline["kernels"].get(key)
        if before is None:
            continue
        file, line = line_of[key]
        kernel = key.rsplit("::", 1)[1]
        for metric, (_, rise_is_bad) in METRICS.items():
            old, new = before.get(metric), metrics[metric]
            if old is None or new is None or new == old or (new < old if rise_is_bad else new > old):
                continue
            if metric == "occupancy":
                change = f"{old:.1%} -> {new:.1%}"
            else:
                change = f"{old} -> {new}"
            message = f"kernel {kernel}: {metric} regressed {change} (baseline {path})"
            found.append(violation(file, line, kernel, metric, message, "baseline"))
    return found

"""`inspect --sarif`: SARIF 2.1.0 for code scanning (GitHub and others): budget and baseline violations as
errors, ptxas warnings as warnings, each at its PTX line."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# rule id -> short description
RULES: dict[str, str] = {
    "budget/max_registers": "More registers per thread than the budget allows",
    "budget/max_spill_bytes": "More register spilling than the budget allows",
    "budget/max_stack_bytes": "A larger stack frame than the budget allows",
    "budget/max_shared_bytes": "More shared memory than the budget allows",
    "budget/min_occupancy": "Lower theoretical occupancy than the budget allows",
    "budget/local_memory": "Local memory used where the budget forbids it",
    "baseline/registers": "Registers per thread rose above the baseline",
    "baseline/spill_bytes": "Spilled bytes rose above the baseline",
    "baseline/stack_bytes": "Stack frame grew beyond the baseline",
    "baseline/local_memory_ops": "Local memory instructions rose above the baseline",
    "baseline/occupancy": "Theoretical occupancy fell below the baseline",
    "ptxas/spill": "ptxas spilled registers to local memory",
    "ptxas/wgmma-serialized": "ptxas serialized wgmma instructions",
    "ptxas/wgmma-wait-injected": "ptxas injected a wgmma.wait_group",
    "ptxas/setmaxnreg-ignored": "ptxas ignored setmaxnreg",
    "ptxas/setmaxnreg": "ptxas note about setmaxnreg",
    "ptxas/other": "Another ptxas warning",
    "input/error": "An input that could not be read, parsed or assembled",
}


def _location(path: str, line: int, column: int = 0) -> dict:
    physical: dict = {"artifactLocation": {"uri": quote(Path(path).as_posix())}}  # a URI: spaces etc. %-encoded
    if line:
        physical["region"] = {"startLine": line} | ({"startColumn": column} if column else {})
    return {"physicalLocation": physical}


def sarif_result(rule_id: str, level: str, message: str, path: str, line: int, column: int = 0) -> dict:
    """One SARIF result (level: error, warning or note) at a line (0: the whole file) and column (0: unknown)."""
    return {
        "ruleId": rule_id,
        "level": level,
        "message": {"text": message},
        "locations": [_location(path, line, column)],
    }


def _rule(rule: str, text: str, help_text: str | None) -> dict:
    out: dict = {"id": rule, "shortDescription": {"text": text}}
    if help_text:
        out["help"] = {"text": help_text}
    return out


def sarif_log(rules: dict[str, str], results: list[dict], version: str, helps: dict[str, str] | None = None) -> dict:
    """A SARIF 2.1.0 log of one ptxtool run: `rules` maps rule id -> short description, `helps` rule id -> the
    longer text code scanning shows with an alert (used by inspect and lint)."""
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ptxtool",
                        "version": version,
                        "informationUri": "https://github.com/ptxtool/ptxtool",
                        "rules": [_rule(rule, text, (helps or {}).get(rule)) for rule, text in rules.items()],
                    }
                },
                "results": results,
            }
        ],
    }


def sarif_document(reports: list, violations: list, version: str, errors: list | None = None) -> dict:
    """One SARIF run holding every violation, every ptxas warning, and the `errors` (Diagnostics) of inputs that
    could not be inspected."""
    results = [
        {
            "ruleId": "input/error",
            "level": "error",
            "message": {"text": d.message},
            "locations": [_location(d.location.path, d.location.line)],
        }
        for d in errors or []
    ] + [
        {
            "ruleId": f"{v.origin}/{v.check}",
            "level": "error",
            "message": {"text": v.message},
            "locations": [_location(v.path, v.line)],
        }
        for v in violations
    ]
    for r in reports:
        kernel_lines = {k.name: k.line for k in r.kernels}
        warnings = [w for k in r.kernels for w in k.warnings] + list(r.warnings)
        for w in warnings:
            line = w.line or kernel_lines.get(w.function, 0) if r.lines_are_ptx else 0
            results.append(
                {
                    "ruleId": f"ptxas/{w.kind}",
                    "level": "warning",
                    "message": {"text": f"ptxas: {w.message}"},
                    "locations": [_location(r.path, line)],
                }
            )
    return sarif_log(RULES, results, version)


def inspect_log(result, version: str) -> dict:
    """`inspect --sarif`: violations, ptxas warnings, and the inputs that could not be inspected."""
    return sarif_document(result.reports, result.violations, version, result.errors)


def lint_log(result, version: str) -> dict:
    """`lint --sarif`: findings under their rule ids; unreadable inputs as `input/error` results."""
    rules = {r.id: f"{r.name}: {r.summary}" for r in result.rules} | {"input/error": RULES["input/error"]}
    out = [
        sarif_result("input/error", "error", d.message, d.location.path, d.location.line, d.location.column)
        for r in result.files
        for d in r.errors
    ]
    out += [sarif_result(f.rule, f.severity, f.message, f.path, f.line, f.column) for f in result.findings]
    return sarif_log(rules, out, version, {r.id: r.doc for r in result.rules})

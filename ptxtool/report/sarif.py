"""`--sarif`: SARIF 2.1.0 for code scanning (GitHub and others), one result per Diagnostic: lint findings, budget
and baseline violations, ptxas warnings and unreadable inputs, each at its line."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from ptxtool.errors import Diagnostic

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = ("error", "warning", "note")

# rule id -> short description
RULES: dict[str, str] = {
    "budget/max_registers": "More registers per thread than the budget allows",
    "budget/max_spill_bytes": "More register spilling than the budget allows",
    "budget/max_stack_bytes": "A larger stack frame than the budget allows",
    "budget/max_shared_bytes": "More shared memory than the budget allows",
    "budget/min_occupancy": "Lower theoretical occupancy than the budget allows",
    "budget/local_memory": "Local memory used where the budget forbids it",
    "budget/unmatched": "A budget table that matches no kernel (--strict)",
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


def sarif_result(d: Diagnostic) -> dict:
    """A diagnostic as one SARIF result: its code the rule (`input/error` for bad input), its severity the level, a
    line of 0 the whole file and a column of 0 unknown; notes follow the message and `properties` go in its bag."""
    loc = d.location
    out: dict = {
        "ruleId": d.code or "input/error",
        "level": d.severity if d.severity in _LEVELS else "error",
        "message": {"text": "\n".join((d.message, *d.notes))},
        "locations": [_location(loc.path, loc.line, loc.column)],
    }
    if d.properties:
        out["properties"] = dict(d.properties)
    return out


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


def inspect_log(result, version: str) -> dict:
    """`inspect --sarif`: inputs that could not be inspected, violations and ptxas warnings."""
    return sarif_log(RULES, [sarif_result(d) for d in result.diagnostics()], version)


def lint_log(result, version: str) -> dict:
    """`lint --sarif`: findings under their rule ids, inputs that could not be read as `input/error`, file by file."""
    rules = {r.id: f"{r.name}: {r.summary}" for r in result.rules} | {"input/error": RULES["input/error"]}
    results = [sarif_result(d) for d in result.diagnostics()]
    return sarif_log(rules, results, version, {r.id: r.doc for r in result.rules})

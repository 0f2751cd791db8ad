"""The machine-readable forms of a lint run: JSON (schema `ptxtool.lint/1`) and SARIF 2.1.0 (the shared writer)."""

from __future__ import annotations

from ptxtool.lint.registry import all_rules
from ptxtool.lint.service import FileResult
from ptxtool.report.sarif import sarif_log, sarif_result

SCHEMA = "ptxtool.lint/1"


def json_document(results: list[FileResult], version: str) -> dict:
    """{"schema", "ptxtool", "findings": [...], "notices": [{"path", "message"}], "errors": [...], "rules": {...}}."""
    return {
        "schema": SCHEMA,
        "ptxtool": version,
        "findings": [f.to_data() for r in results for f in r.findings],
        "notices": [{"path": r.path, "message": n} for r in results for n in r.notices],
        "errors": [
            {"path": d.location.path, "line": d.location.line, "column": d.location.column, "message": d.message}
            for r in results
            for d in r.errors
        ],
        "rules": {r.id: {"name": r.name, "severity": r.severity, "summary": r.summary} for r in all_rules().values()},
    }


def sarif_document(results: list[FileResult], version: str) -> dict:
    """Findings as SARIF results under their rule ids; unreadable inputs as `input/error` results."""
    rules = {r.id: f"{r.name}: {r.summary}" for r in all_rules().values()} | {
        "input/error": "An input that could not be read, parsed or assembled"
    }
    out = [
        sarif_result("input/error", "error", d.message, d.location.path, d.location.line, d.location.column)
        for r in results
        for d in r.errors
    ]
    out += [sarif_result(f.rule, f.severity, f.message, f.path, f.line, f.column) for r in results for f in r.findings]
    return sarif_log(rules, out, version, {r.id: r.doc for r in all_rules().values()})

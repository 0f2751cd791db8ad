"""`inspect --json`: one versioned document (schema `ptxtool.inspect/1`, described in docs/inspect.md)."""

from __future__ import annotations

from dataclasses import asdict

SCHEMA = "ptxtool.inspect/1"


def _kernel(k) -> dict:
    resources = asdict(k.resources)
    resources["constant"] = {str(bank): size for bank, size in sorted(k.resources.constant.items())}
    resources["spill_bytes"] = k.resources.spill_bytes
    resources["uses_local_memory"] = k.resources.uses_local_memory
    return {
        "name": k.name,
        "line": k.line,
        "resources": resources,
        "occupancy": asdict(k.occupancy) if k.occupancy else None,
        "block_size_from": k.block_size_from,
        "sass": asdict(k.sass),
        "ptx": asdict(k.ptx),
        "warnings": [asdict(w) for w in k.warnings],
    }


def inspect_document(reports: list, violations: list, tools: dict[str, str], errors: list | tuple = ()) -> dict:
    """The whole result of one `inspect` run: tool versions, each file's kernels, every violation, and the
    diagnostics of inputs that could not be read, parsed or assembled."""
    return {
        "schema": SCHEMA,
        "tools": tools,
        "files": [
            {
                "path": r.path,
                "arch": r.arch,
                "backend": r.backend,
                "relocatable": r.relocatable,
                "lines_are_ptx": r.lines_are_ptx,
                "kernels": [_kernel(k) for k in r.kernels],
                "warnings": [asdict(w) for w in r.warnings],
            }
            for r in reports
        ],
        "violations": [v.to_data() for v in violations],
        "errors": [d.to_data() for d in errors],
    }

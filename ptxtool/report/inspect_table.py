"""`inspect`'s default output: one rich table row per kernel, then the ptxas warnings worth reading."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _counts(counter: dict[str, int]) -> str:
    return str(sum(counter.values())) if counter else "-"


def print_inspect_table(console: Console, reports: list) -> None:
    table = Table(show_lines=False, header_style="bold")
    for title, justify in (
        ("file", "left"),
        ("kernel", "left"),
        ("regs", "right"),
        ("spill st/ld", "right"),
        ("stack", "right"),
        ("smem", "right"),
        ("bar", "right"),
        ("occupancy", "right"),
        ("block", "right"),
        ("SASS", "right"),
        ("LDG/STG", "right"),
        ("LDL/STL", "right"),
        ("tensor", "right"),
    ):
        table.add_column(title, justify=justify)  # type: ignore[arg-type]
    for r in reports:
        for k in r.kernels:
            res, occ, sass = k.resources, k.occupancy, k.sass
            spill = f"{res.spill_stores}/{res.spill_loads}"
            loads = sum(v for key, v in sass.global_memory.items() if key.startswith("LDG"))
            stores = sum(v for key, v in sass.global_memory.items() if key.startswith("STG"))
            table.add_row(
                escape(r.path),
                escape(k.name),
                str(res.registers) if res.registers is not None else "?",
                f"[red]{spill}[/red]" if res.spill_bytes else spill,
                str(res.stack_frame),
                str(res.shared),
                str(res.barriers),
                f"{occ.occupancy:.0%} ({occ.limited_by})" if occ else "?",
                f"{occ.block_size} ({k.block_size_from})" if occ else "?",
                str(sass.count),
                f"{loads}/{stores}",
                f"[red]{_counts(sass.local_memory)}[/red]" if sass.local_memory else "-",
                _counts(sass.tensor_core),
            )
    console.print(table)
    for r in reports:
        relocatable = " (relocatable: external calls unresolved)" if r.relocatable else ""
        if r.backend == "nvjitlink" or relocatable:
            note = "nvJitLink numbers are relocatable-mode numbers" if r.backend == "nvjitlink" else relocatable
            console.print(f"[cyan]note:[/cyan] {escape(r.path)}: {escape(note.strip())}")
        for w in [w for k in r.kernels for w in k.warnings] + list(r.warnings):
            at = f":{w.line}" if w.line and r.lines_are_ptx else ""
            console.print(f"[bold]{escape(r.path)}{at}:[/bold] [yellow]ptxas warning:[/yellow] {escape(w.message)}")

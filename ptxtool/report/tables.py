"""Tables: rich on a terminal (file and kernel names never cut: other columns wrap or shrink), plain aligned
columns without box-drawing when piped. `inspect`'s table is the one table built here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ptxtool.report.console import Out

# (title, right-aligned, never cut)
INSPECT_COLUMNS = (
    ("file", False, True),
    ("kernel", False, True),
    ("regs", True, False),
    ("spill st/ld", True, False),
    ("stack", True, False),
    ("smem", True, False),
    ("bar", True, False),
    ("occupancy", True, False),
    ("block", True, False),
    ("SASS", True, False),
    ("LDG/STG", True, False),
    ("LDL/STL", True, False),
    ("tensor", True, False),
)


def table(out: Out, columns: tuple[tuple[str, bool, bool], ...], rows: list[list[str]], red: set[tuple[int, int]]):
    """Print rows under column titles; `red` marks (row, column) cells worth a second look (colour on a terminal)."""
    if not out.terminal:
        widths = [max([len(c[0]), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
        for row in [[c[0] for c in columns], *rows]:
            cells = [v.rjust(w) if c[1] else v.ljust(w) for v, w, c in zip(row, widths, columns, strict=True)]
            out.line("  ".join(cells).rstrip())
        return
    t = Table(header_style="bold")
    for i, (title, right, whole) in enumerate(columns):
        longest = max((len(r[i].split("\n")[0]) for r in rows), default=0)  # a cell's first line is the name
        t.add_column(
            title,
            justify="right" if right else "left",
            min_width=max(longest, len(title)) if whole else None,
            overflow="fold",
        )
    for n, row in enumerate(rows):
        t.add_row(*(f"[red]{v}[/red]" if (n, i) in red else v for i, v in enumerate(row)))
    # wider than the terminal even at its narrowest: the terminal wraps the lines, nothing is cropped away
    Console(file=out.stdout, highlight=False, force_terminal=True).print(t, crop=False)


def _counts(counter: dict[str, int]) -> str:
    return str(sum(counter.values())) if counter else "-"


def _kernel_cell(symbol: str, terminal: bool) -> str:
    """The symbol and, for C++, its signature: beside it when piped, under it on a terminal (the first line of a
    cell is the one kept whole)."""
    from ptxtool.syntax.names import demangle

    d = demangle(symbol)
    return symbol if d is None else f"{symbol}{chr(10) if terminal else ' '}({d.signature})"


def inspect_table(out: Out, reports: list) -> None:
    from rich.markup import escape

    rows, red = [], set()
    for r in reports:
        for k in r.kernels:
            res, occ, sass = k.resources, k.occupancy, k.sass
            loads = sum(v for key, v in sass.global_memory.items() if key.startswith("LDG"))
            stores = sum(v for key, v in sass.global_memory.items() if key.startswith("STG"))
            if res.spill_bytes:
                red.add((len(rows), 3))
            if sass.local_memory:
                red.add((len(rows), 11))
            cells = [
                r.path,
                _kernel_cell(k.name, out.terminal),
                str(res.registers) if res.registers is not None else "?",
                f"{res.spill_stores}/{res.spill_loads}",
                str(res.stack_frame),
                str(res.shared),
                str(res.barriers),
                f"{occ.occupancy:.0%} ({occ.limited_by})" if occ else "?",
                f"{occ.block_size} ({k.block_size_from})" if occ else "?",
                str(sass.count),
                f"{loads}/{stores}",
                _counts(sass.local_memory),
                _counts(sass.tensor_core),
            ]
            rows.append([escape(c) for c in cells] if out.terminal else cells)
    table(out, INSPECT_COLUMNS, rows, red)

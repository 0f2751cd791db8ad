"""Pictures of the analyses for people: the CFG as graphviz dot text (loops as nested clusters) or as SVG drawn
here (report/layout.py, no graphviz), and the pressure curve as terminal text or a standalone SVG (with an optional
second series, e.g. ptxas's real live registers).
"""

from __future__ import annotations

import itertools
import textwrap
from bisect import bisect_right
from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING

from ptxtool.report.layout import Route, layout

if TYPE_CHECKING:  # report/ is a leaf: it draws what the analyses give it and imports none of them
    from ptxtool.analysis.cfg import CFG
    from ptxtool.analysis.loops import Loop
    from ptxtool.analysis.pressure import PressureCurve

_SHOWN = 4  # instructions printed at each end of a block


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _block_lines(cfg: CFG, b: int) -> list[str]:
    """A block's title and its first and last few instructions (guard and mnemonic)."""
    block = cfg.blocks[b]
    ops = cfg.ops(block)
    head = block.label or ("entry" if b == 0 else f"block {b}")
    lines = f"lines {ops[0].line}-{ops[-1].line}" if ops else "end"
    text = [f"{head}  ({lines}, {len(ops)} instr)"]
    shown = [op.instruction for op in ops]
    if len(shown) > 2 * _SHOWN:
        shown = [*shown[:_SHOWN], None, *shown[-_SHOWN:]]
    for i in shown:
        if i is None:
            text.append("...")
            continue
        guard = f"@{'!' * i.guard.negated}{i.guard.predicate.text} " if i.guard else ""
        text.append(guard + i.mnemonic)
    return text


def _block_label(cfg: CFG, b: int) -> str:
    return "\\l".join(_quote(t) for t in _block_lines(cfg, b)) + "\\l"


def cfg_dot(cfg: CFG, loops: tuple[Loop, ...]) -> str:
    """Dot text for a CFG: a box per block, loops drawn as nested clusters with their header in bold and the
    back edges dashed; blocks that leave the function (ret, exit, trap) get a double border."""
    name = _quote(cfg.function.name)
    out = [f'digraph "{name}" {{', '  node [shape=box, fontname="monospace", fontsize=10];', f'  label="{name}";']
    children: dict[int | None, list[Loop]] = {}
    for loop in loops:
        children.setdefault(loop.parent, []).append(loop)
    placed: set[int] = set()

    def emit_loop(loop: Loop, indent: str) -> None:
        ivs = ", ".join(f"{iv.register}+={iv.step}" for iv in loop.induction)
        out.append(f"{indent}subgraph cluster_loop{loop.index} {{")
        out.append(f'{indent}  label="loop {loop.index} (depth {loop.depth}){": " + _quote(ivs) if ivs else ""}";')
        out.append(f"{indent}  style=rounded; color=blue;")
        for inner in children.get(loop.index, []):
            emit_loop(inner, indent + "  ")
        for b in sorted(loop.blocks - placed):
            placed.add(b)
            out.append(f"{indent}  {node(b)}")
        out.append(f"{indent}}}")

    def node(b: int) -> str:
        block = cfg.blocks[b]
        style = []
        if any(lp.header == b for lp in loops):
            style.append("style=bold")
        if not block.successors:
            style.append("peripheries=2")
        extra = (", " + ", ".join(style)) if style else ""
        return f'b{b} [label="{_block_label(cfg, b)}"{extra}];'

    for loop in children.get(None, []):
        emit_loop(loop, "  ")
    out.extend(f"  {node(b.index)}" for b in cfg.blocks if b.index not in placed)
    back = {(latch, lp.header) for lp in loops for latch in lp.latches}
    for b in cfg.blocks:
        for s in b.successors:
            out.append(f"  b{b.index} -> b{s}" + (" [style=dashed, color=blue];" if (b.index, s) in back else ";"))
    out.append("}")
    return "\n".join(out) + "\n"


_CHAR, _LINE, _PAD = 6.6, 14.0, 6.0  # monospace 11px: advance per character, line height, inner padding
_LOOP_COLOURS = ("#1f6feb", "#8250df", "#bf3989", "#0a7b83", "#9a6700", "#cf222e")


def _path(route: Route) -> str:
    """An SVG path through a route's points: straight where it runs vertically, S-curves between layers."""
    x0, y0 = route.points[0]
    out = [f"M{x0:.1f},{y0:.1f}"]
    for (ax, ay), (bx, by) in itertools.pairwise(route.points):
        if ax == bx or ay == by:
            out.append(f"L{bx:.1f},{by:.1f}")
        else:
            mid = (ay + by) / 2
            out.append(f"C{ax:.1f},{mid:.1f} {bx:.1f},{mid:.1f} {bx:.1f},{by:.1f}")
    return " ".join(out)


def cfg_svg(cfg: CFG, loops: tuple[Loop, ...], link: Callable[[int], str] | None = None, ids: str = "") -> str:
    """The CFG as SVG without graphviz: a box per block (its first and last instructions), loop headers in bold,
    a coloured bar per enclosing loop, back edges dashed, exits with a double border; `link(line)` makes each
    block a link to its first PTX line (the HTML report's anchors); `ids` prefixes the element ids, unique on a page
    of several pictures."""
    texts = [_block_lines(cfg, b.index) for b in cfg.blocks]
    sizes = [(max(map(len, t)) * _CHAR + 2 * _PAD + 8, len(t) * _LINE + 2 * _PAD) for t in texts]
    edges = [(b.index, s) for b in cfg.blocks for s in b.successors]
    back = {(latch, lp.header) for lp in loops for latch in lp.latches}
    drawing = layout(sizes, edges, back)
    legend = [f"{cfg.function.name}: {len(cfg.blocks)} blocks, {len(edges)} edges"]
    for lp in loops:
        ivs = ", ".join(f"{iv.register}+={iv.step}" for iv in lp.induction)
        legend.append(f"loop {lp.index} (depth {lp.depth}){': ' + ivs if ivs else ''}")
    top = _LINE * len(legend) + 8
    width, height = max(drawing.width, max(map(len, legend)) * _CHAR + 40), drawing.height + top
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="cfg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="11">',
        f'<defs><marker id="{ids}arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>',
        f'<text x="8" y="{_LINE}" font-weight="bold">{escape(legend[0])}</text>',
    ]
    for i, (lp, text) in enumerate(zip(loops, legend[1:], strict=True)):
        y = _LINE * (i + 2)
        colour = _LOOP_COLOURS[lp.index % len(_LOOP_COLOURS)]
        svg.append(f'<rect x="8" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        svg.append(f'<text x="24" y="{y}">{escape(text)}</text>')
    svg.append(f'<g transform="translate(0,{top})">')
    for route in drawing.routes:
        dashed = ' stroke-dasharray="5,3"' if route.back else ""
        colour = "#1f6feb" if route.back else "#444"
        svg.append(
            f'<path d="{_path(route)}" fill="none" stroke="{colour}"{dashed} marker-end="url(#{ids}arrow)">'
            f"<title>block {route.source} -> block {route.target}</title></path>"
        )
    headers = {lp.header for lp in loops}
    for block, box, text in zip(cfg.blocks, drawing.boxes, texts, strict=True):
        ops = cfg.ops(block)
        inside = sorted((lp for lp in loops if block.index in lp.blocks), key=lambda lp: lp.depth)
        stroke = ' stroke-width="2.5"' if block.index in headers else ""
        part = [f'<g class="block" id="{ids}block{block.index}"><title>{escape(" / ".join(text[:1]))}</title>']
        part.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width:.1f}" height="{box.height:.1f}" '
            f'fill="#f6f8fa" stroke="#333"{stroke}/>'
        )
        if not block.successors:  # leaves the function: a second border
            part.append(
                f'<rect x="{box.x + 3:.1f}" y="{box.y + 3:.1f}" width="{box.width - 6:.1f}" '
                f'height="{box.height - 6:.1f}" fill="none" stroke="#333"/>'
            )
        for d, lp in enumerate(inside):
            colour = _LOOP_COLOURS[lp.index % len(_LOOP_COLOURS)]
            part.append(
                f'<rect x="{box.x + 1 + 3 * d:.1f}" y="{box.y + 1:.1f}" width="3" height="{box.height - 2:.1f}" '
                f'fill="{colour}"><title>loop {lp.index}</title></rect>'
            )
        for i, line in enumerate(text):
            weight = ' font-weight="bold"' if i == 0 else ""
            y = box.y + _PAD + _LINE * (i + 1) - 3
            part.append(f'<text x="{box.x + _PAD + 8:.1f}" y="{y:.1f}"{weight}>{escape(line)}</text>')
        part.append("</g>")
        if link and ops:
            part = [f'<a href="{escape(link(ops[0].line))}">', *part, "</a>"]
        svg.extend(part)
    svg.append("</g></svg>")
    return "\n".join(svg) + "\n"


def pressure_text(
    curve: PressureCurve, width: int = 60, rows: int = 40, other: dict[int, int] | None = None, other_name: str = ""
) -> str:
    """The curve as rows of bars, each row the maximum over a run of PTX lines; the peak row is marked. `other`
    (PTX line -> registers, e.g. ptxas's live registers) is drawn beside it on the same scale, each of its lines in
    the row whose run it falls in (lines before the first run in the first row)."""
    points = [p for p in curve.points if p.line]
    if not points:
        return f"{curve.function}: no instructions\n"
    peak = curve.peak
    top = max(peak.units, *(other or {}).values(), 1)
    per = max(1, -(-len(points) // rows))
    chunks = [points[start : start + per] for start in range(0, len(points), per)]
    starts = [c[0].line for c in chunks]
    beside: list[list[tuple[int, int]]] = [[] for _ in chunks]
    for line, value in sorted((other or {}).items()):
        beside[max(0, bisect_right(starts, line) - 1)].append((line, value))
    other_peak = max(sorted((other or {}).items()), key=lambda kv: kv[1], default=None)
    out = [f"{curve.function}: estimated live 32-bit registers per PTX line (peak {peak.units} at line {peak.line})"]
    if other_peak:
        out[0] += f" | {other_name} (peak {other_peak[1]} at line {other_peak[0]})"
    for chunk, theirs in zip(chunks, beside, strict=True):
        high = max(chunk, key=lambda p: p.units)
        lines = f"{chunk[0].line}" if len(chunk) == 1 else f"{chunk[0].line}-{chunk[-1].line}"
        bar = "#" * round(high.units * width / top)
        mark = "  <- peak" if peak in chunk else ""
        if other is None:
            out.append(f"{lines:>11} {high.units:4d} {bar}{mark}")
            continue
        real = max((v for _, v in theirs), default=None)
        right = "   -" if real is None else f"{real:4d} " + "=" * round(real * width / top)
        mark += f"  <- {other_name} peak" if other_peak in theirs else ""
        out.append(f"{lines:>11} {high.units:4d} {bar:<{width}} |{right}{mark}")
    return "\n".join(out) + "\n"


def peak_text(curve: PressureCurve, live: tuple[tuple[str, tuple[int, ...]], ...], width: int = 100) -> str:
    """Which registers are live at the estimated peak, each with the PTX lines that define it (`%rd4@792`)."""
    peak = curve.peak
    if peak is None:
        return ""
    head = f"live at the estimated peak (line {peak.line}, {peak.units} units, {len(live)} registers):"
    words = [f"{name}@{','.join(map(str, lines)) or '?'}" for name, lines in live]
    return textwrap.fill(" ".join([head, *words]), width, subsequent_indent="    ") + "\n"


def pressure_svg(
    curve: PressureCurve, other: dict[int, int] | None = None, other_name: str = "ptxas", caption: str = ""
) -> str:
    """A standalone SVG of the curve against PTX line numbers; `other` (PTX line -> registers) is drawn beside it,
    its peak marked too; `caption` (e.g. the registers live at the peak) is written under the picture."""
    points = [(p.line, p.units) for p in curve.points if p.line]
    second = sorted((other or {}).items())
    lines = [x for x, _ in points + second] or [0, 1]
    values = [y for _, y in points + second] or [1]
    x0, x1, top = min(lines), max(max(lines), min(lines) + 1), max(max(values), 1)
    notes = textwrap.wrap(caption, 150)
    w, h, pad = 900, 300, 40
    hh = h + 12 * len(notes)  # the notes go under the plot

    def xy(x: int, y: int) -> str:
        return f"{pad + (x - x0) * (w - 2 * pad) / (x1 - x0):.1f},{h - pad - y * (h - 2 * pad) / top:.1f}"

    peak = curve.peak
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{hh}" font-family="monospace" font-size="11">',
        f'<text x="{pad}" y="16">{escape(curve.function)}: live 32-bit registers per PTX line</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
        f'<text x="{pad}" y="{h - 12}">line {x0}</text><text x="{w - pad - 60}" y="{h - 12}">line {x1}</text>',
        f'<text x="4" y="{pad + 4}">{top}</text>',
        f'<polyline fill="none" stroke="steelblue" points="{" ".join(xy(x, y) for x, y in points)}"/>',
    ]
    if second:
        svg.append(f'<polyline fill="none" stroke="darkorange" points="{" ".join(xy(x, y) for x, y in second)}"/>')
        svg.append(f'<text x="{w - 200}" y="16" fill="darkorange">{escape(other_name)}</text>')
        line, value = max(second, key=lambda kv: kv[1])
        ox, oy = xy(line, value).split(",")
        svg.append(f'<circle cx="{ox}" cy="{oy}" r="4" fill="darkorange"/>')
        svg.append(f'<text x="{ox}" y="{float(oy) + 16:.1f}" fill="darkorange">peak {value} @ line {line}</text>')
    if peak:
        cx, cy = xy(peak.line, peak.units).split(",")
        svg.append(f'<circle cx="{cx}" cy="{cy}" r="4" fill="red"/>')
        svg.append(f'<text x="{cx}" y="{float(cy) - 8:.1f}" fill="red">peak {peak.units} @ line {peak.line}</text>')
    svg.extend(f'<text x="{pad}" y="{h + 2 + 12 * i}" font-size="9">{escape(n)}</text>' for i, n in enumerate(notes))
    svg.append("</svg>")
    return "\n".join(svg) + "\n"

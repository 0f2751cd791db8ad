"""`ptxtool cfg` and the pressure pictures, on corpus kernels."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from xml.etree import ElementTree

from click.testing import CliRunner
from conftest import CORPUS

from ptxtool.analysis.cfg import build_cfg
from ptxtool.analysis.pressure import pressure
from ptxtool.cli import main
from ptxtool.report.layout import Box, layout
from ptxtool.report.pictures import pressure_svg, pressure_text
from ptxtool.syntax import parse

PRESSURE = str(CORPUS / "ptx/pressure.sm80.ptx")
SVG = "{http://www.w3.org/2000/svg}"


def test_cfg_dot_marks_nested_loops_and_back_edges():
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "--kernel", "nbody_tile"])
    assert result.exit_code == 0
    dot = result.stdout
    assert dot.startswith('digraph "nbody_tile"')
    assert 'label="loop 0 (depth 1): %r38+=128"' in dot and 'label="loop 1 (depth 2): %r39+=128"' in dot
    assert dot.index("cluster_loop0") < dot.index("cluster_loop1") < dot.index("b3 [")  # loop 1 inside loop 0
    assert len(re.findall(r"-> b\d+ \[style=dashed", dot)) == 2  # b3 -> b3 and b4 -> b2
    assert "peripheries=2" in dot  # the block ending in ret


def test_cfg_needs_a_kernel_when_there_are_several(tmp_path):
    several = CliRunner().invoke(main, ["cfg", PRESSURE])
    assert several.exit_code == 2 and "stencil_25pt, nbody_tile, long_live_ranges" in several.stderr
    missing = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "nope"])
    assert missing.exit_code == 2 and "no function named 'nope'" in missing.stderr


def test_cfg_writes_dot_file(tmp_path):
    out = tmp_path / "cfg.dot"
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "stencil_25pt", "-o", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text().startswith('digraph "stencil_25pt"')


def _svg_root(text: str) -> ElementTree.Element:
    root = ElementTree.fromstring(text)  # well-formed XML: every PTX-derived word escaped
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def test_cfg_svg_without_graphviz(tmp_path):
    """No `dot` on PATH: the SVG is drawn in Python; every block is a box, the two back edges dashed."""
    out = tmp_path / "cfg.svg"
    result = CliRunner(env={"PATH": str(tmp_path)}).invoke(main, ["cfg", PRESSURE, "-k", "nbody_tile", "-o", str(out)])
    assert result.exit_code == 0, result.output
    root = _svg_root(out.read_text())
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    assert "loop 0 (depth 1): %r38+=128" in texts and "loop 1 (depth 2): %r39+=128" in texts
    assert len(list(root.iter(SVG + "g"))) - 1 == 6  # one group per block, inside the translated group
    dashed = [p for p in root.iter(SVG + "path") if p.get("stroke-dasharray")]
    assert len(dashed) == 2  # b3 -> b3 and b4 -> b2


def test_cfg_format_svg_on_stdout_and_conflicts():
    result = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "stencil_25pt", "--format", "svg"])
    assert result.exit_code == 0 and result.stdout.startswith("<svg")
    _svg_root(result.stdout)
    clash = CliRunner().invoke(main, ["cfg", PRESSURE, "-k", "stencil_25pt", "--format", "svg", "-o", "x.dot"])
    assert clash.exit_code == 2 and "--format svg" in clash.stderr


def _boxes_overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height


def _check_drawing(sizes, edges, back=()):
    drawing = layout(sizes, edges, back)
    assert len(drawing.boxes) == len(sizes) and len(drawing.routes) == len(edges)
    for i, a in enumerate(drawing.boxes):
        assert a.x >= 0 and a.y >= 0 and a.x + a.width <= drawing.width and a.y + a.height <= drawing.height
        assert not any(_boxes_overlap(a, b) for b in drawing.boxes[i + 1 :])
    for (u, v), route in zip(edges, drawing.routes, strict=True):
        assert (route.source, route.target) == (u, v)
        if u == v:
            continue
        start, end = route.points[0], route.points[-1]
        src, dst = drawing.boxes[u], drawing.boxes[v]
        assert src.x <= start[0] <= src.x + src.width and start[1] in (src.y, src.y + src.height)
        assert dst.x <= end[0] <= dst.x + dst.width and end[1] in (dst.y, dst.y + dst.height)
        if not route.back:  # forward edges run downwards, layer by layer
            assert drawing.layers[u] < drawing.layers[v]
    return drawing


def test_layout_breaks_cycles_and_keeps_boxes_apart():
    """A loop with a back edge, an irreducible pair (no back edge named), a self loop, an edge across layers."""
    sizes = [(80, 30), (60, 40), (100, 20), (40, 40), (70, 30), (50, 50)]
    edges = [(0, 1), (1, 2), (2, 1), (2, 3), (3, 4), (4, 3), (0, 4), (4, 4), (0, 5), (3, 5)]
    drawing = _check_drawing(sizes, edges, back={(2, 1)})
    assert drawing.routes[2].back and drawing.routes[7].back  # the named back edge and the self loop
    assert sum(r.back for r in drawing.routes) == 3  # one of 3<->4 reversed by the search


def test_layout_avoids_crossings_it_can_avoid():
    """Two chains whose second layer starts in the crossing order: the sweeps untangle them."""
    sizes = [(40, 20)] * 4
    drawing = _check_drawing(sizes, [(0, 3), (1, 2)])
    (a, b), (c, d) = [(r.points[0][0], r.points[-1][0]) for r in drawing.routes]
    assert (a - c) * (b - d) > 0


def test_layout_random_graphs_within_time():
    """Fixed-seed random graphs (cycles included) give valid drawings; a 400-node graph in seconds."""
    rng = random.Random(17)
    for n in (1, 2, 5, 20, 60):
        sizes = [(rng.randint(20, 120), rng.randint(14, 80)) for _ in range(n)]
        edges = list(dict.fromkeys((rng.randrange(n), rng.randrange(n)) for _ in range(2 * n)))
        _check_drawing(sizes, edges)
    n = 400
    chain = [(i, i + 1) for i in range(n - 1)]
    jumps = [(i, rng.randrange(n)) for i in range(0, n, 3)]
    start = time.perf_counter()
    layout([(90, 60)] * n, chain + jumps)
    assert time.perf_counter() - start < 30.0  # generous: the test machines are shared


def test_layout_of_many_long_back_edges_is_bounded():
    """A 1000-block chain whose every block branches back to the entry would need ~500 k dummy nodes; past the
    budget the longest edges are drawn straight, and the layout stays valid and quick."""
    n = 1000
    back = {(i, 0) for i in range(1, n)}
    edges = [(i, i + 1) for i in range(n - 1)] + sorted(back)
    start = time.perf_counter()
    drawing = layout([(90, 60)] * n, edges, back)
    assert time.perf_counter() - start < 30.0
    assert [drawing.layers[i] for i in range(n)] == list(range(n))
    straight = [r for r in drawing.routes if r.back and len(r.points) == 2]
    assert straight and all(r.points[0][1] == drawing.boxes[r.source].y for r in straight)  # from the latch's top


def long_live_ranges_curve():
    module = parse(Path(PRESSURE).read_text())
    return pressure(build_cfg(next(f for f in module.kernels if f.name == "long_live_ranges")))


def test_pressure_text_marks_the_peak_row():
    text = pressure_text(long_live_ranges_curve(), width=40, rows=30)
    lines = text.splitlines()
    assert "peak 60 at line 870" in lines[0]
    peak_rows = [row for row in lines[1:] if row.endswith("<- peak")]
    assert len(peak_rows) == 1 and "#" * 40 in peak_rows[0]
    first, _, last = peak_rows[0].split()[0].partition("-")
    assert int(first) <= 870 <= int(last or first)
    assert len(lines) <= 31


def test_pressure_svg_with_a_second_series():
    svg = pressure_svg(long_live_ranges_curve(), {820: 30, 870: 32}, "ptxas live")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "peak 60 @ line 870" in svg and svg.count("<polyline") == 2 and "ptxas live" in svg

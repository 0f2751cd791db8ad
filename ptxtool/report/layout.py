"""A layered (Sugiyama-style) drawing of a directed graph in pure Python, so pictures need no graphviz.

Cycles are broken by reversing the edges the caller names (a CFG's loop back edges) and any a depth-first search
still finds; layers come from the longest path on the resulting DAG; edges that span layers pass through dummy
nodes; barycenter sweeps reduce crossings; x coordinates pull each node to the median of its neighbours under the
layer's order and spacing (isotonic regression). It knows nothing of PTX: nodes are sizes, edges are index pairs.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Box:
    """A node's place: its top-left corner and its size."""

    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Route:
    """An edge's path from its source to its target; `back` when it was reversed to break a cycle."""

    source: int
    target: int
    points: tuple[Point, ...]
    back: bool


@dataclass(frozen=True)
class Drawing:
    """The boxes of the nodes (in input order), the routes of the edges (in input order), the size and the layer
    of each node."""

    boxes: tuple[Box, ...]
    routes: tuple[Route, ...]
    width: float
    height: float
    layers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Spacing:
    layer_gap: float = 36.0
    node_gap: float = 24.0
    dummy_gap: float = 10.0
    margin: float = 12.0
    loop_width: float = 18.0  # room on the right for an edge from a node to itself
    sweeps: int = 6
    dummy_budget: int = 5_000  # dummy nodes at most: a long edge past it is drawn straight (keeps time bounded)


def _acyclic(n: int, edges: list[tuple[int, int]], back: Collection[tuple[int, int]]) -> list[bool]:
    """Which edges to reverse: the named back edges, then every edge a depth-first search finds closing a cycle."""
    flipped = [e in back for e in edges]
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i, (u, v) in enumerate(edges):
        a, b = (v, u) if flipped[i] else (u, v)
        out[a].append((b, i))
    state = [0] * n  # 0 unseen, 1 on the stack, 2 done
    for root in range(n):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, k = stack[-1]
            if k == len(out[node]):
                stack.pop()
                state[node] = 2
                continue
            stack[-1] = (node, k + 1)
            nxt, i = out[node][k]
            if state[nxt] == 1:
                flipped[i] = not flipped[i]
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, 0))
    return flipped


def _longest_path_layers(n: int, dag: list[tuple[int, int]]) -> list[int]:
    """Each node's layer: one below the deepest of its predecessors (Kahn's order over the DAG)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for u, v in dag:
        succ[u].append(v)
        indegree[v] += 1
    layer = [0] * n
    ready = [v for v in range(n) if indegree[v] == 0][::-1]
    while ready:
        u = ready.pop()
        for v in succ[u]:
            layer[v] = max(layer[v], layer[u] + 1)
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return layer


def _crossings(upper: dict[int, int], lower: dict[int, int], segments: list[tuple[int, int]]) -> int:
    """Crossings among segments between two adjacent layers: inversions of the lower ends, counted with a Fenwick
    tree after sorting by the upper ends."""
    ends = [lower[b] for _, b in sorted(segments, key=lambda s: (upper[s[0]], lower[s[1]]))]
    size = max(ends, default=0) + 2
    tree = [0] * (size + 1)
    count = 0
    for seen, end in enumerate(ends):
        i, below = end + 1, 0
        while i > 0:
            below += tree[i]
            i -= i & -i
        count += seen - below
        i = end + 1
        while i <= size:
            tree[i] += 1
            i += i & -i
    return count


def _isotonic(targets: list[float], separations: list[float]) -> list[float]:
    """Positions nearest (least squares) to `targets` that keep their order with at least `separations[i]` between
    position i-1 and i: pool-adjacent-violators on the targets shifted by the running separation."""
    shift, total = [], 0.0
    for s in separations:
        total += s
        shift.append(total)
    blocks: list[list[float]] = []  # [mean, weight]
    for t, c in zip(targets, shift, strict=True):
        blocks.append([t - c, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m, w = blocks.pop()
            blocks[-1] = [(blocks[-1][0] * blocks[-1][1] + m * w) / (blocks[-1][1] + w), blocks[-1][1] + w]
    out: list[float] = []
    for mean, weight in blocks:
        out.extend([mean] * int(weight))
    return [y + c for y, c in zip(out, shift, strict=True)]


def layout(
    sizes: Sequence[tuple[float, float]],
    edges: Sequence[tuple[int, int]],
    back: Collection[tuple[int, int]] = (),
    spacing: Spacing = Spacing(),
) -> Drawing:
    """Place nodes of the given (width, height) and route the edges; `back` names edges drawn against the flow."""
    n = len(sizes)
    edge_list = list(edges)
    proper = [e for e in edge_list if e[0] != e[1]]
    flipped = _acyclic(n, proper, set(back))
    dag = [(v, u) if f else (u, v) for (u, v), f in zip(proper, flipped, strict=True)]
    layer = _longest_path_layers(n, dag)
    widths = [float(w) for w, _ in sizes]
    # dummy nodes for edges that cross layers, shortest first, within the budget; longer edges are drawn straight
    spans = sorted(range(len(dag)), key=lambda k: layer[dag[k][1]] - layer[dag[k][0]])
    allowed, used = set(), 0
    for k in spans:
        used += layer[dag[k][1]] - layer[dag[k][0]] - 1
        if used > spacing.dummy_budget:
            break
        allowed.add(k)
    chains: list[list[int]] = []
    for k, (u, v) in enumerate(dag):
        chain = [u]
        for depth in range(layer[u] + 1, layer[v]) if k in allowed else ():
            layer.append(depth)
            widths.append(0.0)
            chain.append(len(layer) - 1)
        chain.append(v)
        chains.append(chain)
    total = len(layer)
    preds: list[list[int]] = [[] for _ in range(total)]
    succs: list[list[int]] = [[] for _ in range(total)]
    segments_at: list[list[tuple[int, int]]] = [[] for _ in range(max(layer, default=0) + 1)]
    for chain in chains:
        if layer[chain[-1]] - layer[chain[0]] > len(chain) - 1:
            continue  # over the budget: joins no adjacent layers, takes no part in ordering
        for a, b in itertools.pairwise(chain):
            succs[a].append(b)
            preds[b].append(a)
            segments_at[layer[a]].append((a, b))
    rows: list[list[int]] = [[] for _ in segments_at]
    for v in range(total):
        rows[layer[v]].append(v)
    rows = _order(rows, preds, succs, segments_at, spacing.sweeps)
    xs = _coordinates(rows, widths, preds, succs, n, spacing)
    return _draw(sizes, edge_list, proper, flipped, chains, rows, layer, xs, spacing)


def _order(
    rows: list[list[int]],
    preds: list[list[int]],
    succs: list[list[int]],
    segments_at: list[list[tuple[int, int]]],
    sweeps: int,
) -> list[list[int]]:
    """Orders within layers by alternating barycenter sweeps (down by predecessors, up by successors); the order
    with the fewest crossings wins."""
    position: dict[int, int] = {}

    def place(row: list[int]) -> None:
        position.update((v, i) for i, v in enumerate(row))

    def sweep_row(row: list[int], neighbours: list[list[int]]) -> list[int]:
        def key(v: int) -> tuple[float, int]:
            near = neighbours[v]
            return (sum(position[u] for u in near) / len(near) if near else position[v], position[v])

        return sorted(row, key=key)

    def crossings(current: list[list[int]]) -> int:
        place_all(current)
        return sum(_crossings(position, position, segs) for segs in segments_at)

    def place_all(current: list[list[int]]) -> None:
        for row in current:
            place(row)

    current = [list(r) for r in rows]
    place_all(current)
    for i in range(1, len(current)):  # a first pass so a node starts near its predecessors
        current[i] = sweep_row(current[i], preds)
        place(current[i])
    best, fewest = [list(r) for r in current], crossings(current)
    for s in range(sweeps):
        if fewest == 0:
            break
        place_all(current)
        indices = range(1, len(current)) if s % 2 == 0 else range(len(current) - 2, -1, -1)
        for i in indices:
            current[i] = sweep_row(current[i], preds if s % 2 == 0 else succs)
            place(current[i])
        count = crossings(current)
        if count < fewest:
            best, fewest = [list(r) for r in current], count
    return best


def _coordinates(
    rows: list[list[int]],
    widths: list[float],
    preds: list[list[int]],
    succs: list[list[int]],
    real: int,
    spacing: Spacing,
) -> list[float]:
    """Centre x of every node: packed first, then pulled to the median of its neighbours, layer by layer, down and
    up, keeping each layer's order and gaps."""
    x = [0.0] * len(widths)

    def gap(a: int, b: int) -> float:
        dummy = a >= real and b >= real
        return (widths[a] + widths[b]) / 2 + (spacing.dummy_gap if dummy else spacing.node_gap)

    for row in rows:
        at = 0.0
        for i, v in enumerate(row):
            at += gap(row[i - 1], v) if i else 0.0
            x[v] = at
    before: list[float] = []
    for s in range(2 * spacing.sweeps):
        if s % 2 == 0:
            if x == before:  # a down and up sweep that moved nothing: every later one moves nothing either
                break
            before = list(x)
        neighbours = preds if s % 2 == 0 else succs
        order = rows if s % 2 == 0 else rows[::-1]
        for row in order:
            if not row:
                continue
            targets = []
            for v in row:
                near = sorted(x[u] for u in neighbours[v])
                if not near:
                    targets.append(x[v])
                else:
                    mid = len(near) // 2
                    targets.append(near[mid] if len(near) % 2 else (near[mid - 1] + near[mid]) / 2)
            seps = [0.0] + [gap(a, b) for a, b in itertools.pairwise(row)]
            for v, value in zip(row, _isotonic(targets, seps), strict=True):
                x[v] = value
    return x


def _draw(
    sizes: Sequence[tuple[float, float]],
    edge_list: list[tuple[int, int]],
    proper: list[tuple[int, int]],
    flipped: list[bool],
    chains: list[list[int]],
    rows: list[list[int]],
    layer: list[int],
    x: list[float],
    spacing: Spacing,
) -> Drawing:
    n = len(sizes)
    left = min((x[v] - (sizes[v][0] / 2 if v < n else 0) for row in rows for v in row), default=0.0)
    shift = spacing.margin - left
    tops, y = [], spacing.margin
    for row in rows:
        tops.append(y)
        y += max((sizes[v][1] for v in row if v < n), default=0.0) + spacing.layer_gap
    height = y - spacing.layer_gap + spacing.margin if rows else 2 * spacing.margin
    boxes = tuple(Box(x[v] + shift - w / 2, tops[layer[v]], w, h) for v, (w, h) in enumerate(sizes))
    band = [max((sizes[v][1] for v in row if v < n), default=0.0) for row in rows]
    ports = _ports(boxes, chains, x)
    routed: dict[tuple[int, int, int], Route] = {}
    for k, (chain, reverse) in enumerate(zip(chains, flipped, strict=True)):
        head, tail = chain[0], chain[-1]
        points: list[Point] = [ports[k][0]]
        for d in chain[1:-1]:
            points += [(x[d] + shift, tops[layer[d]]), (x[d] + shift, tops[layer[d]] + band[layer[d]])]
        points.append(ports[k][1])
        source, target = (tail, head) if reverse else (head, tail)
        routed[(source, target, k)] = Route(source, target, tuple(points[::-1] if reverse else points), reverse)
    routes: list[Route] = []
    proper_index = iter(range(len(proper)))
    for u, v in edge_list:
        if u == v:
            b = boxes[u]
            right, y0, y1 = b.x + b.width, b.y + b.height * 0.35, b.y + b.height * 0.65
            loop = ((right, y0), (right + spacing.loop_width, y0), (right + spacing.loop_width, y1), (right, y1))
            routes.append(Route(u, v, loop, True))
        else:
            k = next(proper_index)
            routes.append(routed[(u, v, k)])
    width = max((b.x + b.width for b in boxes), default=0.0) + spacing.loop_width + spacing.margin
    width = max([width, *(p[0] + spacing.margin for r in routes for p in r.points)])
    return Drawing(boxes, tuple(routes), width, height, tuple(layer[:n]))


def _ports(boxes: tuple[Box, ...], chains: list[list[int]], x: list[float]) -> list[list[Point]]:
    """Where each chain leaves its first node (bottom side) and enters its last (top side): spread along the side
    in the order of where the other end lies, so parallel edges do not overlap."""
    leaving: dict[int, list[tuple[float, int]]] = {}
    entering: dict[int, list[tuple[float, int]]] = {}
    for k, chain in enumerate(chains):
        leaving.setdefault(chain[0], []).append((x[chain[1]], k))
        entering.setdefault(chain[-1], []).append((x[chain[-2]], k))
    ports: list[list[Point]] = [[(0.0, 0.0), (0.0, 0.0)] for _ in chains]
    for side, table in ((0, leaving), (1, entering)):
        for node, ends in table.items():
            b = boxes[node]
            ends.sort()
            for i, (_, k) in enumerate(ends):
                px = b.x + b.width * (i + 1) / (len(ends) + 1) if len(ends) > 1 else b.x + b.width / 2
                ports[k][side] = (px, b.y + b.height if side == 0 else b.y)
    return ports

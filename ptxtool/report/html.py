"""`ptxtool report`'s page: one self-contained HTML file (inline CSS and SVG, a few lines of optional script),
readable without JavaScript. Every kernel is a `<details>` section, open only for the first, and the code comes in
blocks of lines the browser lays out only when they scroll into view (`content-visibility`), so a large file opens
without laying out everything; every PTX line is an element with an anchor, its SASS folded under it.

Everything from the inputs goes through `escape` (PTX comments and strings may hold `<` and `&`)."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # report/ is a leaf: it reads the service's views by their fields
    from ptxtool.services.report import Comparison, FileView, KernelView, Span

_CONTEXT = 3  # unchanged lines kept around each change in the side-by-side diff
_CHUNK = 200  # PTX lines per block the browser lays out only when it scrolls into view (content-visibility)

_CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg2:#f6f8fa; --add:#dafbe1; --del:#ffebe9; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0 auto; max-width: 1500px; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
code, pre, .code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
details > summary { cursor: pointer; }
details.kernel, details.function, details.module, details.part {
  border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 4px 10px; }
details.kernel > summary { font-weight: 600; font-size: 15px; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg2); font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); } .bad { color: #cf222e; font-weight: 600; } .good { color: #1a7f37; }
.code { border: 1px solid var(--line); background: #fff; overflow-x: auto; }
.code .chunk { content-visibility: auto; contain-intrinsic-size: auto 3400px; }
.code .l { display: block; white-space: pre; }
.code .l > summary { list-style: none; display: block; }
.code .l > summary::-webkit-details-marker { display: none; }
.code .l > summary::after { content: " \\25B8 " attr(data-sass); color: var(--muted); font-size: 11px; }
.code details.l[open] > summary::after { content: " \\25BE " attr(data-sass); }
.code .n { display: inline-block; width: 6ch; text-align: right; padding-right: 1ch; color: var(--muted);
  text-decoration: none; user-select: none; }
.code .l:target, .code .l:target > summary { background: #fff8c5; }
.code pre.sass { margin: 0 0 2px 7ch; padding: 2px 8px; background: var(--bg2); border-left: 3px solid #8c959f; }
.code .src { color: #0a7b83; padding-left: 7ch; white-space: pre; font-style: italic; }
.finding { margin: 1px 0 2px 7ch; padding: 1px 8px; white-space: normal; border-left: 3px solid #bf8700;
  background: #fff8c5; font-family: system-ui, sans-serif; font-size: 12px; }
.finding.error { border-color: #cf222e; background: var(--del); }
.finding.note { border-color: #0969da; background: #ddf4ff; }
.pictures { display: flex; flex-wrap: wrap; gap: 12px; }
.scroll { overflow: auto; max-height: 80vh; border: 1px solid var(--line); }
table.diff td { white-space: pre; font: 12px/1.35 ui-monospace, monospace; border: none; padding: 0 6px; }
table.diff td.n { color: var(--muted); text-align: right; user-select: none; }
table.diff tr.del td.a, table.diff tr.chg td.a { background: var(--del); }
table.diff tr.add td.b, table.diff tr.chg td.b { background: var(--add); }
table.diff tr.skip td { color: var(--muted); background: var(--bg2); font-style: italic; }
pre.udiff span { display: block; } pre.udiff .add { background: var(--add); } pre.udiff .del { background: var(--del); }
tr.winner td { background: var(--add); font-weight: 600; }
nav ul { margin: 4px 0; } .js-only { display: none; }
"""

_SCRIPT = """
document.querySelectorAll('.js-only').forEach(e => e.style.display = 'inline-block');
function openTo(id) { let e = document.getElementById(id);
  for (; e; e = e.parentElement) if (e.tagName === 'DETAILS') e.open = true; }
window.addEventListener('hashchange', () => openTo(location.hash.slice(1)));
if (location.hash) openTo(location.hash.slice(1));
function sass(open) { document.querySelectorAll('details.kernel[open] details.l').forEach(d => d.open = open); }
"""


def line_anchor(file_index: int, line: int) -> str:
    """The id of a PTX line's element on the page (the CFG's blocks link to it)."""
    return f"f{file_index}-L{line}"


def _row(cells: Iterable[object], header: bool = False, cls: str = "") -> str:
    tag = "th" if header else "td"
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(f"<{tag}>{escape(str(c))}</{tag}>" for c in cells) + "</tr>"


def _number(value: object, key: str) -> str:
    return f'<td class="num" data-key="{escape(key)}">{escape("-" if value is None else str(value))}</td>'


# ---------------------------------------------------------------- one kernel


def _resources(data: dict) -> str:
    """The resource and occupancy table; each number cell names its path in `inspect --json` (data-key)."""
    r, occupancy = data["resources"], data["occupancy"]
    rows = [
        ("registers per thread", "resources.registers", r["registers"]),
        ("spill stores (bytes)", "resources.spill_stores", r["spill_stores"]),
        ("spill loads (bytes)", "resources.spill_loads", r["spill_loads"]),
        ("stack frame (bytes)", "resources.stack_frame", r["stack_frame"]),
        ("cumulative stack (bytes)", "resources.cumulative_stack", r["cumulative_stack"]),
        ("static shared memory (bytes)", "resources.shared", r["shared"]),
        ("local memory (bytes)", "resources.local", r["local"]),
        ("barriers", "resources.barriers", r["barriers"]),
    ]
    rows += [(f"constant bank {bank} (bytes)", f"resources.constant.{bank}", v) for bank, v in r["constant"].items()]
    out = ['<table class="resources"><tr><th>resource (ptxas)</th><th>value</th></tr>']
    out += [f"<tr><td>{escape(label)}</td>{_number(value, key)}</tr>" for label, key, value in rows]
    if occupancy:
        out.append('<tr><th colspan="2">occupancy (theoretical)</th></tr>')
        occ = [
            ("occupancy", "occupancy.occupancy", f"{occupancy['occupancy']:.0%}"),
            ("active warps per SM", "occupancy.active_warps", occupancy["active_warps"]),
            ("most warps per SM", "occupancy.max_warps", occupancy["max_warps"]),
            ("blocks per SM", "occupancy.blocks_per_sm", occupancy["blocks_per_sm"]),
            ("limited by", "occupancy.limited_by", occupancy["limited_by"]),
            (f"block size (from {data['block_size_from']})", "occupancy.block_size", occupancy["block_size"]),
        ]
        out += [f"<tr><td>{escape(label)}</td>{_number(value, key)}</tr>" for label, key, value in occ]
    else:
        out.append('<tr><td colspan="2" class="muted">occupancy: this architecture is not in the table</td></tr>')
    out.append("</table>")
    return "".join(out)


def _summary(data: dict) -> str:
    r, occupancy = data["resources"], data["occupancy"]
    parts = [f"{r['registers'] if r['registers'] is not None else '?'} registers"]
    spills = r["spill_stores"] + r["spill_loads"]
    parts.append(f"{spills} spill bytes" if spills else "no spills")
    if occupancy:
        parts.append(f"occupancy {occupancy['occupancy']:.0%} (limited by {occupancy['limited_by']})")
    return " · ".join(parts)


def _findings_list(findings: list[dict], file_index: int) -> str:
    if not findings:
        return '<p class="muted">lint: no findings</p>'
    items = [
        f'<li><a href="#{line_anchor(file_index, f["line"])}">line {f["line"]}</a> '
        f"<b>{escape(f['rule'])}</b> {escape(f['severity'])}: {escape(f['message'])}</li>"
        for f in findings
    ]
    return f"<p>lint: {len(findings)} finding{'s' * (len(findings) != 1)}</p><ul>{''.join(items)}</ul>"


# ---------------------------------------------------------------- code


def _code(view: FileView, file_index: int, span: Span) -> str:
    """The span's PTX lines, each with its SASS folded under it, its lint findings after it, and the source line
    (`.loc`) above it where that changes."""
    out = ['<div class="code"><div class="chunk">']
    own = span.function
    for n in range(span.start, span.end + 1):
        if n > span.start and (n - span.start) % _CHUNK == 0:
            out.append('</div><div class="chunk">')
        anchor = line_anchor(file_index, n)
        if n in view.source_at:
            where, text = view.source_at[n]
            out.append(f'<div class="src">{escape(where)}{"  " + escape(text) if text else ""}</div>')
        number = f'<a class="n" href="#{anchor}">{n}</a>'
        ptx = f'<code class="ptx" data-line="{n}">{escape(view.lines[n - 1])}</code>'
        sass = view.sass.get(n)
        if sass:
            listing = "\n".join(escape(text if name == own else f"[{name}] {text}") for name, text in sass)
            count = f"{len(sass)} SASS"
            out.append(
                f'<details class="l" id="{anchor}"><summary data-sass="{count}">{number}{ptx}</summary>'
                f'<pre class="sass">{listing}</pre></details>'
            )
        else:
            out.append(f'<div class="l" id="{anchor}">{number}{ptx}</div>')
        for f in view.findings.get(n, ()):
            out.append(
                f'<div class="finding {escape(f["severity"])}"><b>{escape(f["rule"])}</b> '
                f"{escape(f['severity'])}: {escape(f['message'])}</div>"
            )
    out.append("</div></div>")
    return "\n".join(out)


def _kernel(view: FileView, file_index: int, span: Span, kernel: KernelView, first: bool) -> str:
    in_span = [f for n in range(span.start, span.end + 1) for f in view.findings.get(n, ())]
    pressure = kernel.pressure_svg or '<p class="muted">no pressure curve</p>'
    out = [
        f'<details class="kernel" id="f{file_index}-k-{escape(kernel.name)}" data-kernel="{escape(kernel.name)}"'
        f"{' open' if first else ''}><summary>{escape(kernel.name)} "
        f'<span class="muted">— {escape(_summary(kernel.data))}</span></summary>',
        f'<p class="muted">PTX lines {span.start}-{span.end}</p>',
        f'<div class="pictures"><div>{_resources(kernel.data)}</div><div>{pressure}</div></div>',
        _findings_list(in_span, file_index),
    ]
    if view.unplaced.get(kernel.name):
        out.append(
            f'<details class="part"><summary>SASS without a PTX line ({len(view.unplaced[kernel.name])})</summary>'
            f'<pre class="sass">{escape(chr(10).join(view.unplaced[kernel.name]))}</pre></details>'
        )
    out.append(
        '<details class="part"><summary>control-flow graph (loops coloured, back edges dashed; a block links to '
        f'its first line)</summary><div class="scroll">{kernel.cfg_svg}</div></details>'
    )
    out.append(
        f'<details class="part" open><summary>PTX and SASS ({span.end - span.start + 1} lines; click a line for '
        f"its SASS)</summary>{_code(view, file_index, span)}</details>"
    )
    out.append("</details>")
    return "\n".join(out)


def _file(view: FileView, file_index: int, first_kernel: bool) -> tuple[str, bool]:
    out = [f'<section class="file" id="f{file_index}"><h2>{escape(view.path)} <span class="muted">({view.arch})</span>']
    out.append("</h2>")
    if view.notes:
        out.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in view.notes) + "</ul>")
    for span in view.spans:
        if span.kernel and span.function in view.kernels:
            out.append(_kernel(view, file_index, span, view.kernels[span.function], first_kernel))
            first_kernel = False
            continue
        what = f"function {span.function}" if span.function else "module"
        cls = "function" if span.function else "module"
        out.append(
            f'<details class="{cls}"><summary>{escape(what)} <span class="muted">(PTX lines {span.start}-{span.end})'
            f"</span></summary>{_code(view, file_index, span)}</details>"
        )
    out.append("</section>")
    return "\n".join(out), first_kernel


# ---------------------------------------------------------------- --optimized


def _side_by_side(before: list[str], after: list[str]) -> str:
    """The two files as a table of line pairs; runs of unchanged lines longer than the context are folded."""
    rows = []

    def pair(i: int | None, j: int | None, cls: str) -> None:
        left = (str(i + 1), before[i]) if i is not None else ("", "")
        right = (str(j + 1), after[j]) if j is not None else ("", "")
        rows.append(
            f'<tr class="{cls}"><td class="n">{left[0]}</td><td class="a">{escape(left[1])}</td>'
            f'<td class="n">{right[0]}</td><td class="b">{escape(right[1])}</td></tr>'
        )

    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            if i1 - i0 > 2 * _CONTEXT + 1:
                for k in range(_CONTEXT if i0 else 0):
                    pair(i0 + k, j0 + k, "eq")
                start, end = i0 + (_CONTEXT if i0 else 0), i1 - (_CONTEXT if i1 < len(before) else 0)
                rows.append(f'<tr class="skip"><td colspan="4">… {end - start} unchanged lines …</td></tr>')
                for k in range(end, i1):
                    pair(k, j0 + (k - i0), "eq")
            else:
                for k in range(i1 - i0):
                    pair(i0 + k, j0 + k, "eq")
            continue
        for k in range(max(i1 - i0, j1 - j0)):
            i = i0 + k if k < i1 - i0 else None
            j = j0 + k if k < j1 - j0 else None
            pair(i, j, "chg" if i is not None and j is not None else ("del" if j is None else "add"))
    return '<div class="scroll"><table class="diff">' + "".join(rows) + "</table></div>"


def _mnemonics(lines: list[str]) -> Counter[str]:
    words = (line.split() for line in lines)
    return Counter(w[1 if w[0].startswith("@") else 0].split(".")[0] for w in words if w)


def _comparison(c: Comparison) -> str:
    out = [
        '<section class="comparison" id="optimized"><h2>optimized: '
        f"{escape(c.before_path)} → {escape(c.after_path)}</h2>"
    ]
    if c.record is not None:
        out.append(_record(c.record))
    else:
        out.append(f'<p class="muted">{escape(c.record_note)}</p>')
    out.append("<h3>SASS per kernel</h3>")
    for k in c.kernels:
        before, after = k.resources
        heads = ("", "registers", "spill bytes", "stack")
        table = [_row(heads, header=True)]
        for label, r in (("before", before), ("after", after)):
            table.append(
                _row([label, *(r[key] if r else "-" for key in ("registers", "spill_bytes", "stack"))], cls="")
            )
        moved = _mnemonics(k.after)
        moved.subtract(_mnemonics(k.before))
        changed = {m: n for m, n in sorted(moved.items()) if n}
        diff = list(difflib.unified_diff(k.before, k.after, "before", "after", n=2, lineterm=""))
        lines = []
        for line in diff[2:]:
            cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
            lines.append(f'<span class="{cls}">{escape(line)}</span>')
        summary = "unchanged" if not diff else f"{sum(1 for d in diff[2:] if d[:1] in '+-')} lines differ"
        out.append(
            f'<details class="part" data-kernel="{escape(k.name)}"><summary>{escape(k.name)}: SASS {summary}'
            f"</summary><table>{''.join(table)}</table>"
        )
        if changed:
            out.append(
                "<p>instruction counts: "
                + ", ".join(f"{escape(m)} {'+' if n > 0 else ''}{n}" for m, n in changed.items())
                + "</p>"
            )
        if diff:
            out.append('<pre class="udiff">' + "".join(lines) + "</pre>")
        out.append("</details>")
    out.append("<h3>PTX side by side</h3>")
    out.append(_side_by_side(c.before, c.after))
    out.append("</section>")
    return "\n".join(out)


def _record(record: dict) -> str:
    """optimize's verification record: verdict, what was checked, what was dropped and why."""
    verified = record.get("verified")
    verdict = '<span class="good">verified</span>' if verified else '<span class="bad">NOT verified</span>'
    out = [f"<h3>verification record</h3><p>{verdict}</p>"]
    checks = record.get("checks") or {}
    out.append("<table>" + "".join(_row((k, v)) for k, v in checks.items()) + "</table>")
    for problem in record.get("problems") or ():
        out.append(f'<p class="bad">{escape(_problem_text(problem))}</p>')
    rewrites = [w for p in record.get("passes") or () for w in p.get("rewrites", ())]
    out.append(f"<p>{len(rewrites)} rewrite{'s' * (len(rewrites) != 1)} kept</p>")
    dropped = record.get("dropped") or []
    if dropped:
        out.append("<p>dropped by verification:</p><ul>")
        out += [f"<li>{escape(json.dumps(d, sort_keys=True))}</li>" for d in dropped]
        out.append("</ul>")
    return "".join(out)


# ---------------------------------------------------------------- --tune


def _cell(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _is_winner(index: int, candidate: object, winner: object) -> bool:
    if winner is None:
        return False
    if isinstance(winner, int) and not isinstance(winner, bool):
        return index == winner
    if candidate == winner:
        return True
    if isinstance(candidate, dict):
        keys = ("name", "id", "label", "config")
        if isinstance(winner, dict):
            return any(k in candidate and candidate.get(k) == winner.get(k) for k in keys)
        return any(candidate.get(k) == winner for k in keys)
    return False


def _tune(data: dict) -> str:
    candidates = data.get("candidates") or []
    winner = data.get("winner")
    columns = list(dict.fromkeys(k for c in candidates if isinstance(c, dict) for k in c))
    out = ['<section class="tune" id="tune"><h2>tuning result</h2>']
    if isinstance(winner, dict):
        name = next((winner[k] for k in ("name", "id", "label", "config") if k in winner), None)
        interval = next((winner[k] for k in ("interval", "ci", "confidence_interval") if k in winner), None)
        said = ", ".join(
            [escape(_cell(name if name is not None else winner))]
            + ([f"interval {escape(_cell(interval))}"] if interval is not None else [])
        )
        out.append(f"<p>winner: <b>{said}</b></p><p class='muted'>{escape(_cell(winner))}</p>")
    elif winner is not None:
        out.append(f"<p>winner: <b>{escape(_cell(winner))}</b></p>")
    else:
        out.append('<p class="muted">no winner given</p>')
    others = {k: v for k, v in data.items() if k not in ("candidates", "winner")}
    if others:
        out.append("<table>" + "".join(_row((k, _cell(v))) for k, v in others.items()) + "</table>")
    if not candidates:
        out.append('<p class="muted">no candidates</p>')
    else:
        out.append('<table class="candidates">' + _row(["#", *columns] if columns else ["#", "candidate"], True))
        for i, c in enumerate(candidates):
            cells = [_cell(c.get(k, "")) if k in c else "" for k in columns] if isinstance(c, dict) else [_cell(c)]
            out.append(_row([i, *cells], cls="winner" if _is_winner(i, c, winner) else ""))
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out)


# ---------------------------------------------------------------- the page


def render(files: list[FileView], comparison: Comparison | None = None, tune: dict | None = None) -> str:
    """The whole page."""
    from ptxtool import __version__

    title = ", ".join(f.path for f in files) or "ptxtool report"
    nav = ["<nav><ul>"]
    for i, f in enumerate(files):
        kernels = "".join(f'<li><a href="#f{i}-k-{escape(k)}">{escape(k)}</a></li>' for k in f.kernels)
        nav.append(f'<li><a href="#f{i}">{escape(f.path)}</a><ul>{kernels}</ul></li>')
    if comparison:
        nav.append('<li><a href="#optimized">optimized</a></li>')
    if tune is not None:
        nav.append('<li><a href="#tune">tuning result</a></li>')
    nav.append("</ul></nav>")
    body, first = [], True
    for i, f in enumerate(files):
        text, first = _file(f, i, first)
        body.append(text)
    if comparison:
        body.append(_comparison(comparison))
    if tune is not None:
        body.append(_tune(tune))
    return "\n".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>ptxtool report: {escape(title)}</title><style>{_CSS}</style></head><body>",
            f'<header><h1>ptxtool report</h1><p class="muted">ptxtool {escape(__version__)} · resources from '
            "ptxas, SASS from nvdisasm (a -lineinfo build), estimates from ptxtool's analyses</p>",
            '<button class="js-only" onclick="sass(true)">open all SASS</button> '
            '<button class="js-only" onclick="sass(false)">close all SASS</button>',
            *nav,
            "</header><main>",
            *body,
            f"</main><script>{_SCRIPT}</script></body></html>",
        ]
    )


def _problem_text(problem: dict) -> str:
    """One of optimize's problems (a diagnostic, ptxtool.optimize/2): its line and message."""
    line, message = problem.get("line"), str(problem.get("message", ""))
    return f"line {line}: {message}" if line else message

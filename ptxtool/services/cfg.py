"""`ptxtool cfg`: one function's control-flow graph, loops marked, as graphviz dot text or as SVG drawn in Python
(report/layout.py: no graphviz needed)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.errors import EXIT_OK, InputError, UsageError
from ptxtool.sources import Source, Unreadable, parse_source, write_atomic

FORMATS = {".dot": "dot", ".gv": "dot", ".svg": "svg"}


@dataclass(frozen=True, slots=True)
class Options:
    kernel: str | None = None
    output: str | None = None  # None: stdout
    form: str | None = None  # "dot" or "svg"; None: from the output's suffix, else dot

    def __post_init__(self) -> None:
        if self.output and not self.output.endswith(tuple(FORMATS)):
            raise UsageError(
                f"-o {self.output}: cfg writes .dot/.gv (dot text) or .svg; for other formats pipe the text to "
                "graphviz, e.g. `ptxtool cfg k.ptx | dot -Tpng > cfg.png`"
            )
        suffix = next((FORMATS[s] for s in FORMATS if self.output and self.output.endswith(s)), None)
        if self.form and suffix and self.form != suffix:
            raise UsageError(f"--format {self.form} does not go with -o {self.output}")

    @property
    def chosen(self) -> str:
        suffix = next((FORMATS[s] for s in FORMATS if self.output and self.output.endswith(s)), None)
        return self.form or suffix or "dot"


@dataclass(frozen=True, slots=True)
class CfgResult:
    path: str
    function: str
    text: str  # dot text, or SVG
    written: str | None  # the file it went to; None: stdout

    exit_code = EXIT_OK

    def to_data(self) -> dict:
        return {"path": self.path, "function": self.function, "text": self.text, "written": self.written}


def execute(options: Options, sources: list[Source | Unreadable]) -> CfgResult:
    from ptxtool.analysis.cfg import build_cfg
    from ptxtool.analysis.loops import find_loops
    from ptxtool.report.pictures import cfg_dot, cfg_svg
    from ptxtool.syntax.names import choose_function

    (source,) = sources
    if isinstance(source, Unreadable):
        raise InputError(list(source.diagnostics))
    module = parse_source(source)
    function = choose_function([f for f in module.functions if f.body is not None], options.kernel, source.display)
    cfg = build_cfg(function)
    draw = cfg_svg if options.chosen == "svg" else cfg_dot
    text = draw(cfg, find_loops(cfg))
    if options.output:
        write_atomic(options.output, text)
    return CfgResult(source.display, function.name, text, options.output)

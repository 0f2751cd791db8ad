"""`ptxtool cfg`: one function's control-flow graph, loops marked, as dot text (or SVG through graphviz)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.errors import EXIT_OK, InputError, UsageError
from ptxtool.sources import Source, Unreadable, parse_source, write_atomic

SUFFIXES = (".dot", ".gv", ".svg")


@dataclass(frozen=True, slots=True)
class Options:
    kernel: str | None = None
    output: str | None = None  # .dot/.gv: dot text; .svg: rendered; None: dot text on stdout

    def __post_init__(self) -> None:
        if self.output and not self.output.endswith(SUFFIXES):
            raise UsageError(
                f"-o {self.output}: cfg writes .dot/.gv (dot text) or .svg; for other formats pipe the text to "
                "graphviz, e.g. `ptxtool cfg k.ptx | dot -Tpng > cfg.png`"
            )


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
    from ptxtool.report.pictures import cfg_dot
    from ptxtool.syntax.names import choose_function

    output = options.output
    (source,) = sources
    if isinstance(source, Unreadable):
        raise InputError(list(source.diagnostics))
    module = parse_source(source)
    function = choose_function([f for f in module.functions if f.body is not None], options.kernel, source.display)
    cfg = build_cfg(function)
    text = cfg_dot(cfg, find_loops(cfg))
    if output and output.endswith(".svg"):
        from ptxtool.toolchain.graphviz import dot_to_svg

        text = dot_to_svg(text)
    if output:
        write_atomic(output, text)
    return CfgResult(source.display, function.name, text, output)

"""`ptxtool sass`: the SASS ptxas makes of a source, function by function in the order the PTX defines them, each
instruction tagged with its offset, the PTX line it came from and the source line (`.loc`) behind that."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ptxtool.errors import EXIT_OK, InputError
from ptxtool.services.inspect import load
from ptxtool.sources import Source, Unreadable
from ptxtool.syntax.lineinfo import LineInfo, SourceLine
from ptxtool.toolchain.compile import compile_ptx, target_arch
from ptxtool.toolchain.sass import ListingLine, listing

_NO_SASS = "it has none: ptxas keeps kernels (.entry) and the functions they call"


@dataclass(frozen=True, slots=True)
class Options:
    kernel: str | None = None
    arch: str | None = None
    backend: str = "ptxas"
    with_ptx: bool = True
    addresses: bool = False
    source: bool = False


@dataclass(frozen=True)
class SassResult:
    """Per function (PTX order) its listing; with `source`, the source line of each PTX line shown and the text of
    each readable source file, and `notes` saying what could not be shown."""

    path: str
    ptx_lines: list[str]
    functions: dict[str, list[ListingLine]]
    with_ptx: bool
    addresses: bool = False
    source_of: dict[int, SourceLine] = field(default_factory=dict)
    source_texts: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    exit_code = EXIT_OK

    def to_data(self) -> dict:
        def entry(e: ListingLine) -> dict:
            at = self.source_of.get(e.ptx_line)
            return {"text": e.text, "ptx_line": e.ptx_line, "address": e.address} | (
                {"source": {"file": at.file, "line": at.line}} if at else {}
            )

        return {"path": self.path, "functions": {name: list(map(entry, es)) for name, es in self.functions.items()}}


def _in_ptx_order(functions: dict[str, list[ListingLine]], order: list[str]) -> dict[str, list[ListingLine]]:
    """nvdisasm lists functions in cubin order (often the reverse of the PTX); functions ptxas made up go last."""
    rank = {name: i for i, name in enumerate(order)}
    return dict(sorted(functions.items(), key=lambda item: rank.get(item[0], len(rank))))


def _read(path: str, beside: Path) -> list[str] | None:
    """A source file's lines: the path as `.file` wrote it, or relative to the PTX file's directory."""
    for candidate in (Path(path), beside / path):
        try:
            return candidate.read_text(errors="replace").splitlines()
        except OSError:
            continue
    return None


def _sources(info: LineInfo, functions: dict[str, list[ListingLine]], where: Path):
    """The source line of every PTX line the listing names, the readable files' lines, and notes for the rest."""
    shown = {e.ptx_line for entries in functions.values() for e in entries if e.ptx_line}
    source_of = {n: at for n in sorted(shown) if (at := info.find(n))}
    texts, notes = {}, []
    for file in dict.fromkeys(at.file for at in source_of.values()):
        lines = _read(file, where)
        if lines is None:
            notes.append(f"source not shown for {file}: it cannot be read here")
        else:
            texts[file] = lines
    if not source_of:
        notes.append("no source lines to show: the PTX has no .loc line info (nvcc -lineinfo adds it)")
    return source_of, texts, notes


def execute(options: Options, sources: list[Source | Unreadable]) -> SassResult:
    """SASS per function (or only `options.kernel`, by any of its names), under the PTX lines it came from."""
    from ptxtool.syntax.names import find

    (source,) = sources
    if isinstance(source, Unreadable):
        raise InputError(list(source.diagnostics))
    source, module, _ = load(source, options.arch)
    arch = target_arch(module.targets, source.display, options.arch)
    lineinfo = options.with_ptx or options.source
    compiled = compile_ptx(source.text, source.display, arch, backend=options.backend, lineinfo=lineinfo)
    functions = _in_ptx_order(listing(compiled.cubin, lineinfo), [f.name for f in module.functions])
    if options.kernel is not None:
        found = find(list(functions), options.kernel)
        if len(found) != 1:
            there = f"there are: {', '.join(functions)}" if functions else _NO_SASS
            raise InputError.at(source.display, f"no function {options.kernel!r} in the SASS; {there}")
        functions = {found[0]: functions[found[0]]}
    result = SassResult(source.display, source.text.splitlines(), functions, options.with_ptx, options.addresses)
    if not options.source:
        return result
    source_of, texts, notes = _sources(LineInfo.of(module), functions, Path(source.path).parent)
    return replace(result, source_of=source_of, source_texts=texts, notes=notes)

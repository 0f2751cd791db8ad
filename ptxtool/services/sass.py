"""`ptxtool sass`: the SASS ptxas makes of a source, each instruction tagged with the PTX line it came from."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.errors import EXIT_OK, InputError
from ptxtool.services.inspect import load
from ptxtool.sources import Source, Unreadable
from ptxtool.toolchain.compile import compile_ptx, target_arch
from ptxtool.toolchain.sass import ListingLine, listing

_NO_SASS = "it has none: ptxas keeps kernels (.entry) and the functions they call"


@dataclass(frozen=True, slots=True)
class Options:
    kernel: str | None = None
    arch: str | None = None
    backend: str = "ptxas"
    with_ptx: bool = True


@dataclass(frozen=True)
class SassResult:
    path: str
    ptx_lines: list[str]
    functions: dict[str, list[ListingLine]]
    with_ptx: bool

    exit_code = EXIT_OK

    def to_data(self) -> dict:
        return {
            "path": self.path,
            "functions": {
                name: [{"text": e.text, "ptx_line": e.ptx_line} for e in entries]
                for name, entries in self.functions.items()
            },
        }


def execute(options: Options, sources: list[Source | Unreadable]) -> SassResult:
    """SASS per function (or only `options.kernel`, by any of its names), under the PTX lines it came from."""
    from ptxtool.syntax.names import find

    (source,) = sources
    if isinstance(source, Unreadable):
        raise InputError(list(source.diagnostics))
    source, module, _ = load(source, options.arch)
    arch = target_arch(module.targets, source.display, options.arch)
    with_ptx = options.with_ptx
    compiled = compile_ptx(source.text, source.display, arch, backend=options.backend, lineinfo=with_ptx)
    functions = listing(compiled.cubin, with_ptx)
    if options.kernel is not None:
        found = find(list(functions), options.kernel)
        if len(found) != 1:
            there = f"there are: {', '.join(functions)}" if functions else _NO_SASS
            raise InputError.at(source.display, f"no function {options.kernel!r} in the SASS; {there}")
        functions = {found[0]: functions[found[0]]}
    return SassResult(source.display, source.text.splitlines(), functions, with_ptx)

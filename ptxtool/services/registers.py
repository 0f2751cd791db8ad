"""The register pass inside `optimize`: the facts it is handed (ptxas's numbers, occupancy, the SASS's local-memory
instructions by PTX line; with a launch spec, GPU times and bit-for-bit checks), the minimal edits spliced into the
input's text, and the check that what is written assembles to the numbers the report promises.

It runs after the other passes, on their verified output: changing bounds changes the whole kernel's SASS, which
the cache-operator checks (`nothing else changed`) could not tell from a mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import prod

from ptxtool.passes import run_pipeline
from ptxtool.passes.registers import NAME, Numbers, RegisterSettings, RegistersReport, Speed, speed_of
from ptxtool.passes.report import Insertion
from ptxtool.sources import Source
from ptxtool.syntax import ast, format_module, parse
from ptxtool.syntax.printer import LINE
from ptxtool.toolchain.compile import compile_ptx
from ptxtool.toolchain.occupancy import occupancy
from ptxtool.toolchain.resources import FunctionResources
from ptxtool.toolchain.sass import listing, parse_op

LOCAL_MEMORY = frozenset(("STL", "LDL"))
_WIDTHS = {"64": 8, "128": 16, "U8": 1, "S8": 1, "U16": 2, "S16": 2}  # SASS size modifiers; none: 32 bits


def local_bytes(opcode: str) -> int:
    """Bytes one SASS local-memory instruction moves per thread (`STL.64` 8, `LDL.128` 16, `LDL` 4)."""
    return next((_WIDTHS[m] for m in opcode.split(".")[1:] if m in _WIDTHS), 4)


def charged(line_of: dict[int, int]) -> dict[int, int]:
    """Each printed instruction's input line, one a pass inserted (0) taking the line of the next input instruction
    after it: the read it was inserted before (a rematerialized copy), so its spills count where it runs."""
    out: dict[int, int] = {}
    pending: list[int] = []
    for printed in sorted(line_of):
        if line_of[printed]:
            out |= dict.fromkeys(pending, line_of[printed])
            out[printed], pending = line_of[printed], []
        else:
            pending.append(printed)
    return out | dict.fromkeys(pending, 0)


def measure(
    module: ast.Module,
    *,
    arch: str,
    path: str,
    launched: str | None = None,
    block: tuple[int, int, int] | None = None,
    dynamic_shared: int = 0,
) -> dict[str, Numbers]:
    """Per kernel: ptxas's numbers, occupancy (for the kernel a spec launches its block and dynamic shared memory,
    else the kernel's own bounds, else 256 threads)
    and its SASS local-memory instructions with the module's own PTX lines (a statement a pass inserted: the line
    of the statement it stands before)."""
    from ptxtool.services.inspect import block_size
    from ptxtool.services.optimize import reprinted

    text, line_of = reprinted(module)
    line_of = charged(line_of)
    compiled = compile_ptx(text, path, arch, lineinfo=True)
    code = listing(compiled.cubin, with_ptx_lines=True)
    out: dict[str, Numbers] = {}
    for function in module.kernels:
        r = compiled.functions.get(function.name)
        if r is None or r.registers is None:
            continue
        spec = function.name == launched
        threads, _ = block_size(function, prod(block) if block and spec else None)
        fit = occupancy(arch, r.registers, r.shared + (dynamic_shared if spec else 0), threads)
        spills = tuple(
            (line_of.get(line.ptx_line, 0), local_bytes(op.opcode))
            for line in code.get(function.name, [])
            if line.address is not None and (op := parse_op(line.text)).mnemonic in LOCAL_MEMORY
        )
        out[function.name] = Numbers(
            r.registers,
            r.spill_stores,
            r.spill_loads,
            r.stack_frame,
            r.shared,
            fit.occupancy if fit else None,
            fit.active_warps if fit else 0,
            fit.limited_by if fit else "",
            spills,
        )
    return out


def timer(source: Source, spec_path: str):
    """Time a kernel's variants against the input with the spec (`ptxtool bench`), and check each faster one's
    outputs bit for bit (`ptxtool run`), all assembled by the ptxas whose numbers the pass judged (not the
    driver's JIT); None for a kernel the spec does not launch."""
    from ptxtool.errors import InputError
    from ptxtool.services.bench import bench
    from ptxtool.services.launch import find_kernel, load_spec
    from ptxtool.services.run import run

    spec = load_spec(spec_path)

    def time(kernel: str, modules: Sequence[ast.Module]) -> list[Speed] | None:
        try:
            launched = find_kernel(modules[0], spec.kernel, source.display).name
        except InputError:
            return None
        if launched != kernel:
            return None
        texts = [
            Source(f"{source.display} (variant {i})" if i else source.display, format_module(m))
            for i, m in enumerate(modules)
        ]
        timings = bench(texts, spec, kernel, ptxas=True).timings  # the cubins whose numbers were judged
        speeds = [Speed(timings[0].median_us, 1.0, 1.0, 1.0, True)]
        for text, timing in zip(texts[1:], timings[1:], strict=True):
            speed = speed_of(timings[0].samples, timing.samples, None)
            if speed.speedup > 1:
                same = run([texts[0], text], spec, kernel, ptxas=True).verdict == "identical"
                speed = replace(speed, identical=same)
            speeds.append(speed)
        return speeds

    return time


def stage(
    text: str, source: Source, arch: str, spec_path: str | None
) -> tuple[str, RegistersReport, list[str], dict[str, FunctionResources]]:
    """Run the register pass over `text` (the verified output of the passes before it): the text to write, the
    report, the problems that keep anything from being written, and ptxas's resources of what is written (empty
    when nothing changed)."""
    from ptxtool.services.launch import find_kernel, load_spec

    module = parse(text)
    spec = load_spec(spec_path) if spec_path else None
    launched = find_kernel(module, spec.kernel, source.display).name if spec else None
    block = spec.block if spec else None
    dynamic = spec.shared_bytes if spec else 0

    def numbers(m: ast.Module) -> dict[str, Numbers]:
        return measure(m, arch=arch, path=source.display, launched=launched, block=block, dynamic_shared=dynamic)

    time = timer(source, spec_path) if spec_path else None
    settings = RegisterSettings(arch, launched, block, dynamic, numbers, time)
    optimized, (report,) = run_pipeline(module, (NAME,), {NAME: settings})
    assert isinstance(report, RegistersReport)
    if not report.changed:
        return text, report, [], {}
    out = splice(text, module, optimized)
    if format_module(parse(out)) != format_module(optimized):
        raise RuntimeError("the spliced output is not the module the register pass chose (a splicing bug)")
    written = compile_ptx(out, source.display, arch).functions
    problems = []
    for k in report.kernels:
        r = written.get(k.name)
        promised = (k.after.registers, k.after.spill_bytes) if k.after else None
        if k.changed and (r is None or (r.registers, r.spill_bytes) != promised):
            got = "nothing" if r is None else f"{r.registers} registers, {r.spill_bytes} spill bytes"
            problems.append(
                f"{source.display}: {k.name}: ptxas made {got} of the output, not the {k.after.registers} registers"
                f" and {k.after.spill_bytes} spill bytes the register pass measured"  # type: ignore[union-attr]
            )
    return out, report, problems, written


# ---------------------------------------------------------------- splicing


def _line_starts(text: str) -> list[int]:
    from ptxtool.services.optimize import _line_starts as starts

    return starts(text)


def _perf(d: ast.PerfDirective) -> str:
    return LINE[ast.PerfDirective](d)


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _header_pieces(text: str, starts: list[int], old: ast.Function, new: ast.Function) -> list[tuple[int, int, str]]:
    """Edits of the performance directives between a kernel's parameters and its body: a changed directive is
    rewritten where it stands (its trailing comment kept), a removed one deleted, a new one put on a line of its
    own before the body's `{`."""
    pieces = []
    after = {d.word: d for d in new.directives}
    for n, d in enumerate(old.directives):
        start = starts[d.line - 1] + d.column - 1
        following = old.directives[n + 1] if n + 1 < len(old.directives) else None
        same_line = following is not None and following.line == d.end_line
        end = _line_end(text, starts[d.end_line - 1])
        if same_line and following is not None:
            end = starts[following.line - 1] + following.column - 1
        comment = text.find("//", start, end)
        end = comment if comment >= 0 else end
        while end > start and text[end - 1] in " \t":
            end -= 1
        replacement = after.get(d.word)
        if replacement is None:
            prefix = text[starts[d.line - 1] : start]
            if not prefix.strip() and not same_line and comment < 0:  # the whole line goes
                pieces.append((starts[d.line - 1], min(len(text), _line_end(text, start) + 1), ""))
            else:
                pieces.append((start, end, ""))
        elif replacement != d:
            pieces.append((start, end, _perf(replacement)))
    added = [d for d in new.directives if d.word not in {o.word for o in old.directives}]
    if added and new.body is not None:
        assert old.body is not None
        brace = starts[old.body.line - 1] + old.body.column - 1
        lines = "".join(_perf(d) + "\n" for d in added)
        if text[starts[old.body.line - 1] : brace].strip():
            pieces.append((brace, brace, "\n" + lines))
        else:
            pieces.append((starts[old.body.line - 1], starts[old.body.line - 1], lines))
    return pieces


def _body_pieces(text: str, starts: list[int], old: ast.Function, new: ast.Function) -> list[tuple[int, int, str]]:
    """Edits of a body: each replaced instruction rewritten from its opcode to its `;` (its guard unchanged), each
    inserted statement on a line of its own before the statement it precedes, indented like it."""
    from ptxtool.services.optimize import _diff_block, _insertion, _semicolon

    if old.body is None or new.body is None or old.body is new.body:
        return []
    edits, added = [], []
    _diff_block(old.name, old.body, new.body, edits, added)
    pieces = []
    for e in edits:
        if e.new.guard != e.old.guard:
            raise RuntimeError(f"line {e.old.line}: the register pass changed a guard: the output cannot be spliced")
        at = starts[e.old.line - 1] + e.old.column - 1
        pieces.append((at, _semicolon(text, at) + 1, LINE[ast.Instruction](replace(e.new, guard=None))))
    for a in added:
        where: Insertion = _insertion(a)
        start = starts[where.line - 1]
        prefix = text[start : start + where.column - 1]
        if a.anchor is not None and isinstance(a.anchor, ast.Instruction) and a.anchor.guard is not None:
            prefix = prefix[: prefix.rfind("@")]
        if prefix.strip():
            pieces.append((start + len(prefix), start + len(prefix), where.text + " "))
        else:
            end = text.find("\n", start)
            newline = "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"
            pieces.append((start, start, prefix + ("\t" if a.anchor is None else "") + where.text + newline))
    return pieces


def splice(text: str, module: ast.Module, optimized: ast.Module) -> str:
    """The input's text with only what the register pass changed edited in place; every other byte as it was."""
    starts = _line_starts(text)
    pieces: list[tuple[int, int, str]] = []
    for old, new in zip(module.functions, optimized.functions, strict=True):
        if old is not new:
            pieces += _header_pieces(text, starts, old, new) + _body_pieces(text, starts, old, new)
    out, done = [], 0
    for start, end, replacement in sorted(pieces, key=lambda p: (p[0], p[1])):
        out += [text[done:start], replacement]
        done = max(done, end)
    return "".join([*out, text[done:]])

"""The service behind `ptxtool parse --check`: instructions, modifiers, special registers and directives that the
file's own `.version` and `.target` do not allow, found from the ISA tables (the same cases ptxas rejects).
"""

from __future__ import annotations

from dataclasses import replace

from ptxtool import isa
from ptxtool.analysis.statements import statements
from ptxtool.errors import Diagnostic, Location
from ptxtool.isa.features import FUNCTION_DIRECTIVES, SPECIAL_REGISTERS, STATEMENT_DIRECTIVES
from ptxtool.isa.targets import TARGET_INTRODUCED, Need, Target, Version, version, version_text
from ptxtool.sources import Source
from ptxtool.syntax import ast
from ptxtool.syntax.words import ATTRIBUTE_WORDS


def _problem(line: int, column: int, message: str) -> Diagnostic:
    """Something the file's `.version`/`.target` does not allow, at a 1-based line and column (the path is
    `check_source`'s to name)."""
    return Diagnostic(Location("", line, column), message)


def explain(what: str, needs: tuple[Need, ...], ptx: Version, targets: tuple[Target, ...]) -> str:
    """Say the smallest change that would make a feature legal: a newer .version, or a target that has it."""
    on_target = [n for n in needs if all(n.target_ok(t) for t in targets)]
    if on_target:
        lowest = version_text(min(n.ptx for n in on_target))
        return f"{what} requires PTX ISA {lowest} or later (.version is {version_text(ptx)})"
    options = [f"{n.target}{'' if n.target[-1] in 'af' else ' or later'}" for n in needs]
    listed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
    return f"{what} is not available on .target {', '.join(map(str, targets))} (needs {listed})"


def unmet_requirements(i: ast.Instruction, ptx: Version, targets: tuple[Target, ...]) -> dict[str, str]:
    """Each feature of `i` the file's `.version` and `.target`s do not allow, with what would make it legal (the
    ISA tables' requirements, once per feature): what `parse --check` reports and the passes refuse to write."""
    out: dict[str, str] = {}
    for r in isa.requirements(i):
        if r.what not in out and not isa.satisfied(r.needs, ptx, targets):
            out[r.what] = explain(r.what, r.needs, ptx, targets)
    return out


def _not_one_of(mod: str, family: str) -> str:
    allowed = isa.MODIFIERS[family]
    listed = " ".join(f".{m}" for m in allowed if m != isa.TYPES) + (" or a type" if isa.TYPES in allowed else "")
    return f"modifier '.{mod}' is not one of {family}'s: {listed}"


def _target_problems(module: ast.Module, ptx: Version, targets: tuple[Target, ...]) -> list[Diagnostic]:
    d = module.directive(".target")
    out = []
    for t in targets:
        introduced = TARGET_INTRODUCED.get(str(t))
        if introduced and introduced > ptx:
            out.append(
                _problem(
                    d.line if d else 0,
                    d.column if d else 0,
                    f".target {t} requires PTX ISA {version_text(introduced)} or later "
                    f"(file has .version {version_text(ptx)})",
                )
            )
    return out


def _instruction_problems(i: ast.Instruction, ptx: Version, targets: tuple[Target, ...]) -> list[str]:
    if isa.find(i) is None:
        return [f"unknown instruction '{i.mnemonic}'"]
    out = []
    removed = isa.REMOVED.get(isa.family(i) or "")
    if removed and ptx >= removed[0] and any(t.number >= removed[1] for t in targets):
        since = f"PTX ISA {version_text(removed[0])} on sm_{removed[1]} and later"
        out.append(f"'{i.opcode}' without .sync is not supported from {since}: {removed[2]}")
    for mod in dict.fromkeys(isa.unknown_modifiers(i)):
        out.append(_not_one_of(mod, isa.family(i) or i.opcode))
    out.extend(unmet_requirements(i, ptx, targets).values())
    return out


def _spelling(i: ast.Instruction) -> tuple:
    """What `_instruction_problems` reads of an instruction: opcode, modifiers, operand count and the special
    registers among its operands (instructions spelled alike have the same problems: each spelling is checked once)."""
    specials = (n.text.split(".")[0] for op in i.operands for n in isa.operand_names(op) if n.text.startswith("%"))
    return i.opcode, i.modifiers, len(i.operands), tuple(s for s in specials if s in SPECIAL_REGISTERS)


def _constructs(module: ast.Module) -> list[tuple[str, int, int]]:
    """(CONSTRUCTS key, line, column) for each construct outside instructions that has a minimum PTX version."""
    found = [
        ("section_label", s.line, s.column)
        for item in module.items
        if isinstance(item, ast.Section)
        for s in ast.expanded(item.body.statements)
        if isinstance(s, ast.Label)
    ]
    for node in statements(module):
        if isinstance(node, ast.Declaration) and any(isinstance(n, ast.Mask) for n in ast.walk(node)):
            found.append(("mask_initializer", node.line, node.column))
        if isinstance(node, ast.Declaration) and node.has(".b128"):
            found.append(("b128_declaration", node.line, node.column))
        elif isinstance(node, ast.Directive) and node.word == ".loc":
            if any(g and isinstance(g[0], ast.Name) and g[0].text == "inlined_at" for g in node.args):
                found.append(("inlined_at", node.line, node.column))
    return found


def _unknown_words(module: ast.Module) -> list[Diagnostic]:
    """Directives and declaration attributes that no PTX has (ptxas rejects them; the parser keeps them)."""
    out = []

    def check(node, words, allowed: frozenset[str], what: str) -> None:
        out.extend(_problem(node.line, node.column, f"unknown {what} '{w}'") for w in words if w not in allowed)

    for node in statements(module):
        if isinstance(node, ast.Directive):
            check(node, (node.word,), STATEMENT_DIRECTIVES, "directive")
        elif isinstance(node, ast.Declaration):
            check(node, (a.word for a in node.attributes), ATTRIBUTE_WORDS, "directive")
        elif isinstance(node, ast.CallPrototype):
            check(node, (d.word for d in node.directives), FUNCTION_DIRECTIVES, "directive")
        elif isinstance(node, ast.Function):
            check(node, (a.word for a in node.attributes + node.kind_attributes), ATTRIBUTE_WORDS, "directive")
            for d in node.directives:
                check(d, (d.word,), FUNCTION_DIRECTIVES, "directive")
    return out


def check_module(module: ast.Module) -> list[Diagnostic]:
    """Every legality problem in a module, in source order; only unknown directives when `.version` or `.target`
    is missing."""
    unknown = _unknown_words(module)
    ptx = version(module.version or "")
    targets = tuple(t for t in map(Target.parse, module.targets) if t is not None)
    if ptx is None or not targets:
        return unknown
    problems = unknown + _target_problems(module, ptx, targets)
    for key, line, column in _constructs(module):
        feature = isa.CONSTRUCTS[key]
        if not isa.satisfied(feature.needs, ptx, targets):
            problems.append(_problem(line, column, explain(feature.name, feature.needs, ptx, targets)))
    said: dict[tuple, list[str]] = {}
    for function in module.functions:
        for directive in function.directives:
            feature = isa.DIRECTIVES.get(directive.word)
            if feature and not isa.satisfied(feature.needs, ptx, targets):
                what = f"directive '{directive.word}' on '{function.name}'"
                problems.append(_problem(function.line, function.column, explain(what, feature.needs, ptx, targets)))
        if function.body is not None:
            for i in ast.instructions(function.body):
                key = _spelling(i)
                if key not in said:
                    said[key] = _instruction_problems(i, ptx, targets)
                problems.extend(_problem(i.line, i.column, message) for message in said[key])
    return sorted(problems, key=lambda p: (p.location.line, p.location.column))


def check_source(source: Source, module: ast.Module) -> list[Diagnostic]:
    """The problems of a parsed source, each at its path with its source line for a caret."""
    lines = source.text.splitlines()

    def located(p: Diagnostic) -> Diagnostic:
        n = p.location.line
        quoted = lines[n - 1] if 0 < n <= len(lines) else ""
        return replace(p, location=replace(p.location, path=source.display, source=quoted))

    return [located(p) for p in check_module(module)]

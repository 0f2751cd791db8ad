"""What a rule sees of one file: the parsed module, the rule's options, analyses computed once per function and
shared between rules, and the ptxas warnings the service collected (rules never run tools themselves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ptxtool.syntax import ast

if TYPE_CHECKING:
    from ptxtool.analysis.cfg import CFG
    from ptxtool.analysis.loops import Loop
    from ptxtool.analysis.memory import MemoryFacts
    from ptxtool.toolchain.resources import FunctionResources, ToolWarning


@dataclass
class Context:
    """One file being linted. `options` is the current rule's settings (defaults merged with the config)."""

    module: ast.Module
    ptxas_warnings: list[ToolWarning] | None = None
    ptxas_functions: dict[str, FunctionResources] | None = None  # ptxas -v per function, beside its warnings
    options: dict = field(default_factory=dict)
    _cfgs: dict[str, CFG] = field(default_factory=dict)
    _memory: dict[str, MemoryFacts] = field(default_factory=dict)

    def bodies(self) -> list[ast.Function]:
        """The functions (kernels and .func) that have a body."""
        return [f for f in self.module.functions if f.body is not None]

    def cfg(self, function: ast.Function) -> CFG:
        from ptxtool.analysis.cfg import build_cfg

        if function.name not in self._cfgs:
            self._cfgs[function.name] = build_cfg(function)
        return self._cfgs[function.name]

    def loops(self, function: ast.Function) -> tuple[Loop, ...]:
        return self.cfg(function).loops

    def memory(self, function: ast.Function) -> MemoryFacts:
        from ptxtool.analysis.memory import memory_facts

        if function.name not in self._memory:
            self._memory[function.name] = memory_facts(self.module, function, self.cfg(function))
        return self._memory[function.name]

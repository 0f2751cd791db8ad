"""The rule modules, one per rule or family; importing this package registers them all."""

from ptxtool.lint.rules import barriers, caching, legality, local_memory, polling, ptxas, setmaxnreg

__all__ = ["barriers", "caching", "legality", "local_memory", "polling", "ptxas", "setmaxnreg"]

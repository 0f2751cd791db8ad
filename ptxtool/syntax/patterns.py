"""Regular expressions compiled once and kept between runs.

Python compiles a pattern with a compiler written in Python: the lexer's master pattern (every terminal of the
grammar) and the whole-line patterns take about 10 ms to compile, on every run, as long as parsing a thousand lines
does. What `re` makes of a pattern (the program the `_sre` engine runs, with its group names) is kept in the cache
directory, as records keeps its code, and checked on load: the same pattern text, flags and Python. Anything missing,
stale or unreadable is compiled by `re` as usual (and kept for next time); where `re`'s internals differ from those
of the Pythons this was written for (3.11 to 3.13), every pattern is simply compiled by `re`.
"""

from __future__ import annotations

import marshal
import os
import re
import sys

from ptxtool.cache import cache_directory

_known: dict[tuple[str, int], re.Pattern[str]] = {}
_kept: dict[tuple[str, int], tuple] | None = None  # the cache file's programs, read on first use


def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, from the programs kept by an earlier run when there are some."""
    key = (pattern, int(flags))
    found = _known.get(key)
    if found is None:
        found = _known[key] = _from_kept(key) or _compile_and_keep(key)
    return found


def _path() -> str | None:
    directory, why = cache_directory()
    if directory is None or why is not None:
        return None
    return os.path.join(directory, f"patterns-{sys.implementation.cache_tag}.marshal")


def _read() -> dict[tuple[str, int], tuple]:
    path = _path()
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            version, programs = marshal.loads(f.read())
        return programs if version == sys.version and isinstance(programs, dict) else {}
    except Exception:  # noqa: BLE001 - missing, unreadable, from another version: compiled again and rewritten
        return {}


def _from_kept(key: tuple[str, int]) -> re.Pattern[str] | None:
    global _kept
    if _kept is None:
        _kept = _read()
    program = _kept.get(key)
    if program is None:
        return None
    try:
        import _sre

        return _sre.compile(key[0], *program)  # the engine checks the program it is given ("invalid SRE code")
    except Exception:  # noqa: BLE001 - damaged or from other internals: compiled by `re`
        return None


def _program(pattern: str, flags: int) -> tuple | None:
    """What `re._compiler.compile` hands to `_sre.compile` after the pattern text, as plain data; None where `re`'s
    internals are not the ones this reads."""
    try:
        from re import _compiler, _parser

        parsed = _parser.parse(pattern, flags)
        code = [int(c) for c in _compiler._code(parsed, flags)]
        state = parsed.state
        index = [None] * state.groups
        for name, number in state.groupdict.items():
            index[number] = name
        return int(flags | state.flags), code, state.groups - 1, dict(state.groupdict), tuple(index)
    except Exception:  # noqa: BLE001 - other internals: `re` alone
        return None


def _compile_and_keep(key: tuple[str, int]) -> re.Pattern[str]:
    """`re.compile`'s pattern; its program kept for next time, when there is a cache and `re`'s internals give what
    `re` itself made."""
    made = re.compile(*key)
    path = _path()
    program = _program(*key) if path is not None and _kept is not None else None
    if program is not None and program[0] == made.flags and program[3] == made.groupindex:
        _kept[key] = program
        _write(path, _kept)
    return made


def _write(path: str, programs: dict[tuple[str, int], tuple]) -> None:
    import tempfile  # only here: a run that finds its programs never needs it

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".patterns-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps((sys.version, programs)))
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the patterns still work, they are only compiled again next time
        pass

"""The one settings loader: `[tool.ptxtool.<section>]` from the nearest pyproject.toml, every section and key
checked here against one schema, so that a typo, a wrong type or an impossible value is exit 2 naming the file and
the key. Flags override what this returns; what neither gives is the service's default."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptxtool.errors import InputError
from ptxtool.isa.targets import MAX_BLOCK_THREADS
from ptxtool.syntax.names import TARGET


def find_pyproject(start: Path | None = None) -> Path | None:
    """The pyproject.toml in `start` (default: the working directory) or the closest directory above it."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        try:
            if candidate.is_file():
                return candidate
        except OSError as error:  # a directory this user may not look into: its settings cannot be known
            raise InputError.at(str(candidate), f"cannot read: {error.strerror or error}") from None
    return None


def read_toml(path: Path) -> dict:
    """A TOML file as a dict; InputError at the offending line when it is not valid TOML."""
    try:
        data = path.read_bytes()
        return tomllib.loads(data.decode("utf-8"))
    except OSError as error:
        raise InputError.at(str(path), f"cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError.at(str(path), "not valid TOML: not UTF-8 text", line) from None
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        line = int(message.rsplit("line ", 1)[1].split(",")[0]) if "(at line " in message else 0
        raise InputError.at(str(path), f"not valid TOML: {message.split(' (at line')[0]}", line) from None


def _root(data: dict, where: str) -> dict:
    """`[tool.ptxtool]` of a parsed pyproject.toml ({} when it has none)."""
    table, names = data, ["tool", "ptxtool"]
    for depth, name in enumerate(names, 1):
        table = table.get(name, {})
        if not isinstance(table, dict):
            raise InputError.at(where, f"[{'.'.join(names[:depth])}] must be a table")
    return table


# ---------------------------------------------------------------- the schema


@dataclass(frozen=True, slots=True)
class Key:
    """One setting: what its value must be (said in errors) and the test a value must pass."""

    wanted: str
    good: Callable[[Any], bool]


def _target(v: Any) -> bool:
    return isinstance(v, str) and TARGET.fullmatch(v) is not None


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _policy(v: Any) -> bool:
    """`true`/`false`, or a table `{enabled = true/false, include = [globs], exclude = [globs]}`."""
    if isinstance(v, bool):
        return True
    if not isinstance(v, dict) or not set(v) <= {"enabled", "include", "exclude"}:
        return False
    return isinstance(v.get("enabled", True), bool) and all(_strings(v[k]) for k in ("include", "exclude") if k in v)


TARGET_KEY = Key('a target such as "sm_90a"', _target)
PATH_KEY = Key("a path (string)", lambda v: isinstance(v, str))
GLOBS_KEY = Key("a list of kernel names or globs", _strings)
POLICY_KEY = Key("true, false or a table {enabled = true/false, include = [...], exclude = [...]}", _policy)

# [tool.ptxtool.optimize]: the cache-operators pass's policies and hints (passes/cache_operators.py: POLICIES,
# STORE_HINTS; tests/test_config.py holds them to these). Pass names are checked against the registry by the service.
_OPTIMIZE = {
    "passes": Key("a list of pass names", _strings),
    "noalias": GLOBS_KEY,
    "include": GLOBS_KEY,
    "exclude": GLOBS_KEY,
    "store_hint": Key('"cs" or "L1::no_allocate"', lambda v: v in ("cs", "L1::no_allocate")),
    **dict.fromkeys(("readonly", "streaming", "stores", "l2_evict_first", "unsafe_volatile_nc"), POLICY_KEY),
}

# [tool.ptxtool.tune]: the keys of a tune space, the same as in a launch spec's [tune] table and a --space file,
# whose values services/tuning/space.py checks for all three (tests/test_tune.py holds these names to its KEYS).
_TUNE = (
    *("block", "grid", "args", "cache_operators", "registers", "warp_roles", "noalias", "generators", "combine"),
    *("max_candidates", "prune"),
    *("objective", "neighbour_mib", "budget_s", "gpus", "launches", "min_rounds", "warmup", "confidence"),
    *("min_gain", "kernel_slack"),
)
TUNE_KEY = Key("a tune setting (docs/tune.md); its value is checked by `ptxtool tune`", lambda v: True)

# section -> key -> what it must be
SECTIONS: dict[str, dict[str, Key]] = {
    "inspect": {
        "arch": TARGET_KEY,
        "block-size": Key(
            f"an integer from 1 to {MAX_BLOCK_THREADS}", lambda v: type(v) is int and 1 <= v <= MAX_BLOCK_THREADS
        ),
        "backend": Key('"ptxas" or "nvjitlink"', lambda v: v in ("ptxas", "nvjitlink")),
        "budget": PATH_KEY,
        "baseline": PATH_KEY,
    },
    "lint": {
        "select": Key("a list of rule ids or names", _strings),
        "ignore": Key("a list of rule ids or names", _strings),
        "ptxas": Key("true or false", lambda v: isinstance(v, bool)),
        "require-nvcc": Key("true or false", lambda v: isinstance(v, bool)),
        "arch": Key('a GPU target such as "sm_90a"', _target),
        "fail-on": Key('"error", "warning" or "note"', lambda v: v in ("error", "warning", "note")),
    },
    "optimize": _OPTIMIZE | {key.replace("_", "-"): rule for key, rule in _OPTIMIZE.items()},  # either spelling
    "tune": dict.fromkeys(_TUNE + tuple(key.replace("_", "-") for key in _TUNE), TUNE_KEY),  # either spelling
}
# sections that may also hold sub-tables, checked by their command (lint: per-rule options, by the rule registry)
SUBTABLES = {"lint"}


@dataclass(frozen=True)
class Table:
    """One command's checked table and the pyproject.toml it came from (None: there is none)."""

    path: Path | None = None
    table: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        return str(self.path or "pyproject.toml")

    def get(self, key: str, default: Any = None) -> Any:
        return self.table.get(key, default)

    def pick(self, flag: Any, key: str, default: Any = None) -> Any:
        """A flag when given, else this table's value, else the default: flags over settings over defaults."""
        return flag if flag is not None else self.table.get(key, default)

    def path_value(self, key: str) -> str | None:
        """A path setting, read relative to the pyproject.toml that holds it (as users write them)."""
        value = self.table.get(key)
        if value is None or self.path is None or Path(value).is_absolute():
            return value
        return str(self.path.parent / value)


def load(section: str, start: Path | None = None) -> Table:
    """`[tool.ptxtool.<section>]` checked against SECTIONS, and the whole `[tool.ptxtool]` for unknown sections."""
    path = find_pyproject(start)
    if path is None:
        return Table()
    where = str(path)
    root = _root(read_toml(path), where)
    for name, value in root.items():
        if name not in SECTIONS:
            known = ", ".join(SECTIONS)
            raise InputError.at(where, f"[tool.ptxtool]: unknown section or key {name!r} (sections: {known})")
        if not isinstance(value, dict):
            raise InputError.at(where, f"[tool.ptxtool.{name}] must be a table")
    table = root.get(section, {})
    schema = SECTIONS[section]
    for key, value in table.items():
        rule = schema.get(key)
        if rule is None and section in SUBTABLES:  # a rule's table, or a typo only the rule registry can name
            continue
        if rule is None:
            raise InputError.at(where, f"[tool.ptxtool.{section}]: unknown key {key!r} (keys: {', '.join(schema)})")
        if not rule.good(value):
            raise InputError.at(where, f"[tool.ptxtool.{section}]: {key} must be {rule.wanted}; got {value!r}")
    return Table(path, table)

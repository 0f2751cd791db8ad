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


def tool_config(section: str | None = None, start: Path | None = None) -> dict:
    """`[tool.ptxtool]`, or its sub-table `[tool.ptxtool.<section>]`, from the nearest pyproject.toml; {} if none.
    Unchecked: commands read their settings through `load`."""
    path = find_pyproject(start)
    return {} if path is None else _table(read_toml(path), str(path), section)


def _table(data: dict, where: str, section: str | None) -> dict:
    table, names = data, ["tool", "ptxtool", *([section] if section is not None else [])]
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


TARGET_KEY = Key('a target such as "sm_90a"', _target)
PATH_KEY = Key("a path (string)", lambda v: isinstance(v, str))

# section -> key -> what it must be. None: the section is checked by its own command (optimize, whose settings the
# optimize service reads with `settings_from_config(table, where)`; tune, whose keys are those of a tune space and
# are read with `tuning.space.read_layer(space, table, where)`, like the spec's `[tune]` and `--space`).
SECTIONS: dict[str, dict[str, Key] | None] = {
    "inspect": {
        "arch": TARGET_KEY,
        "block-size": Key("an integer from 1 to 1024", lambda v: type(v) is int and 1 <= v <= 1024),
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
    "optimize": None,
    "tune": None,
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
    root = _table(read_toml(path), where, None)
    for name, value in root.items():
        if name not in SECTIONS:
            known = ", ".join(SECTIONS)
            raise InputError.at(where, f"[tool.ptxtool]: unknown section or key {name!r} (sections: {known})")
        if not isinstance(value, dict):
            raise InputError.at(where, f"[tool.ptxtool.{name}] must be a table")
    table = root.get(section, {})
    schema = SECTIONS[section]
    for key, value in table.items() if schema is not None else ():
        rule = schema.get(key)
        if rule is None and section in SUBTABLES:  # a rule's table, or a typo only the rule registry can name
            continue
        if rule is None:
            raise InputError.at(where, f"[tool.ptxtool.{section}]: unknown key {key!r} (keys: {', '.join(schema)})")
        if not rule.good(value):
            raise InputError.at(where, f"[tool.ptxtool.{section}]: {key} must be {rule.wanted}; got {value!r}")
    return Table(path, table)

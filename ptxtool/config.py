"""`[tool.ptxtool]` settings from the nearest pyproject.toml, for every command to read its own table from."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ptxtool.errors import InputError


def find_pyproject(start: Path | None = None) -> Path | None:
    """The pyproject.toml in `start` (default: the working directory) or the closest directory above it."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
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
    """`[tool.ptxtool]`, or its sub-table `[tool.ptxtool.<section>]`, from the nearest pyproject.toml; {} if none."""
    path = find_pyproject(start)
    if path is None:
        return {}
    table, names = read_toml(path), ["tool", "ptxtool", *([section] if section is not None else [])]
    for depth, name in enumerate(names, 1):
        table = table.get(name, {})
        if not isinstance(table, dict):
            raise InputError.at(str(path), f"[{'.'.join(names[:depth])}] must be a table")
    return table


def config_path(value: str | None, start: Path | None = None) -> str | None:
    """A path setting from the config, read relative to the pyproject.toml that holds it (as users write them)."""
    if value is None:
        return None
    pyproject = find_pyproject(start)
    return str(pyproject.parent / value) if pyproject and not Path(value).is_absolute() else value

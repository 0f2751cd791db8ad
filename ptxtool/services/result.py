"""What every service returns: a typed value that knows its exit code and its JSON form; report/ renders it."""

from __future__ import annotations

from typing import Protocol


class Result(Protocol):
    """A command's outcome. `exit_code` follows the table in docs/cli.md; `to_data()` is its `--json` document."""

    @property
    def exit_code(self) -> int: ...

    def to_data(self) -> dict: ...

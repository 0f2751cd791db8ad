"""Where ptxtool keeps what it can rebuild (cubins, SASS, parser tables): one rule for every cache.

`$PTXTOOL_CACHE_DIR` (`off`: no cache), else `$XDG_CACHE_HOME/ptxtool`, else `~/.cache/ptxtool` — but only under a
home directory that exists: a user without a home (HOME=/nonexistent in containers and CI) gets no cache, and ptxtool
never creates a home directory, even as root.
"""

from __future__ import annotations

import os
from pathlib import Path

OFF = "off"


def cache_location() -> tuple[Path | None, str | None]:
    """The cache directory and, when it must not be used, why (None and None: the user turned the cache off)."""
    setting = os.environ.get("PTXTOOL_CACHE_DIR")
    if setting == OFF:
        return None, None
    if setting:
        return Path(setting), None
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "ptxtool", None
    try:
        home = Path.home()
    except RuntimeError:  # no $HOME and no home in the password database
        return None, "no home directory"
    directory = home / ".cache" / "ptxtool"
    return directory, None if home.is_dir() else f"no home directory: {home} does not exist"

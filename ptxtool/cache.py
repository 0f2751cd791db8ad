"""Where ptxtool keeps what it can rebuild (cubins, SASS, parser tables): one rule for every cache.

`$PTXTOOL_CACHE_DIR` (`off`: no cache), else `$XDG_CACHE_HOME/ptxtool`, else `~/.cache/ptxtool` — but only under a
home directory that exists: a user without a home (HOME=/nonexistent in containers and CI) gets no cache, and ptxtool
never creates a home directory, even as root.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:
    from pathlib import Path

OFF = "off"


def cache_directory() -> tuple[str | None, str | None]:
    """The cache directory and, when it must not be used, why (None and None: the user turned the cache off), as a
    string: the parser's caches read it on every run, which then never imports pathlib (start-up)."""
    setting = os.environ.get("PTXTOOL_CACHE_DIR")
    if setting == OFF:
        return None, None
    if setting:
        return setting, None
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "ptxtool"), None
    home = os.path.expanduser("~")  # what Path.home() reads
    if home.startswith("~"):  # no $HOME and no home in the password database
        return None, "no home directory"
    directory = os.path.join(home, ".cache", "ptxtool")
    return directory, None if os.path.isdir(home) else f"no home directory: {home} does not exist"


def checksum(text: str) -> str:
    """Sixteen hex digits of `text`, the same in every run (unlike a string's hash, which is salted per process):
    the hash of its bytes read as one integer, a C pass over them (20 µs for 16 k characters). It names cache
    files without loading zlib, an extension module a `fmt` run otherwise never needs."""
    return f"{hash(int.from_bytes(text.encode(), 'little')):016x}"


def cache_location() -> tuple[Path | None, str | None]:
    """`cache_directory()` as a Path."""
    from pathlib import Path

    directory, why = cache_directory()
    return (Path(directory) if directory is not None else None), why

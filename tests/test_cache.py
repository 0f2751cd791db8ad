"""The cache's rules: where it lives, and the names its files get."""

from __future__ import annotations

from ptxtool.cache import checksum


def test_a_checksum_is_fnv_1a_so_the_same_in_every_run_and_every_python() -> None:
    assert checksum("") == "811c9dc5" and checksum("a") == "e40c292c" and checksum("foobar") == "bf9cf968"
    assert checksum("/site-packages/ptxtool") != checksum("/site-packages/ptxtool2")

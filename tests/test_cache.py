"""The cache's rules: where it lives, and the names its files get."""

from __future__ import annotations

import subprocess
import sys

from ptxtool.cache import checksum

KEYS = ("", "a", "/site-packages/ptxtool", "/site-packages/ptxtool2", "é" * 16_000)


def test_a_checksum_names_each_key_apart_in_sixteen_hex_digits() -> None:
    sums = [checksum(k) for k in KEYS]
    assert len(set(sums)) == len(KEYS)
    assert all(len(s) == 16 and int(s, 16) >= 0 for s in sums)


def test_a_checksum_is_the_same_in_every_process_whatever_its_hash_seed() -> None:
    """A cache file found again by the next run: no per-process salt (str's hash has one)."""
    script = f"from ptxtool.cache import checksum; print([checksum(k) for k in {KEYS!r}])"
    runs = {
        subprocess.run(
            [sys.executable, "-c", script], env={"PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True
        ).stdout
        for seed in ("1", "2", "random")
    }
    assert runs == {f"{[checksum(k) for k in KEYS]}\n"}

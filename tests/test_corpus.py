"""The real-PTX corpus travels with the repository, so tests parametrized over it never shrink to nothing."""

from __future__ import annotations

from conftest import CORPUS, ptx_files


def test_the_corpus_is_in_the_repository() -> None:
    files = ptx_files(CORPUS)
    assert len(files) >= 32, f"the real-PTX corpus is missing from {CORPUS}"
    assert {f.parent.name for f in files} >= {"ptx", "triton", "handwritten"}

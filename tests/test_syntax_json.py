"""The JSON form of the AST holds everything: a generic loader rebuilds the same tree from it."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, ptx_files

from ptxtool.syntax import ast, parse
from ptxtool.syntax.serialize import SCHEMA, to_data


def load(data: object) -> object:
    """JSON data back to nodes: dicts by their `node` class, lists to tuples (what a consumer of --json would do)."""
    if isinstance(data, dict):
        cls = getattr(ast, data["node"])
        return cls(**{k: load(v) for k, v in data.items() if k != "node"})
    if isinstance(data, list):
        return tuple(load(v) for v in data)
    return data


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in ptx_files(SAMPLES)])
def test_json_rebuilds_the_same_tree(path) -> None:
    module = parse(path.read_text())
    data = json.loads(json.dumps(to_data(module)))
    assert load(data) == module


def test_json_keeps_positions_comments_and_spelling() -> None:
    module = parse((SAMPLES / "comments.ptx").read_text())
    data = to_data(module)
    function = next(i for i in data["items"] if i["node"] == "Function")
    assert function["leading"] == ["// Leading comment of a kernel."]
    assert (function["line"], function["column"]) == (13, 1)
    first = function["body"]["statements"][0]
    assert first["node"] == "Declaration" and first["line"] > function["line"]
    version = data["items"][0]
    assert version["args"] == [[{"node": "Immediate", "text": "9.0"}]]


def test_schema_names_a_version() -> None:
    assert SCHEMA.startswith("ptxtool.ast/")

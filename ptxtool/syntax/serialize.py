"""The AST as plain JSON-ready data: every node a dict with its class under `"node"`, fields by name."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from ptxtool.syntax.ast import InitList

SCHEMA = "ptxtool.ast/2"  # 2: n-ary Binary (operands, ops), expression offsets, Data for section bodies


def to_data(node: object) -> object:
    """Nodes become dicts, tuples lists; empty comment tuples and zero positions are left out."""
    if is_dataclass(node):
        out: dict[str, object] = {"node": "InitList" if isinstance(node, InitList) else type(node).__name__}
        for f in fields(node):
            value = getattr(node, f.name)
            if value == () and f.name in ("leading", "trailing", "footer"):
                continue
            if f.name in ("line", "column", "end_line", "end_column") and not value:
                continue
            out[f.name] = to_data(value)
        return out
    if isinstance(node, tuple):
        return [to_data(v) for v in node]
    return node

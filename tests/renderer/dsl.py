"""Walking rendered DSL trees in tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Path = tuple[str | int, ...]


def leaves(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf (not a dict, not a list) with its path from the root."""
    if isinstance(node, dict):
        for key in sorted(node):
            yield from leaves(node[key], (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from leaves(item, (*path, index))
    else:
        yield path, node


def skeleton(node: Any) -> Any:
    """The tree of keys with every leaf replaced by its type name."""
    if isinstance(node, dict):
        return {key: skeleton(value) for key, value in node.items()}
    if isinstance(node, list):
        return [skeleton(item) for item in node]
    return type(node).__name__


def nodes(node: Any, path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every dict in the tree, with its path."""
    if isinstance(node, dict):
        yield path, node
        for key in sorted(node):
            yield from nodes(node[key], (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from nodes(item, (*path, index))


def names(node: Any) -> list[tuple[Path, str]]:
    """Every ``_name`` in the tree, with the path of the clause that carries it."""
    return [(path, n["_name"]) for path, n in nodes(node) if isinstance(n.get("_name"), str)]


def replace(node: Any, key: str, placeholder: Any) -> Any:
    """A copy of the tree where every dict holding ``key`` is replaced by ``placeholder``."""
    if isinstance(node, dict):
        if key in node:
            return placeholder
        return {k: replace(v, key, placeholder) for k, v in node.items()}
    if isinstance(node, list):
        return [replace(item, key, placeholder) for item in node]
    return node

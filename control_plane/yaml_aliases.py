"""How far a YAML document's aliases may repeat it: measured on the composed nodes, before
anything is constructed or walked.

An alias (``*name``) stands for the node its anchor (``&name``) names. Ten lines, each an
anchored list of nine aliases to the line before, stand for 9**10 strings (a "billion
laughs"). PyYAML's nodes keep the sharing, but whatever walks them without knowing it
(building the policy, checking duplicate keys, validating the model, writing JSON) repeats
every aliased node: a policy file of 700 bytes took 27 s and 2.2 GB at 9**8 and runs the
machine out of memory at 9**9. Any author who may write a policy, a test file or a console
draft could take a server down that way.

So every YAML text govsearch reads is composed first and measured here (:func:`measure`):
what a walk would visit, each alias counted at its node's full size, memoised per node
(linear in the document, whatever the aliases stand for). What is counted is the walk's
*weight*: one per node plus the characters of each scalar, so an alias to a long string
repeats every character of it (a 100,000-character phrase and 10,000 aliases to it are a
140 KB file standing for a billion characters, in few nodes). A document whose aliases
repeat more than :data:`REPEATED_NODES` of that weight, or more than :data:`REPEATED_RATIO`
times its own when that is larger, is refused, and so is an alias inside the node it names
(a document that never ends when walked). Anchors and merge keys (``<<: *defaults``) used
as authors use them are far inside the bound: a base of 50 nodes merged into 1,000 policies
of one file repeats 50,000 nodes and their characters, in a file ten times as heavy.
"""

from __future__ import annotations

from typing import Any

import yaml

REPEATED_NODES = 100_000
"""weight (nodes and scalar characters) a document's aliases may repeat whatever its size"""
REPEATED_RATIO = 10
"""times its own weight a heavier document's aliases may repeat"""

_OPEN = -1
"""a node being measured: met again below itself, it contains its own alias"""


class AliasError(yaml.MarkedYAMLError):
    """A document whose aliases repeat too much, or refer to a node that contains them; the
    mark is the anchored node's."""


def measure(root: yaml.Node) -> int:
    """The nodes a walk of ``root`` visits (each alias at its node's full size); raises
    :class:`AliasError` when the aliases repeat too much weight (nodes and scalar
    characters, module docstring), or for an alias inside its own node."""
    sizes: dict[int, int] = {}
    weights: dict[int, int] = {}
    """per node: what a walk of it visits, in nodes, and in nodes plus scalar characters"""
    uses: dict[int, int] = {}
    nodes: dict[int, yaml.Node] = {}
    own = 0
    """the document's own weight: each node once"""
    pending: list[tuple[yaml.Node, list[yaml.Node] | None]] = [(root, None)]
    while pending:
        node, children = pending.pop()
        key = id(node)
        if children is not None:  # its children measured: its own sums
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            weights[key] = _weight(node) + sum(weights[id(child)] for child in children)
            continue
        if key in sizes:
            if sizes[key] == _OPEN:
                raise _recursive(node)
            continue
        sizes[key] = _OPEN
        nodes[key] = node
        own += _weight(node)
        children = _children(node)
        pending.append((node, children))
        for child in children:
            child_key = id(child)
            uses[child_key] = uses.get(child_key, 0) + 1
            if sizes.get(child_key) == _OPEN:
                raise _recursive(child)
            pending.append((child, None))
    walked = weights[id(root)]
    bound = max(REPEATED_NODES, REPEATED_RATIO * own)
    if walked - own > bound:
        key = max((k for k, n in uses.items() if n > 1), key=lambda k: weights[k] * (uses[k] - 1))
        anchored = nodes[key]
        raise AliasError(
            problem=f"aliases repeat {walked - own:,} nodes and characters of this document (it"
            f" has {own:,}; at most {bound:,} may be repeated): the node anchored here"
            f" ({sizes[key]:,} nodes, {weights[key] - sizes[key]:,} characters when walked)"
            f" appears {uses[key]} times",
            problem_mark=anchored.start_mark,
        )
    return sizes[id(root)]


class NestingError(yaml.YAMLError):
    """A document nested deeper than PyYAML's recursive composer can go: a ``YAMLError``
    every reader already reports, not a ``RecursionError`` out of it."""

    def __init__(self) -> None:
        super().__init__("the YAML is nested too deeply")


def compose(text: str) -> yaml.Node | None:
    """``yaml.compose(text)`` (one document), measured."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise NestingError() from None
    finally:
        loader.dispose()
    if node is not None:
        measure(node)
    return node


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``: the same value, the same errors, :class:`AliasError` for a
    document its aliases would blow up and :class:`NestingError` for one nested too deeply."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        measure(node)
        return loader.construct_document(node)
    except RecursionError:
        raise NestingError() from None
    finally:
        loader.dispose()


def safe_load_all(text: str) -> list[Any]:
    """``list(yaml.safe_load_all(text))``, each document measured before it is built (the
    errors of :func:`safe_load`)."""
    loader = yaml.SafeLoader(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:  # (check_node said there is one)
                measure(node)
                documents.append(loader.construct_document(node))
        return documents
    except RecursionError:
        raise NestingError() from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _weight(node: yaml.Node) -> int:
    """One node, and its characters when it is a scalar."""
    return 1 + len(node.value) if isinstance(node, yaml.ScalarNode) else 1


def _recursive(node: yaml.Node) -> AliasError:
    return AliasError(
        problem="an alias inside the node it names: the document would never end",
        problem_mark=node.start_mark,
    )

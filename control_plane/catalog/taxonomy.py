"""The category taxonomy and the deterministic rules that place a product in it.

``data/category_rules.yaml`` holds a tree of category names (each node may carry a base
price and margin for the economics model, and the Open Food Facts tags that mean it) and
an ordered list of text rules. :meth:`Taxonomy.classify` decides, in this order:

1. **Tags.** Each ``en:`` category tag is humanised (``en:dark-chocolates`` ->
   ``Dark chocolates``) and looked up among node names (case-insensitive); a node's
   ``off_tags`` also claim tags explicitly (any language). Among the nodes found, the
   deepest wins; equal depth goes to the node declared first in the file.
2. **Text rules.** The first rule whose regular expression matches the folded title and
   generic name (lowercase, no accents) names a node. A tagged product takes the rule's
   node only when it refines the tag's node (is a strict descendant of it).
3. **Other.** A product nothing matched goes to the ``other`` bucket.

The result is always a full path from the top-level node to the chosen one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from control_plane import yaml_aliases
from control_plane.catalog.text import fold

ClassificationSource = Literal["tags", "tags+rule", "rule", "other"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Node(_Frozen):
    name: str = Field(min_length=1)
    base_price: float | None = Field(default=None, gt=0)
    base_margin: float | None = Field(default=None, ge=0, le=1)
    off_tags: tuple[str, ...] = ()
    children: tuple[Node, ...] = ()


class TextRule(_Frozen):
    category: str
    match: str
    note: str | None = None


class OtherBucket(_Frozen):
    name: str = "Other"
    base_price: float = Field(gt=0)
    base_margin: float = Field(ge=0, le=1)


class CategoryRules(_Frozen):
    """The YAML file as written."""

    version: int = 1
    other: OtherBucket
    taxonomy: tuple[Node, ...] = Field(min_length=1)
    rules: tuple[TextRule, ...] = ()


class Classification(_Frozen):
    path: tuple[str, ...]
    source: ClassificationSource
    rule: int | None = None
    """index of the text rule that decided, when one did"""


class CategoryRulesError(ValueError):
    """Every problem found in a category rules file, in file order."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


def humanise_tag(tag: str) -> str:
    """``en:dark-chocolates`` -> ``Dark chocolates``."""
    bare = tag.split(":", 1)[-1].replace("-", " ").strip()
    return bare[:1].upper() + bare[1:]


class Taxonomy:
    """A compiled :class:`CategoryRules`: paths, economics bases, tag index, rules."""

    def __init__(self, rules: CategoryRules, source: str = "<category rules>") -> None:
        problems: list[str] = []
        self.other = rules.other
        self.paths: dict[str, tuple[str, ...]] = {}
        self.order: dict[str, int] = {}
        self.base_price: dict[str, float] = {}
        self.base_margin: dict[str, float] = {}
        self._by_key: dict[str, str] = {}
        self._tags: dict[str, str] = {}
        for node in rules.taxonomy:
            if node.base_price is None or node.base_margin is None:
                problems.append(f"top-level {node.name!r} needs base_price and base_margin")
            self._add(node, (), 0.0, 0.0, problems)
        if fold(rules.other.name) in self._by_key:
            problems.append(f"the other bucket {rules.other.name!r} is also a taxonomy node")
        self.rules: list[tuple[re.Pattern[str], str]] = []
        for index, rule in enumerate(rules.rules):
            if rule.category not in self.paths:
                problems.append(f"rule {index} names unknown category {rule.category!r}")
            try:
                self.rules.append((re.compile(rule.match), rule.category))
            except re.error as exc:
                problems.append(f"rule {index} ({rule.category}): bad regular expression: {exc}")
        if problems:
            raise CategoryRulesError(source, problems)

    def _add(
        self, node: Node, parent: tuple[str, ...], price: float, margin: float, problems: list[str]
    ) -> None:
        key = fold(node.name)
        if key in self._by_key:
            problems.append(f"category {node.name!r} is declared twice")
            return
        path = (*parent, node.name)
        self._by_key[key] = node.name
        self.paths[node.name] = path
        self.order[node.name] = len(self.order)
        self.base_price[node.name] = node.base_price or price
        self.base_margin[node.name] = node.base_margin if node.base_margin is not None else margin
        for tag in node.off_tags:
            if tag in self._tags:
                problems.append(f"tag {tag!r} claimed by {self._tags[tag]!r} and {node.name!r}")
            self._tags[tag] = node.name
        for child in node.children:
            price, margin = self.base_price[node.name], self.base_margin[node.name]
            self._add(child, path, price, margin, problems)

    def node_for_tag(self, tag: str) -> str | None:
        """The node a category tag means, if any (explicit ``off_tags`` first)."""
        if tag in self._tags:
            return self._tags[tag]
        if tag.startswith("en:"):
            return self._by_key.get(fold(humanise_tag(tag)))
        return None

    def match_rules(self, text: str) -> tuple[int, str] | None:
        """(index, category) of the first rule matching the folded text."""
        folded = fold(text).strip()
        for index, (pattern, category) in enumerate(self.rules):
            if pattern.search(folded):
                return index, category
        return None

    def classify(self, tags: list[str], title: str, generic_name: str = "") -> Classification:
        """Place one product (see the module docstring for the order)."""
        found = [name for name in (self.node_for_tag(t) for t in tags) if name is not None]
        tagged = min(found, key=lambda n: (-len(self.paths[n]), self.order[n])) if found else None
        matched = self.match_rules(f"{title} {generic_name}")
        if tagged is not None:
            if matched is not None and self.refines(matched[1], tagged):
                index, refined = matched
                return Classification(path=self.paths[refined], source="tags+rule", rule=index)
            return Classification(path=self.paths[tagged], source="tags")
        if matched is not None:
            return Classification(path=self.paths[matched[1]], source="rule", rule=matched[0])
        return Classification(path=(self.other.name,), source="other")

    def refines(self, name: str, ancestor: str) -> bool:
        """True when ``name`` is a strict descendant of ``ancestor``."""
        path, parent = self.paths[name], self.paths[ancestor]
        return len(path) > len(parent) and path[: len(parent)] == parent

    def economics_base(self, category: str) -> tuple[float, float]:
        """(base price, base margin) of a category, inherited from its ancestors."""
        if category == self.other.name:
            return self.other.base_price, self.other.base_margin
        return self.base_price[category], self.base_margin[category]


def load_taxonomy(path: Path) -> Taxonomy:
    """Read, validate and compile a category rules file; all problems in one error."""
    try:
        raw: Any = yaml_aliases.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CategoryRulesError(str(path), [str(exc)]) from exc
    try:
        rules = CategoryRules.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise CategoryRulesError(str(path), problems) from exc
    return Taxonomy(rules, str(path))

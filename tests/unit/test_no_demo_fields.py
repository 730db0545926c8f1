"""Nothing in ``control_plane`` knows the demo catalog: field roles come from the profile.

Every string literal of the product (docstrings and comments aside) is compared with the
demo mapping's field names. Generic words that are also the product's own vocabulary
(rule kinds, request fields, JSON keys) are not demo field names; a few literals equal to
a demo field name are the product's own words and are listed here with the reason.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from control_plane.catalog.profile import mapping_fields

ROOT = Path(__file__).resolve().parents[2]

GENERIC = {
    "id": "policy, vocabulary and document ids",
    "title": "policy titles, the plan's title route, JSON-schema titles",
    "text": "span and engine text keys",
    "market": "the request's market",
    "category": "the category rule kind",
    "brand": "a facet name",
    "language": "the request's language",
    "source": "engine _source",
}
"""demo field names that are also the product's own words"""

OWN_WORDS = {
    ("control_plane/policy.py", "price"): "the price rule kind",
    ("control_plane/lifecycle/lint.py", "price"): "the price rule kind, in a finding location",
    ("control_plane/lifecycle/lint_facts.py", "price"): "the price rule kind, in a finding location",
    ("control_plane/composer_price.py", "price"): "the plan's price decision",
    ("control_plane/executor.py", "price"): "the price facet's name",
    ("control_plane/api/answer.py", "price"): "the answer's price field (HitOut): the profile's price role",
    ("control_plane/renderer.py", "price"): "the price constraint's and facet's names",
    ("control_plane/renderer.py", "margin"): "the economics signal's name (field from the profile)",
    ("control_plane/renderer.py", "popularity"): "the economics signal's name (field from the profile)",
    ("control_plane/templates/facets.json.j2", "price"): "the price facet's name",
}
"""(file, literal) -> why the literal is not a catalog field name there"""

DEMO_CATALOG = {
    "control_plane/catalog/profile.py": "the role names themselves",
}
"""files that may name the demo catalog's fields: the profile model; the demo catalog's
derivation from Open Food Facts (every other module of control_plane/catalog/) builds the
demo data and is the demo"""


def _demo_fields() -> set[str]:
    body = json.loads((ROOT / "mappings/catalog.json").read_text(encoding="utf-8"))
    return set(mapping_fields(body)) - set(GENERIC)


def _is_demo_module(name: str) -> bool:
    return name in DEMO_CATALOG or (
        name.startswith("control_plane/catalog/") and not name.endswith(("/stats.py", "/__init__.py"))
    )


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _offenders() -> list[str]:
    fields = _demo_fields()
    found = []
    for path in sorted((ROOT / "control_plane").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if _is_demo_module(name):
            continue
        for line, value in _literals(path):
            if value in fields and (name, value) not in OWN_WORDS:
                found.append(f"{name}:{line}: {value!r}")
    for path in sorted((ROOT / "control_plane/templates").glob("*.j2")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        for field in fields:
            if f'"{field}"' in text and (name, field) not in OWN_WORDS:
                found.append(f"{name}: {field!r}")
    return found


def test_control_plane_names_no_demo_field() -> None:
    assert _offenders() == []


def test_the_check_sees_a_demo_field(tmp_path: Path) -> None:
    source = tmp_path / "rogue.py"
    source.write_text('"""in_stock in a docstring is fine"""\nFIELD = "in_stock"\n', encoding="utf-8")
    assert _literals(source) == [(2, "in_stock")]
    assert {"categories", "in_stock", "margin", "price", "visible"} <= _demo_fields()


def test_every_exception_is_still_needed() -> None:
    fields = _demo_fields()
    for (name, value), why in OWN_WORDS.items():
        assert value in fields, why
        path = ROOT / name
        named = f'"{value}"' in path.read_text(encoding="utf-8") if name.endswith(".j2") else (
            value in {v for _, v in _literals(path)}
        )
        assert named, f"{name} no longer names {value!r}"

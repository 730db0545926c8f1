"""The catalog profile the goldens are rendered with, and the cases.

The profile is spelled out here (it mirrors mappings/catalog.profile.yaml) so that the
goldens change only when the renderer does; test_profile.py renders against the real demo
profile and mapping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from control_plane.catalog.profile import CatalogProfile
from control_plane.plan import Plan

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
REPO = HERE.parent.parent

PROFILE = CatalogProfile.model_validate(
    {
        "name": "renderer-tests",
        "alias": "catalog",
        "mapping": REPO / "mappings" / "catalog.json",
        "id": "id",
        "title": "title",
        "title_phrase": "title",
        "fulltext": [
            {"field": "title", "weight": 3},
            {"field": "title.en", "weight": 1},
            {"field": "title.fr", "weight": 1},
            {"field": "brand.text", "weight": 2},
            {"field": "text", "weight": 1},
        ],
        "price": "price",
        "category": "categories",
        "category_leaf": "category",
        "brand": "brand",
        "margin": "margin",
        "popularity": "popularity",
        "availability": "in_stock",
        "visibility": "visible",
        "market": "market",
        "facets": {
            "category": "category",
            "brand": "brand.raw",
            "price_ranges": [0, 2, 5, 10, 20],
        },
        "display": ["id", "title", "brand", "price", "category", "allergens", "labels"],
    }
)


def load_cases() -> dict[str, tuple[Plan, dict[str, Any]]]:
    raw = yaml.safe_load((HERE / "cases.yaml").read_text(encoding="utf-8"))
    cases: dict[str, tuple[Plan, dict[str, Any]]] = {}
    for name, case in raw["cases"].items():
        args = dict(case["render"])
        if "personalization" in args:
            args["personalization"] = [tuple(pair) for pair in args["personalization"]]
        cases[name] = (Plan.model_validate(case["plan"]), args)
    return cases


CASES = load_cases()

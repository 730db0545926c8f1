"""Every field the renderer names exists in the demo catalog's mapping, with a fit type."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.catalog.profile import load_profile, mapping_fields
from control_plane.renderer import render
from tests.renderer.cases import CASES, REPO
from tests.renderer.dsl import nodes

PROFILE_FILE = REPO / "mappings" / "catalog.profile.yaml"
KEYWORDISH = {"keyword", "boolean"}


def fields_named(body: dict[str, Any]) -> dict[str, set[str]]:
    """Fields the body names, by the construct that names them."""
    found: dict[str, set[str]] = {"text": set(), "terms": set(), "numeric": set()}
    for _, node in nodes(body):
        if "multi_match" in node:
            found["text"] |= {f.partition("^")[0] for f in node["multi_match"]["fields"]}
        if "match_phrase" in node:
            found["text"] |= set(node["match_phrase"])
        if "terms" in node:
            terms = node["terms"]
            found["terms"] |= {k for k in terms if k not in {"_name", "field", "size"}}
            if isinstance(terms.get("field"), str):
                found["terms"].add(terms["field"])
        if "range" in node:
            range_ = node["range"]
            found["numeric"] |= {range_["field"]} if "field" in range_ else set(range_)
        if "field_value_factor" in node:
            found["numeric"].add(node["field_value_factor"]["field"])
    return found


@pytest.mark.skipif(not PROFILE_FILE.is_file(), reason="no demo catalog profile")
@pytest.mark.parametrize("name", sorted(CASES))
def test_demo_profile_fields_exist_in_the_mapping(name: str) -> None:
    profile = load_profile(PROFILE_FILE)
    types = mapping_fields(profile.load_mapping())
    plan, args = CASES[name]
    body = render(plan, profile, **args)
    named = fields_named(body)
    for field in named["text"]:
        assert types.get(field) == "text", field
    for field in named["terms"]:
        assert types.get(field) in KEYWORDISH, field
    for field in named["numeric"]:
        assert types.get(field) in {"float", "scaled_float", "double", "integer", "long"}, field
    for field in body["_source"]:
        assert field in types

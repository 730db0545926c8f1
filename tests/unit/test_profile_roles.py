"""The profile is the only source of field roles: governance checks category and price rules
against the profile's fields, and optional roles may be left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.catalog.profile import load_profile
from control_plane.errors import PolicyLoadError
from control_plane.lifecycle.lint import lint
from control_plane.loader import load_policy_set
from tests.clocks import FIXED_NOW

FASHION = Path(__file__).resolve().parents[1] / "fixtures" / "fashion"
POLICY = """id: p
title: t
owner: o
trigger: {any: [x]}
rules:
  - category: {values: [Rings]}
  - price: {max: 500}
"""


def directory(tmp_path: Path, filterable: str) -> Path:
    (tmp_path / "governance.yaml").write_text(
        f"filterable_fields: [{filterable}]\nboostable_fields: []\n", encoding="utf-8"
    )
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    return tmp_path


def test_category_and_price_rules_need_the_profiles_fields_not_the_demos(tmp_path: Path) -> None:
    profile = load_profile(FASHION / "profile.yaml")
    assert load_policy_set(directory(tmp_path, "category_path, amount"), profile).policies
    with pytest.raises(PolicyLoadError) as refused:
        load_policy_set(directory(tmp_path, "categories, price"), profile)
    messages = sorted(e.message for e in refused.value.errors)
    assert [e.code for e in refused.value.errors] == ["governance_field", "governance_field"]
    assert "'amount'" in messages[0] and "'category_path'" in messages[1]


def test_optional_roles_can_be_left_out_and_lint_says_what_that_means() -> None:
    profile = load_profile(FASHION / "profile.yaml")
    assert profile.margin is None and profile.popularity is None and profile.market is None
    assert profile.visibility == "published"
    policy_set = load_policy_set(FASHION / "policies", profile)
    findings = [f for f in lint(policy_set, now=FIXED_NOW, profile=profile) if f.code == "absent_role"]
    assert {f.location for f in findings} == {
        f"profile:{role}" for role in
        ("category_leaf", "margin", "popularity", "availability", "market", "language")
    }
    margin = next(f for f in findings if f.location == "profile:margin")
    assert margin.severity == "info" and "no margin signal" in margin.message
    demo = load_profile(Path(__file__).resolve().parents[2] / "mappings" / "catalog.profile.yaml")
    assert demo.absent_roles() == []


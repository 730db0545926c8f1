"""The policy JSON Schema: generated, committed, never stale, and true to the loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane.loader import dump_policy_yaml, load_policy_set
from control_plane.policy import RULE_MODELS, SPECIFICITY, TRIGGER_OPTIONS
from control_plane.schema import policy_file_schema, render

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
COMMITTED = POLICIES / "policy.schema.json"
INVALID = ROOT / "tests" / "fixtures" / "policies_invalid"


def test_the_committed_schema_is_up_to_date() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render(), (
        "policies/policy.schema.json is stale: run"
        " `python -m control_plane.schema > policies/policy.schema.json`"
    )


def test_rendering_is_deterministic() -> None:
    text = render()
    assert text == render()
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_schema_describes_the_yaml_form() -> None:
    defs = policy_file_schema()["$defs"]
    rule_kinds = [next(iter(branch["required"])) for branch in defs["Rule"]["oneOf"]]
    assert rule_kinds == sorted(RULE_MODELS)
    assert set(defs["Trigger"]["properties"]) == {*SPECIFICITY, *TRIGGER_OPTIONS}
    assert "kind" not in defs["Trigger"]["properties"]
    assert set(defs["ActiveWindow"]["properties"]) == {"from", "until"}
    assert "Pattern" not in defs


# --- with jsonschema, when it is installed ---------------------------------------------


def documents(path: Path) -> list[Any]:
    """YAML documents as JSON would hold them (dates become ISO strings)."""
    loaded = yaml.safe_load_all(path.read_text(encoding="utf-8"))
    return [json.loads(json.dumps(doc, default=str)) for doc in loaded if doc is not None]


def demo_policy_files() -> list[Path]:
    return sorted(
        p for p in POLICIES.rglob("*.yaml")
        if p.parts[len(POLICIES.parts)] != "vocabularies"
        and "tests" not in p.parts[len(POLICIES.parts):-1]
        and p.name != "governance.yaml"
    )


@pytest.fixture(scope="module")
def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(COMMITTED.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", demo_policy_files(), ids=lambda p: p.stem)
def test_every_demo_policy_matches_the_schema(validator: Any, path: Path) -> None:
    for document in documents(path):
        assert [e.message for e in validator.iter_errors(document)] == []


def test_dumped_policies_match_the_schema(validator: Any) -> None:
    for policy in load_policy_set(POLICIES).policies:
        document = json.loads(json.dumps(yaml.safe_load(dump_policy_yaml(policy)), default=str))
        assert [e.message for e in validator.iter_errors(document)] == [], policy.id


@pytest.mark.parametrize(
    "name",
    [
        "rules/unknown_rule.yaml",
        "rules/unknown_key.yaml",
        "rules/deep_value.yaml",
        "rules/guard_not_always.yaml",
        "rules/lists.yaml",
        "rules/documents.yaml",
    ],
)
def test_the_schema_rejects_what_the_loader_rejects(validator: Any, name: str) -> None:
    assert any(
        list(validator.iter_errors(document)) for document in documents(INVALID / name)
    ), name


def test_the_schema_rejects_bad_triggers(validator: Any) -> None:
    base = {"id": "x", "title": "t", "owner": "o", "rules": [{"route": {"to": "browse"}}]}
    for trigger in (
        {"phrase": ["a"], "any": ["b"]},
        {"pattern": ["without {item}"]},
        {"always": True, "consume": True},
        {"exact": []},
        {},
    ):
        assert list(validator.iter_errors({**base, "trigger": trigger})), trigger
    assert not list(validator.iter_errors({**base, "trigger": {"pattern": "(sans|no) {x}"}}))

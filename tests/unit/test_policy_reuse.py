"""Loading a version from the previous one (control_plane.policy_digests): unchanged
policies are the previous objects, everything else is validated in full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from control_plane.loader import load_policy_set
from control_plane.policy import PolicySet
from control_plane.policy_digests import digest, load_set

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def stored(policy_set: PolicySet) -> dict[str, Any]:
    """The set document as ``policy_store.write_index`` stores it and the engine returns it."""
    parsed: dict[str, Any] = json.loads(policy_set.model_dump_json(by_alias=True))
    return parsed


@pytest.fixture(scope="module")
def first() -> tuple[PolicySet, dict[str, bytes]]:
    policy_set, digests, reused = load_set(stored(load_policy_set(POLICIES)), {}, {})
    assert reused == 0
    return policy_set, digests


def test_unchanged_policies_are_the_previous_objects(first: tuple[PolicySet, dict[str, bytes]]) -> None:
    previous, digests = first
    by_id = {p.id: p for p in previous.policies}
    document = stored(previous)
    document["policies"][0]["priority"] += 1  # a promotion changed one policy
    changed = document["policies"][0]["id"]
    loaded, new_digests, reused = load_set(document, by_id, digests)
    assert reused == len(previous.policies) - 1
    for policy in loaded.policies:
        assert (policy is by_id[policy.id]) == (policy.id != changed)
    assert loaded.policy(changed).priority == by_id[changed].priority + 1
    assert loaded == PolicySet.model_validate(document)  # what full validation gives
    assert [p.id for p in loaded.policies] == [p["id"] for p in document["policies"]]
    assert new_digests[changed] != digests[changed]
    assert {i: d for i, d in new_digests.items() if i != changed} == {
        i: d for i, d in digests.items() if i != changed
    }


def test_a_changed_policy_is_never_served_from_the_previous_version(
    first: tuple[PolicySet, dict[str, bytes]],
) -> None:
    """Same id, same version claim, any change deep inside: validated, never reused."""
    previous, digests = first
    by_id = {p.id: p for p in previous.policies}
    document = stored(previous)
    target = next(p for p in document["policies"] if p["rules"][0]["kind"] == "category")
    target["rules"][0]["body"]["values"] = ["Something Else"]
    loaded, _, reused = load_set(document, by_id, digests)
    assert reused == len(previous.policies) - 1
    policy = loaded.policy(target["id"])
    assert policy is not by_id[target["id"]]
    assert policy.rules[0].body.model_dump()["values"] == ("Something Else",)


def test_a_changed_policy_is_validated_and_its_error_located(
    first: tuple[PolicySet, dict[str, bytes]],
) -> None:
    previous, digests = first
    by_id = {p.id: p for p in previous.policies}
    document = stored(previous)
    position = len(document["policies"]) - 1
    document["policies"][position]["priority"] = "urgent"
    with pytest.raises(ValidationError) as raised:
        load_set(document, by_id, digests)
    assert raised.value.errors()[0]["loc"][:3] == ("policies", position, "priority")


def test_set_level_parts_are_validated_even_when_every_policy_is_reused(
    first: tuple[PolicySet, dict[str, bytes]],
) -> None:
    previous, digests = first
    by_id = {p.id: p for p in previous.policies}
    document = stored(previous)
    document["governance"] = {"filterable_fields": "not a list of fields", "nonsense": 1}
    with pytest.raises(ValidationError):
        load_set(document, by_id, digests)
    document = stored(previous)
    del document["policies"]
    with pytest.raises(ValidationError):  # no policies key: invalid, not an empty set
        load_set(document, by_id, digests)


def test_without_the_previous_digests_nothing_is_reused(first: tuple[PolicySet, dict[str, bytes]]) -> None:
    previous, _ = first
    by_id = {p.id: p for p in previous.policies}
    loaded, _, reused = load_set(stored(previous), by_id, {})
    assert reused == 0
    assert all(p is not by_id[p.id] for p in loaded.policies)
    assert loaded == previous


def test_the_digest_tells_json_types_apart() -> None:
    """1 and 1.0 and true validate alike in places, but are other documents: revalidated."""
    base = {"id": "a", "priority": 1}
    assert digest(base) == digest({"id": "a", "priority": 1})
    assert len({digest(base), digest({**base, "priority": 1.0}), digest({**base, "priority": True})}) == 3
    assert digest({"id": "a", "title": "x"}) != digest({"id": "a", "title": "y"})

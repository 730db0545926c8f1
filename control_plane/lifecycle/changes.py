"""What changed between two policy sets, policy by policy: the diff every history event
carries. Pure."""

from __future__ import annotations

import json
from typing import Any

from control_plane.audit.replay import diff as field_diff
from control_plane.policy import PolicySet


def _policies(policy_set: PolicySet | None) -> dict[str, Any]:
    if policy_set is None:
        return {}
    return {
        policy.id: json.loads(policy.model_dump_json(by_alias=True)) for policy in policy_set.policies
    }


def _json(model: Any) -> Any:
    return json.loads(model.model_dump_json(by_alias=True)) if model is not None else None


def policy_diff(before: PolicySet | None, after: PolicySet | None) -> dict[str, Any]:
    """``{"added": [ids], "removed": [ids], "changed": [{"id", "changes": [{field, before,
    after}]}], "vocabularies": [changes], "governance": [changes]}``, sorted."""
    old, new = _policies(before), _policies(after)
    changed = []
    for policy_id in sorted(set(old) & set(new)):
        changes = field_diff(old[policy_id], new[policy_id])
        if changes:
            changed.append({"id": policy_id, "changes": changes})
    vocabularies_before = {v.name: _json(v) for v in before.vocabularies} if before else {}
    vocabularies_after = {v.name: _json(v) for v in after.vocabularies} if after else {}
    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": changed,
        "vocabularies": field_diff(vocabularies_before, vocabularies_after),
        "governance": field_diff(
            _json(before.governance) if before else None, _json(after.governance) if after else None
        ),
    }


def touched_policies(diff: dict[str, Any]) -> tuple[str, ...]:
    """Every policy id a diff adds, removes or changes."""
    ids = set(diff["added"]) | set(diff["removed"]) | {c["id"] for c in diff["changed"]}
    return tuple(sorted(ids))


def summary(diff: dict[str, Any]) -> str:
    parts = []
    for label, key in (("added", "added"), ("removed", "removed")):
        if diff[key]:
            parts.append(f"{label} {', '.join(diff[key])}")
    if diff["changed"]:
        parts.append("changed " + ", ".join(
            f"{c['id']} ({', '.join(ch['field'] for ch in c['changes'])})" for c in diff["changed"]
        ))
    if diff["vocabularies"]:
        parts.append("vocabularies changed")
    if diff["governance"]:
        parts.append("governance changed")
    return "; ".join(parts) or "no policy changes"

"""Replay: re-run a recorded intent against the policy-set version it was served with and
against another published version (the live one by default), and report both plans and
their field-level difference.

Replay needs the raw intent: a record written with ``store_raw_intent: false`` is refused
(:class:`ReplayRefused`). Time-dependent policies are evaluated at the instant the record
was evaluated at (its ``now``; its ``time`` for records written before ``now`` existed).
Price statistics come from the catalog as it is now, so a catalog reload may change a
plan; ``original.reproduced`` says whether the plan replayed under the recorded version
hashes to the recorded ``plan_sha256``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from control_plane import matcher, policy_store
from control_plane.audit.record import sha256_json
from control_plane.composer import ComposeContext, compose
from control_plane.engine import EngineError
from control_plane.intent_text import normalise
from control_plane.plan import Composition
from control_plane.service import SearchService
from control_plane.times import parse_time


class ReplayRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Replayed:
    policy_set_version: str
    composition: Composition

    def as_json(self) -> dict[str, Any]:
        return {
            "policy_set_version": self.policy_set_version,
            "plan": json.loads(self.composition.plan.model_dump_json()),
            "applied": list(self.composition.plan.applied),
            "skipped": [s.policy_id for s in self.composition.explanation.skipped],
        }


def load_version(service: SearchService, version: str | None) -> policy_store.LivePolicySet:
    """A published policy set by version (or version prefix of 16+ characters); None: the
    environment's current one."""
    if version is None:
        return service.snapshot()[0]
    if len(version) < 16:
        raise ReplayRefused(
            "invalid_version", "give at least the first 16 characters of a policy-set version"
        )
    index = policy_store.index_name(service.settings.policies.index_prefix, version)
    unknown = ReplayRefused("unknown_version", f"policy-set version {version} is not published")
    if not service.engine.index_exists(index):
        raise unknown
    try:
        live = policy_store.read_index(service.engine, index)
    except EngineError as error:
        raise unknown from error
    if not live.policy_set.version.startswith(version):
        raise unknown
    return live


def run(service: SearchService, record: dict[str, Any], live: policy_store.LivePolicySet) -> Replayed:
    recorded = record.get("intent")
    if not recorded:
        raise ReplayRefused(
            "raw_intent_not_stored",
            "this record was written with audit.store_raw_intent off: its intent cannot be replayed",
        )
    # as the search did; records written before NFKC and mixed-script mapping hold NFC text
    intent = normalise(recorded)
    params = record.get("request") or {}
    cohorts = tuple(params.get("cohorts") or ())
    now = parse_time(record.get("now") or record["time"])  # the instant it was evaluated at
    by_id = live.policy_set.lookups().by_id
    matches = matcher.match(
        service.engine, live.index, intent, by_id, cohorts=cohorts, now=now, layout=live.layout
    )
    context = ComposeContext(
        cohorts=cohorts,
        market=params.get("market"),
        category_field=service.profile.category,
        price_stats=service.catalog.stats(),
        money=service.profile.money,
    )
    return Replayed(live.policy_set.version, compose(live.policy_set, intent, matches, context))


def replay(service: SearchService, record: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    if record.get("error") or not record.get("policy_set_version"):
        raise ReplayRefused("not_replayable", "the request failed before a plan was made: nothing to replay")
    if not record.get("intent"):
        run(service, record, service.snapshot()[0])  # raises raw_intent_not_stored
    original = run(service, record, load_version(service, record["policy_set_version"]))
    target = run(service, record, load_version(service, version))
    before, after = original.as_json(), target.as_json()
    return {
        "request_id": record["request_id"],
        "original": {
            **before,
            "reproduced": sha256_json(before["plan"]) == record.get("plan_sha256"),
        },
        "replayed": after,
        "identical": before["plan"] == after["plan"],
        "diff": diff(before["plan"], after["plan"]),
        "policies": {
            "added": sorted(set(after["applied"]) - set(before["applied"])),
            "removed": sorted(set(before["applied"]) - set(after["applied"])),
        },
    }


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """Field-level differences: objects are compared key by key (dotted paths), any other
    value (lists included) as a whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after)):
            changes.extend(diff(before.get(key), after.get(key), f"{path}.{key}" if path else key))
        return changes
    if before == after:
        return []
    return [{"field": path, "before": before, "after": after}]

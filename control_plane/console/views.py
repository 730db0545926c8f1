"""What the console's pages show, shaped from what the workflow, the service and the audit
return: rows of policies, hits with the policies that placed them, an intent with its
consumed spans marked, a decision record as a preview. Pure: no I/O, no clock."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from control_plane.policy import Policy, PolicySet

SEARCH_FIELDS = ("any", "id", "owner", "kind", "trigger")


@dataclass(frozen=True)
class PolicyRow:
    id: str
    title: str
    kind: str
    owner: str
    priority: int
    enabled: bool
    triggers: str
    compared: str
    """against the other environment: ``same``, ``changed``, ``only here`` (empty: the other
    environment has nothing published)"""


def trigger_words(policy: Policy) -> str:
    """The trigger's phrases, patterns and vocabularies, as one line."""
    data = json.loads(policy.trigger.model_dump_json(by_alias=True, exclude_defaults=True))
    words: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if key not in ("kind", "consume"):  # the trigger's form, not its words
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is True:
            words.append("always")

    walk(data)
    return ", ".join(dict.fromkeys(words)) or str(data.get("kind", ""))  # e.g. always


def matches(policy: Policy, query: str, where: str) -> bool:
    """Whether ``policy`` answers the search ``query`` in ``where`` (one of
    :data:`SEARCH_FIELDS`); case-insensitive substring, an empty query matches all."""
    needle = query.strip().casefold()
    if not needle:
        return True
    fields = {
        "id": policy.id,
        "owner": policy.owner,
        "kind": policy.kind,
        "trigger": trigger_words(policy),
    }
    haystack = [fields[where]] if where in fields else [*fields.values(), policy.title]
    return any(needle in value.casefold() for value in haystack)


def policy_rows(
    policy_set: PolicySet | None, other: PolicySet | None, query: str, where: str
) -> list[PolicyRow]:
    if policy_set is None:
        return []
    theirs = {p.id: p for p in other.policies} if other is not None else {}
    rows = []
    for policy in sorted(policy_set.policies, key=lambda p: p.id):
        if not matches(policy, query, where):
            continue
        counterpart = theirs.get(policy.id)
        if other is None:
            compared = ""  # nothing to compare with (staging starts as a copy of live)
        elif counterpart is None:
            compared = "only here"
        else:
            compared = "same" if counterpart == policy else "changed"
        rows.append(PolicyRow(
            policy.id, policy.title, policy.kind, policy.owner, policy.priority, policy.enabled,
            trigger_words(policy), compared,
        ))
    return rows


@dataclass(frozen=True)
class Segment:
    text: str
    policies: tuple[str, ...] = ()
    """the applied policies that consumed this part of the intent (none: left as text)"""


def marked_intent(intent: str, applied: Iterable[Mapping[str, Any]]) -> list[Segment]:
    """``intent`` cut at every consumed span's edges, each piece with its consuming policies."""
    spans = [
        (int(span["start"]), int(span["end"]), str(step["policy_id"]))
        for step in applied for span in step.get("consumed", ())
        if 0 <= int(span["start"]) < int(span["end"]) <= len(intent)
    ]
    cuts = sorted({0, len(intent), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    segments = []
    for start, end in pairwise(cuts):
        owners = tuple(dict.fromkeys(pid for s, e, pid in spans if s <= start and end <= e))
        segments.append(Segment(intent[start:end], owners))
    return segments


@dataclass(frozen=True)
class HitView:
    id: str
    title: Any
    brand: Any
    price: Any
    sponsored: bool
    policies: tuple[str, ...]


def hit_views(hits: Sequence[Any], profile: Any) -> list[HitView]:
    return [
        HitView(
            hit.id, hit.source.get(profile.title), hit.source.get(profile.brand),
            hit.source.get(profile.price), bool(hit.sponsored_by), tuple(hit.policies),
        )
        for hit in hits
    ]


@dataclass(frozen=True)
class Side:
    """One column of a preview (live or staging), or a recorded decision."""

    label: str
    version: str | None
    status: str | None
    tier: str | None
    total: int | None
    hits: list[HitView]
    explanation: dict[str, Any]
    segments: list[Segment]
    dsl: str | None
    reason: str | None = None


def side_of(label: str, outcome: Any, profile: Any) -> Side:
    """A preview column from a :class:`~control_plane.service.Outcome`."""
    explanation: dict[str, Any] = json.loads(outcome.compiled.composition.explanation.model_dump_json())
    execution = outcome.execution
    return Side(
        label=label,
        version=outcome.compiled.policy_set_version,
        status=execution.status,
        tier=execution.tier,
        total=execution.total,
        hits=hit_views(execution.hits, profile),
        explanation=explanation,
        segments=marked_intent(explanation["intent"], explanation["applied"]),
        dsl=_pretty(execution.dsl),
        reason=execution.reason,
    )


def side_of_record(record: Mapping[str, Any]) -> Side:
    """A recorded decision, shaped like a preview column (hits are ids: a record keeps no
    product fields)."""
    intent = str(record.get("intent") or record.get("intent_redacted") or "")
    applied = list(record.get("applied") or [])
    explanation = {
        "intent": intent,
        "matched": list(record.get("matched") or []),
        "applied": applied,
        "skipped": list(record.get("skipped") or []),
        "resolutions": list(record.get("resolutions") or []),
        "residual": record.get("residual"),
    }
    ids = record.get("hit_ids") or record.get("results") or []
    hits = [
        HitView(str(h.get("id")) if isinstance(h, Mapping) else str(h), None, None, None,
                bool(h.get("sponsored")) if isinstance(h, Mapping) else False,
                tuple(h.get("policies") or ()) if isinstance(h, Mapping) else ())
        for h in ids
    ]
    dsl, error = record.get("dsl"), record.get("error")
    return Side(
        label=f"request {record.get('request_id')}",
        version=record.get("policy_set_version"),
        status=record.get("status"),
        tier=record.get("tier"),
        total=record.get("hits") if isinstance(record.get("hits"), int) else None,
        hits=hits,
        explanation=explanation,
        segments=marked_intent(intent, applied) if record.get("raw_intent_stored", True)
        else [Segment(intent)],
        dsl=_pretty(dsl),
        reason=error.get("message") if isinstance(error, Mapping) else record.get("reason"),
    )


def cases_of(suite: Any, policy_id: str) -> list[dict[str, Any]]:
    """The suite's cases whose expectations name ``policy_id``."""
    if suite is None:
        return []
    return [case.as_json() for case in suite.cases if policy_id in case.expect.policy_ids()]


def field_changes(event: Mapping[str, Any], policy_id: str | None) -> list[dict[str, Any]]:
    """An event's field-level diff (of one policy when ``policy_id``), as rows."""
    diff = event.get("diff") or {}
    rows: list[dict[str, Any]] = []
    for pid in diff.get("added", []):
        if policy_id in (None, pid):
            rows.append({"policy": pid, "field": "(added)", "before": "", "after": ""})
    for pid in diff.get("removed", []):
        if policy_id in (None, pid):
            rows.append({"policy": pid, "field": "(removed)", "before": "", "after": ""})
    for changed in diff.get("changed", []):
        if policy_id in (None, changed["id"]):
            for change in changed["changes"]:
                rows.append({
                    "policy": changed["id"], "field": change["field"],
                    "before": _short(change.get("before")), "after": _short(change.get("after")),
                })
    return rows


def _pretty(dsl: Any) -> str | None:
    return json.dumps(dsl, indent=2, sort_keys=True, ensure_ascii=False) if dsl else None


def _short(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


# --- the journal of moves (ADR 0056) -----------------------------------------------------

@dataclass(frozen=True)
class MoveRow:
    """One move no history event names, as the history page shows it."""

    intent_id: str
    state: str
    marker: str | None
    env: str
    action: str
    actor: str
    asked_at: str
    from_version: str | None
    to_version: str | None
    reason: str
    owner: str
    """the process that made (or makes) the move: host and pid"""
    expires: str
    closed_at: str | None
    closed_by: str | None
    note: str | None
    live: str
    """what the move means now for the environment it moved"""


def _version(value: Any) -> str:
    return str(value)[:12] if value else "nothing"


def what_is_live(state: str, marker: str | None, env: str, before: Any, after: Any) -> str:
    """One sentence: what a move in ``state`` (with ``marker`` while open) means for what
    ``env`` serves (``before``: the version it moved from, ``after``: to)."""
    was, new = _version(before), _version(after)
    if state == "dropped":
        return f"{env} never served {new} through this move"
    if state == "withdrawn":
        return f"{env} was moved back from {new} (to {was}, unless another move stood on top)"
    if marker == "open":
        return f"not moved yet: {env} serves {was}"
    if marker in ("applied", "recording"):
        return f"moved: {env} serves {new}; its event is not written yet"
    return f"no marker: the move cannot be made; {env} serves {was}"


def move_rows(entries: Iterable[Mapping[str, Any]]) -> list[MoveRow]:
    """The journal's entries (``Entry.as_json``), newest first as read, as rows."""
    rows = []
    for entry in entries:
        event, owner, closed = entry["event"], entry.get("owner") or {}, entry.get("closed") or {}
        rows.append(MoveRow(
            intent_id=str(entry["intent_id"]),
            state=str(entry["state"]),
            marker=entry.get("marker"),
            env=str(entry["env"]),
            action=str(event.get("action")),
            actor=str(event.get("actor")),
            asked_at=str(event.get("time")),
            from_version=event.get("previous_version"),
            to_version=event.get("version"),
            reason=str(event.get("reason") or ""),
            owner=f"{owner.get('host')} pid {owner.get('pid')}" if owner else "",
            expires=str(entry.get("expires") or ""),
            closed_at=closed.get("at"),
            closed_by=closed.get("by"),
            note=closed.get("note"),
            live=what_is_live(str(entry["state"]), entry.get("marker"), str(entry["env"]),
                              event.get("previous_version"), event.get("version")),
        ))
    return rows

"""The behavioural diff: replay saved intents against two policy-set versions and report
every intent whose plan or results changed, in words a merchandiser can read.

Each side is a :class:`~control_plane.service.SearchService` (pinned to a policies index,
or serving an environment). Both sides run every request at the same ``now`` (one clock
reading by default), so active windows agree. Plans are compared as the JSON of
``composition.plan`` (field by field, with :func:`control_plane.audit.replay.diff`);
results as the ids of the top ``top`` hits of the governed search, order included.

Query files (:func:`load_queries`): ``.txt`` holds one intent per line (blank lines and
lines starting with ``#`` are skipped); ``.yaml``, ``.yml`` and ``.json`` hold a list of
intents or of mappings ``{intent, cohorts, user, market}``. Errors name ``file:line``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from control_plane import yaml_aliases
from control_plane.audit.replay import diff
from control_plane.service import Outcome, SearchRequest, SearchService

QUERY_KEYS = ("intent", "cohorts", "user", "market")
PROVENANCE = ("policy", "policies")
"""plan keys naming the policy behind a value: narrated as applied policies, not fields"""
MAX_LISTED = 5


class QueryFileError(ValueError):
    """A query file that cannot be read; the message starts with ``file:line``."""


class RegressionError(RuntimeError):
    """The diff could not be made consistently (e.g. a side's policy set moved mid-run)."""


# --- query files ------------------------------------------------------------------------


def load_queries(path: Path | str) -> list[SearchRequest]:
    """The requests of a query file (see the module docstring), in file order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise QueryFileError(f"{path}: cannot read the query file: {error}") from error
    if path.suffix == ".txt":
        return _text_queries(path, text)
    if path.suffix in (".yaml", ".yml", ".json"):
        return _structured_queries(path, text)
    raise QueryFileError(f"{path}: unknown query file type {path.suffix!r} (use .txt, .yaml, .yml or .json)")


def _text_queries(path: Path, text: str) -> list[SearchRequest]:
    requests = []
    for number, line in enumerate(text.splitlines(), start=1):
        intent = line.strip()
        if intent and not intent.startswith("#"):
            requests.append(_request(path, number, {"intent": intent}))
    return requests


def _structured_queries(path: Path, text: str) -> list[SearchRequest]:
    items, lines = _parse(path, text)
    if not isinstance(items, list):
        raise QueryFileError(f"{path}:1: a query file holds a list of intents or of mappings")
    requests = []
    for index, item in enumerate(items):
        line = lines[index] if index < len(lines) else 1
        if isinstance(item, str):
            requests.append(_request(path, line, {"intent": item}))
        elif isinstance(item, dict):
            requests.append(_request(path, line, _mapping(path, line, item)))
        else:
            raise QueryFileError(f"{path}:{line}: item {index} must be an intent or a mapping")
    return requests


def _parse(path: Path, text: str) -> tuple[Any, list[int]]:
    """The document, and the 1-based line of each top-level list item (when known)."""
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml_aliases.safe_load(text)
    except json.JSONDecodeError as error:
        raise QueryFileError(f"{path}:{error.lineno}: invalid JSON: {error.msg}") from error
    except RecursionError:  # json's decoder recurses per level
        raise QueryFileError(f"{path}:1: invalid JSON: nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise QueryFileError(f"{path}:{line}: invalid YAML: {error}") from error
    try:
        node = yaml_aliases.compose(text)
    except yaml.YAMLError:
        return data, []
    if not isinstance(node, yaml.SequenceNode):
        return data, []
    return data, [item.start_mark.line + 1 for item in node.value]


def _mapping(path: Path, line: int, item: dict[Any, Any]) -> dict[str, Any]:
    unknown = sorted(str(key) for key in item if key not in QUERY_KEYS)
    if unknown:
        raise QueryFileError(
            f"{path}:{line}: unknown key(s) {', '.join(unknown)} (known: {', '.join(QUERY_KEYS)})"
        )
    fields: dict[str, Any] = {"intent": item["intent"]} if "intent" in item else {}
    cohorts = item.get("cohorts")
    if cohorts is not None:
        fields["cohorts"] = [cohorts] if isinstance(cohorts, str) else cohorts
    if item.get("user") is not None:
        fields["user_id"] = item["user"]
    if item.get("market") is not None:
        fields["market"] = item["market"]
    return fields


def _request(path: Path, line: int, fields: dict[str, Any]) -> SearchRequest:
    try:
        return SearchRequest.model_validate(fields)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in error.errors()
        )
        raise QueryFileError(f"{path}:{line}: {problems}") from None


# --- the diff ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """What one policy-set version made of one request."""

    plan: dict[str, Any]
    applied: tuple[str, ...]
    skipped: tuple[str, ...]
    status: str
    tier: str | None
    total: int
    top: tuple[str, ...]

    @classmethod
    def of(cls, outcome: Outcome, top: int) -> Side:
        composition, execution = outcome.compiled.composition, outcome.execution
        return cls(
            plan=json.loads(composition.plan.model_dump_json()),
            applied=composition.plan.applied,
            skipped=tuple(sorted({s.policy_id for s in composition.explanation.skipped})),
            status=execution.status,
            tier=execution.tier,
            total=execution.total,
            top=tuple(hit.id for hit in execution.hits[:top]),
        )


@dataclass(frozen=True)
class IntentChange:
    """One request whose plan or top results differ between the two versions."""

    intent: str
    cohorts: tuple[str, ...]
    market: str | None
    user: str | None
    plan_changed: bool
    plan_diff: list[dict[str, Any]]
    results_changed: bool
    top_before: tuple[str, ...]
    top_after: tuple[str, ...]
    entered: tuple[str, ...]
    left: tuple[str, ...]
    policies: dict[str, list[str]]
    """applied policies: ``added`` and ``removed`` (sorted ids)"""
    skipped: dict[str, list[str]]
    """skipped policies: ``added`` (newly skipped) and ``removed`` (no longer skipped)"""
    before: Side
    after: Side
    explanation: str

    def as_json(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "cohorts": list(self.cohorts),
            "market": self.market,
            "user": self.user,
            "plan_changed": self.plan_changed,
            "plan_diff": self.plan_diff,
            "results_changed": self.results_changed,
            "top_before": list(self.top_before),
            "top_after": list(self.top_after),
            "entered": list(self.entered),
            "left": list(self.left),
            "policies": self.policies,
            "skipped": self.skipped,
            "before": _side_json(self.before),
            "after": _side_json(self.after),
            "explanation": self.explanation,
        }

    def label(self) -> str:
        context = [f"cohorts={','.join(self.cohorts)}"] if self.cohorts else []
        context += [f"market={self.market}"] if self.market else []
        context += [f"user={self.user}"] if self.user else []
        return json.dumps(self.intent, ensure_ascii=False) + (f" ({', '.join(context)})" if context else "")


@dataclass(frozen=True)
class BehaviourDiff:
    before_version: str
    after_version: str
    total: int
    """requests replayed (duplicates counted once)"""
    changed: list[IntentChange]
    top: int = 10

    def as_json(self) -> dict[str, Any]:
        return {
            "before_version": self.before_version,
            "after_version": self.after_version,
            "top": self.top,
            "total": self.total,
            "changed_count": len(self.changed),
            "unchanged_count": self.total - len(self.changed),
            "changed": [change.as_json() for change in self.changed],
        }

    def human(self) -> str:
        head = (
            f"policy set {self.before_version[:12]} -> {self.after_version[:12]}:"
            f" {len(self.changed)} of {self.total} intent(s) changed"
        )
        return "\n".join([head, *(f"- {c.label()}: {c.explanation}" for c in self.changed)])


def behaviour_diff(
    before: SearchService,
    after: SearchService,
    requests: Sequence[SearchRequest],
    *,
    now: datetime,
    top: int = 10,
) -> BehaviourDiff:
    """Run every request on both sides at the same ``now`` and keep those that changed,
    sorted by intent, cohorts, market and user."""
    if not 1 <= top <= 50:
        raise ValueError("top must be between 1 and 50")
    before_version = before.snapshot()[0].policy_set.version
    after_version = after.snapshot()[0].policy_set.version
    unique = _unique(requests, top)
    changes = []
    for request in unique:
        old = _run(before, request, now, before_version, "before")
        new = _run(after, request, now, after_version, "after")
        change = compare(request, Side.of(old, top), Side.of(new, top), top)
        if change is not None:
            changes.append(change)
    return BehaviourDiff(before_version, after_version, len(unique), changes, top)


def _unique(requests: Sequence[SearchRequest], top: int) -> list[SearchRequest]:
    """Each distinct request once, first page of ``top`` hits, sorted."""
    seen: dict[tuple[str, tuple[str, ...], str, str], SearchRequest] = {}
    for request in requests:
        page = SearchRequest.model_validate(
            {**request.model_dump(), "page": 1, "size": top, "explain": False}
        )
        seen.setdefault(_key(page), page)
    return [seen[key] for key in sorted(seen)]


def _key(request: SearchRequest) -> tuple[str, tuple[str, ...], str, str]:
    return (request.intent, request.cohorts, request.market or "", request.user_id or "")


def _run(
    service: SearchService, request: SearchRequest, now: datetime, version: str, side: str
) -> Outcome:
    outcome = service.search(request, now)
    if outcome.compiled.policy_set_version != version:
        raise RegressionError(
            f"the {side} policy set changed from {version[:16]} to"
            f" {outcome.compiled.policy_set_version[:16]} during the diff: run it again"
        )
    return outcome


def compare(request: SearchRequest, before: Side, after: Side, top: int) -> IntentChange | None:
    """The change between two sides of one request, or None when nothing changed."""
    plan_diff = diff(before.plan, after.plan)
    results_changed = before.top != after.top or before.status != after.status
    if not plan_diff and not results_changed:
        return None
    entered = tuple(i for i in after.top if i not in before.top)
    left = tuple(i for i in before.top if i not in after.top)
    policies = _added_removed(before.applied, after.applied)
    skipped = _added_removed(before.skipped, after.skipped)
    return IntentChange(
        intent=request.intent,
        cohorts=request.cohorts,
        market=request.market,
        user=request.user_id,
        plan_changed=bool(plan_diff),
        plan_diff=plan_diff,
        results_changed=results_changed,
        top_before=before.top,
        top_after=after.top,
        entered=entered,
        left=left,
        policies=policies,
        skipped=skipped,
        before=before,
        after=after,
        explanation=explain(policies, skipped, plan_diff, before, after, top),
    )


def _added_removed(before: Sequence[str], after: Sequence[str]) -> dict[str, list[str]]:
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after))}


def _side_json(side: Side) -> dict[str, Any]:
    return {
        "applied": list(side.applied),
        "skipped": list(side.skipped),
        "status": side.status,
        "tier": side.tier,
        "total": side.total,
    }


# --- explanation ------------------------------------------------------------------------


def explain(
    policies: dict[str, list[str]],
    skipped: dict[str, list[str]],
    plan_diff: list[dict[str, Any]],
    before: Side,
    after: Side,
    top: int,
) -> str:
    """One sentence per kind of change, joined with ``; ``."""
    parts = _policy_parts(policies, skipped)
    parts += [_field_part(change) for change in plan_diff if _narrated(change["field"])]
    parts += _result_parts(before, after, top)
    return "; ".join(parts) or "no visible change"


def _policy_parts(policies: dict[str, list[str]], skipped: dict[str, list[str]]) -> list[str]:
    added, removed = ", ".join(policies["added"]), ", ".join(policies["removed"])
    parts = []
    if added and removed:
        parts.append(f"applied {added} instead of {removed}")
    elif added:
        parts.append(f"now applies {added}")
    elif removed:
        parts.append(f"no longer applies {removed}")
    if skipped["added"]:
        parts.append(f"now skips {', '.join(skipped['added'])}")
    if skipped["removed"]:
        parts.append(f"no longer skips {', '.join(skipped['removed'])}")
    return parts


def _narrated(field: str) -> bool:
    return field != "applied" and field.rsplit(".", 1)[-1] not in PROVENANCE


def _field_part(change: dict[str, Any]) -> str:
    field = change["field"].removesuffix(".value")
    field = field[: -len(".relative")] + " percentile" if field.endswith(".relative") else field
    before, after = change["before"], change["after"]
    return f"{field} {_show(before, named=False)} -> {_show(after, named=False)}"


def _show(value: Any, named: bool = True) -> str:
    """A plan value as a merchandiser reads it: constraints by their values (``field=`` in
    lists, where the path does not name the field), bounds and weights by their number."""
    if value is None:
        return "none"
    if isinstance(value, dict):
        if "values" in value:
            shown = _show(value["values"])
            shown = f"{value['field']}={shown}" if named and "field" in value else shown
            return shown + (f" x{value['weight']:g}" if "weight" in value else "")
        if "value" in value:
            return _show(value["value"])
        if "ids" in value:
            return _show(value["ids"])
    if isinstance(value, list):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _result_parts(before: Side, after: Side, top: int) -> list[str]:
    if before.status != after.status:
        return [
            "now finds no product" if after.status == "no_results" else f"now finds {after.total} product(s)"
        ]
    parts = []
    if before.tier != after.tier:
        parts.append(f"served by the {after.tier} tier instead of {before.tier}")
    left = [i for i in before.top if i not in after.top]
    entered = [i for i in after.top if i not in before.top]
    if left:
        parts.append(f"{len(left)} product(s) left the top {top}: {_ids(left)}")
    if entered:
        parts.append(f"{len(entered)} product(s) entered the top {top}: {_ids(entered)}")
    if not left and not entered and before.top != after.top:
        parts.append(f"the top {top} was reordered")
    return parts


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else "")

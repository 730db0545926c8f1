"""The decision record of a served search, built as JSON data directly: the parts fixed by the
cached plan (the explanation, the intent's digest, the applied policies, the plan's digest, the
digest of each rendered body) are computed once per plan and reused by every hit; a request
adds only what is its own (id, instants, client, parameters, totals, hits, timings).

The result is exactly ``DecisionRecord(...).model_dump(mode="json")`` of the same fields (the
model stays the schema: ``tests/audit/test_decision_parts.py`` checks every record built here
against it, byte for byte in canonical form), without validating per request what the plan
already holds as JSON data.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from control_plane.audit.record import (
    DecisionRecord,
    explanation_fields,
    intent_fields,
    pseudonym,
    redact,
    sha256_json,
)
from control_plane.bounded import keep

if TYPE_CHECKING:
    from control_plane.service import Compiled, Outcome, SearchRequest

_DEFAULTS: dict[str, Any] = DecisionRecord(request_id="", time="").model_dump(mode="json")
"""every field of a decision record at its default"""
_MUTABLE = tuple(key for key, value in _DEFAULTS.items() if isinstance(value, (list, dict)))
"""the defaults a record gets a fresh copy of (never shared between records)"""

DIGESTS_PER_PLAN = 64
"""rendered bodies whose digest a plan keeps (a plan holds few renderings: tiers x pages)"""

_digest_lock = threading.Lock()


def plan_fields(compiled: Compiled, raw: bool) -> dict[str, Any]:
    """What the cached plan says of a served search, once per plan and ``raw`` (read only:
    a record copies it). The intent's normalisation is the request's own and not in here."""

    def compute() -> tuple[str, str, dict[str, Any]]:
        fields = {
            "policy_set_version": compiled.policy_set_version,
            **{k: v for k, v in intent_fields(compiled.intent, raw).items() if not k.startswith("intent_n")},
            **explanation_fields(compiled.explanation_data(), raw),
            "applied_policies": list(compiled.composition.plan.applied),
            "plan_sha256": compiled.renderings.memo("plan_sha256", lambda: sha256_json(compiled.plan_data())),
        }
        return compiled.intent, compiled.policy_set_version, fields

    intent, version, fields = compiled.renderings.memo(f"record_fields.{raw}", compute)
    if intent != compiled.intent or version != compiled.policy_set_version:  # never shared like that,
        return compute()[2]  # but a record must say what this request compiled, not a neighbour
    return fields


def _base(compiled: Compiled, raw: bool) -> dict[str, Any]:
    """Every field at its default, then :func:`plan_fields`: the record a hit on this plan
    starts from, once per plan and ``raw`` (read only: a record copies it, its lists and
    empty dicts replaced by its own)."""
    fields = plan_fields(compiled, raw)

    def compute() -> tuple[dict[str, Any], dict[str, Any]]:
        return fields, {**_DEFAULTS, **fields}

    known, base = compiled.renderings.memo(f"record_base.{raw}", compute)
    if known is not fields:  # plan_fields recomputed them (never for a shared plan): start anew
        return {**_DEFAULTS, **fields}
    return base


def dsl_digest(compiled: Compiled, dsl: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``dsl``, once per rendered body of the plan (the body
    served is the plan's cached rendering, never changed once built; the digest is keyed by
    the body itself, held with it, so an evicted body's id cannot be mistaken for another)."""
    digests: dict[int, tuple[Mapping[str, Any], str]] = compiled.renderings.memo("dsl_sha256", dict)
    known = digests.get(id(dsl))
    if known is not None and known[0] is dsl:
        return known[1]
    digest = sha256_json(dsl)
    with _digest_lock:
        keep(digests, id(dsl), (dsl, digest), DIGESTS_PER_PLAN)
    return digest


def normalisation_fields(compiled: Compiled, raw: bool) -> dict[str, Any]:
    normalisation = compiled.normalisation
    if normalisation is None:
        return {}
    words = list(normalisation.mixed_script)
    return {
        "intent_normalised": normalisation.changed,
        "intent_mixed_script": words if raw else [redact(word) for word in words],
    }


def decision_data(
    request_id: str,
    request: SearchRequest,
    outcome: Outcome,
    *,
    raw: bool,
    time: str,
    now: str,
    client: str | None,
    endpoint: str,
    extraction: dict[str, Any] | None,
    status: str | None,
) -> dict[str, Any]:
    """The record of a served search (``status`` overrides the execution's)."""
    compiled = outcome.compiled
    execution = outcome.execution
    record = dict(_base(compiled, raw))
    for key in _MUTABLE:  # the plan's lists are shared by its hits: each record gets its own,
        value = record[key]  # and a fresh list or dict where it has the default
        if isinstance(value, list):
            record[key] = list(value)
        elif isinstance(value, dict) and not value:
            record[key] = {}
    if compiled.normalisation is not None:
        record.update(normalisation_fields(compiled, raw))
    record.update(
        request_id=request_id,
        time=time,
        now=now,
        client=client,
        endpoint=endpoint,
        extraction=extraction,
        request={
            "cohorts": list(request.cohorts),
            "market": request.market,
            "user_id": pseudonym(request.user_id, raw),
            "page": request.page,
            "size": request.size,
        },
        cached=compiled.cached,
        dsl_sha256=dsl_digest(compiled, execution.dsl),
        status=execution.status if status is None else status,
        tier=execution.tier,
        tiers=[
            {"tier": run.tier, "total": run.total, "took_ms": float(run.took_ms), "replayed": run.replayed}
            for run in execution.runs
        ],
        hits=execution.total,
        hit_ids=[hit.id for hit in execution.hits],
        latency_ms={stage: float(ms) for stage, ms in outcome.latency_ms.items()},
    )
    return record

"""Execution: run the rendered plan tier by tier, and never without its constraints.

Tiers run in order -- strict, relaxed, broad -- and the next runs only while the current
returned fewer than ``min_hits``. Only the base text clause differs between tiers (the
renderer guarantees it), so every hard constraint is present in every request sent. When
the plan has no text to relax (empty residual, or the ``browse`` route) one tier runs.

The tier served is the first that reached ``min_hits``; when none did, the one with the
most hits (the earliest on ties); when all returned nothing, the answer is
``no_results`` with a reason. Facets and pagination come from the tier served. An engine
failure propagates as :class:`~control_plane.engine.EngineError`: the caller fails closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from control_plane.engine import Engine
from control_plane.plan import Plan
from control_plane.renderer import TIERS, Tier, parse_clause_name

Render = Callable[[Tier], dict[str, Any]]


@dataclass(frozen=True)
class Hit:
    id: str
    score: float | None
    source: Mapping[str, Any]
    policies: tuple[str, ...]
    sponsored_by: tuple[str, ...]


@dataclass(frozen=True)
class TierRun:
    tier: Tier
    total: int
    took_ms: float


@dataclass(frozen=True)
class Execution:
    status: Literal["ok", "no_results"]
    tier: Tier | None
    total: int
    hits: tuple[Hit, ...]
    facets: Mapping[str, Any]
    dsl: Mapping[str, Any]
    """the request body of the tier served (or of the last tier tried)"""
    runs: tuple[TierRun, ...] = field(default=())
    reason: str | None = None


def tiers_for(plan: Plan) -> tuple[Tier, ...]:
    if not plan.residual.strip() or plan.route == "browse":
        return ("strict",)
    return TIERS


def execute(
    engine: Engine,
    index: str,
    plan: Plan,
    render: Render,
    *,
    min_hits: int,
) -> Execution:
    runs: list[TierRun] = []
    answers: list[tuple[Tier, dict[str, Any], dict[str, Any]]] = []
    for tier in tiers_for(plan):
        body = render(tier)
        started = time.perf_counter()
        response = engine.search(index, body)
        total = int(response["hits"]["total"]["value"])
        runs.append(TierRun(tier, total, round((time.perf_counter() - started) * 1000, 3)))
        answers.append((tier, body, response))
        if total >= min_hits:
            break
    tier, body, response = _served(answers, min_hits)
    total = int(response["hits"]["total"]["value"])
    if total == 0:
        tried = ", ".join(run.tier for run in runs)
        return Execution(
            status="no_results",
            tier=None,
            total=0,
            hits=(),
            facets={},
            dsl=body,
            runs=tuple(runs),
            reason=f"no product satisfies the policy constraints and the text in any tier ({tried})",
        )
    return Execution(
        status="ok",
        tier=tier,
        total=total,
        hits=tuple(_hit(raw) for raw in response["hits"]["hits"]),
        facets=facets_from(response.get("aggregations") or {}),
        dsl=body,
        runs=tuple(runs),
    )


def _served(
    answers: Sequence[tuple[Tier, dict[str, Any], dict[str, Any]]], min_hits: int
) -> tuple[Tier, dict[str, Any], dict[str, Any]]:
    def total(answer: tuple[Tier, dict[str, Any], dict[str, Any]]) -> int:
        return int(answer[2]["hits"]["total"]["value"])

    if total(answers[-1]) >= min_hits:
        return answers[-1]
    return max(answers, key=lambda answer: (total(answer), -TIERS.index(answer[0])))


def _hit(raw: Mapping[str, Any]) -> Hit:
    names = raw.get("matched_queries") or []
    if isinstance(names, dict):  # Elasticsearch 8.8+ may return {name: score}
        names = list(names)
    policies: set[str] = set()
    sponsored: set[str] = set()
    for name in names:
        parsed = parse_clause_name(name)
        if parsed is None:
            continue
        (sponsored if parsed.kind == "sponsored" else policies).add(parsed.policy)
    return Hit(
        id=str(raw["_id"]),
        score=raw.get("_score"),
        source=raw.get("_source") or {},
        policies=tuple(sorted(policies | sponsored)),
        sponsored_by=tuple(sorted(sponsored)),
    )


def facets_from(aggregations: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    facets: dict[str, list[dict[str, Any]]] = {}
    for name, agg in sorted(aggregations.items()):
        buckets = agg.get("buckets", [])
        if name == "price":
            facets[name] = [
                {"from": b.get("from"), "to": b.get("to"), "count": b["doc_count"]} for b in buckets
            ]
        else:
            facets[name] = [{"value": b["key"], "count": b["doc_count"]} for b in buckets]
    return facets

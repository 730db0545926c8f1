"""Execution: run the rendered plan tier by tier, and never without its constraints.

Tiers are considered in order -- strict, relaxed, broad -- and the next counts only while
the current returned fewer than ``min_hits``. Only the base text clause differs between
tiers (the renderer guarantees it), so every hard constraint is present in every request
sent. When the plan has no text to relax (empty residual, or the ``browse`` route) one
tier runs.

The tier served is the first that reached ``min_hits``; when none did, the one with the
most hits (the earliest on ties); when all returned nothing, the answer is
``no_results`` with a reason. Facets and pagination come from the tier served.

Round trips: the tiers are sent in *batches*, each batch one ``_msearch`` request
(:func:`tier_batches`). The choice above is made on the answers in tier order exactly as
if the tiers had run one after another: a tier sent in the same batch after the first
that reached ``min_hits`` is ignored (not served, not reported in ``runs``), and a later
batch is sent only while no tier reached ``min_hits``. Batching changes the number of
round trips, never the answer. An engine failure, an item that failed and an item that
lacks a shard (partial results) all raise :class:`~control_plane.engine.EngineError`: the
caller fails closed.

Replay: a plan whose last run fell back (several tiers run) remembers every tier's total and
the tier served, with the catalog generation they were seen at (:class:`Replay`). While the
catalog generation is the same (no write and no refresh since: the counters of
:class:`~control_plane.service.Catalog`), a repeated request sends only the tier that will be
served (:func:`replay_steps`), the exact request body the full run served, and reports the other
tiers' totals as replayed (``TierRun.replayed``). If that tier's total is not what it was,
the replay is dropped and the tiers run again from the first. The choice is the same as the
tiers run one after another would make at that generation; the engine is spared the queries
whose only use was to find out they had too few hits.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, TypeVar

from control_plane.engine import Engine
from control_plane.plan import Plan
from control_plane.plan_cache import RenderedTier
from control_plane.renderer import TIERS, Tier, parse_clause_name

Render = Callable[[Tier], RenderedTier]
"""the rendered body of a tier (rendered once, or taken from the plan cache)"""

Searches = list[tuple[str, str]]
"""one ``_msearch``: (index, request body as JSON text) per search"""

T = TypeVar("T")
Steps = Generator[Searches, Sequence[Mapping[str, Any]], T]
"""An execution as steps, without I/O: each step yields the searches of one ``_msearch`` and
is sent their answers; its return value is the result. :func:`drive` runs it with a
synchronous engine, :func:`drive_async` from the event loop (``control_plane.engine.aio``),
so both make the same requests and take the same decisions."""

Batching = Literal["together", "strict_first", "cheap_first", "serial"]
"""how a plan's tiers are sent when nothing is known about it yet (its first run): all in
one request, strict alone then the others in one request, the cheap tiers (strict and
relaxed) in one request then broad (fuzzy, the expensive one) alone, or one request per
tier"""


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
    """the round trip the tier was sent in (shared by the tiers of one batch)"""
    start_ns: int = 0
    """``perf_counter_ns`` when that round trip started"""
    replayed: bool = False
    """not sent: the total the last full run saw at the same catalog generation (:class:`Replay`)"""


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
    round_trips: int = 0
    """engine requests the tiers took (batches sent)"""


@dataclass(frozen=True)
class Replay:
    """What a plan's last full run that fell back saw at one catalog generation."""

    key: Hashable
    """the catalog generation and the request's purchase boosts it was seen with"""
    totals: tuple[tuple[Tier, int], ...]
    """every tier run, in order, and its total"""
    served: Tier


def replay_of(execution: Execution, key: Hashable) -> Replay | None:
    """The replay of a run that fell back and served a tier (None otherwise: one tier ran,
    or nothing was found)."""
    if len(execution.runs) < 2 or execution.tier is None or any(run.replayed for run in execution.runs):
        return None
    return Replay(key, tuple((run.tier, run.total) for run in execution.runs), execution.tier)


def replay_steps(index: str, render: Render, replay: Replay) -> Steps[Execution | None]:
    """Send only the tier ``replay`` served; None when its total is not what it was (the
    caller then runs the tiers again). As steps (see :data:`Steps`)."""
    rendered = render(replay.served)
    started = time.perf_counter_ns()
    response = (yield [(index, rendered.text)])[0]
    took = round((time.perf_counter_ns() - started) / 1e6, 3)
    total = int(response["hits"]["total"]["value"])
    if total != dict(replay.totals)[replay.served]:
        return None
    runs = tuple(
        TierRun(tier, count, took, started) if tier == replay.served
        else TierRun(tier, count, 0.0, 0, replayed=True)
        for tier, count in replay.totals
    )
    return _answered(replay.served, rendered.body, response, runs, 1)


def drive(steps: Steps[T], msearch: Callable[[Searches], Sequence[Mapping[str, Any]]]) -> T:
    """Run ``steps``, each ``_msearch`` through ``msearch``."""
    try:
        searches = next(steps)
    except StopIteration as done:
        result: T = done.value
        return result
    return resume(steps, msearch(searches), msearch)


def resume(
    steps: Steps[T],
    answers: Sequence[Mapping[str, Any]],
    msearch: Callable[[Searches], Sequence[Mapping[str, Any]]],
) -> T:
    """Run ``steps`` on from its first ``_msearch``, which the caller sent (with searches of
    its own, say) and got ``answers`` to; the next ones through ``msearch``."""
    try:
        searches = steps.send(answers)
        while True:
            searches = steps.send(msearch(searches))
    except StopIteration as done:
        result: T = done.value
        return result


async def drive_async(
    steps: Steps[T], msearch: Callable[[Searches], Awaitable[Sequence[Mapping[str, Any]]]]
) -> T:
    """Run ``steps`` from the event loop, each ``_msearch`` awaited through ``msearch``."""
    try:
        searches = next(steps)
        while True:
            searches = steps.send(await msearch(searches))
    except StopIteration as done:
        result: T = done.value
        return result


def tiers_for(plan: Plan) -> tuple[Tier, ...]:
    if not plan.residual.strip() or plan.route == "browse":
        return ("strict",)
    return TIERS


@lru_cache(maxsize=256)  # a handful of distinct arguments; called on every search
def tier_batches(
    tiers: tuple[Tier, ...], batching: Batching, stop_tier: str | None = None
) -> tuple[tuple[Tier, ...], ...]:
    """The tiers in the batches they are sent in. ``stop_tier``: where the fallback stopped
    the last time this plan ran (the plan cache remembers it); every tier up to it goes in
    the first batch, so a repeated request takes one round trip and asks the engine for
    no tier the previous answer did not need. Without it, ``batching`` decides."""
    tiers = tuple(tiers)
    known = [n for n, tier in enumerate(tiers) if tier == stop_tier]
    if known:
        cut = known[0] + 1
    elif batching == "serial":
        cut = 1
    elif batching == "cheap_first":
        cut = len([tier for tier in tiers if tier != "broad"]) or 1
    else:
        cut = len(tiers) if batching == "together" else 1
    first, rest = tiers[:cut], tiers[cut:]
    if batching in ("serial", "cheap_first"):  # what the last run did not reach: one tier at a time
        return (first, *((tier,) for tier in rest))
    return tuple(batch for batch in (first, rest) if batch)


def execute(
    engine: Engine,
    index: str,
    plan: Plan,
    render: Render,
    *,
    min_hits: int,
    batches: Sequence[Sequence[Tier]] | None = None,
) -> Execution:
    """Run ``plan``'s tiers on ``index`` in ``batches`` (default: one tier per request)."""
    return drive(execution_steps(index, plan, render, min_hits=min_hits, batches=batches), engine.msearch)


def execution_steps(
    index: str,
    plan: Plan,
    render: Render,
    *,
    min_hits: int,
    batches: Sequence[Sequence[Tier]] | None = None,
) -> Steps[Execution]:
    """:func:`execute` as steps (see :data:`Steps`)."""
    runs: list[TierRun] = []
    answers: list[tuple[Tier, Mapping[str, Any], Mapping[str, Any]]] = []
    round_trips = 0
    for batch in batches if batches is not None else tier_batches(tiers_for(plan), "serial"):
        bodies = [render(tier) for tier in batch]
        started = time.perf_counter_ns()
        responses = yield [(index, body.text) for body in bodies]
        round_trips += 1
        took = round((time.perf_counter_ns() - started) / 1e6, 3)
        reached = False
        for tier, rendered, response in zip(batch, bodies, responses, strict=True):
            total = int(response["hits"]["total"]["value"])
            runs.append(TierRun(tier, total, took, started))
            answers.append((tier, rendered.body, response))
            if total >= min_hits:
                reached = True
                break
        if reached:
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
            round_trips=round_trips,
        )
    return _answered(tier, body, response, tuple(runs), round_trips)


def _answered(
    tier: Tier,
    body: Mapping[str, Any],
    response: Mapping[str, Any],
    runs: tuple[TierRun, ...],
    round_trips: int,
) -> Execution:
    """The execution that serves ``tier``'s ``response`` (at least one hit)."""
    return Execution(
        status="ok",
        tier=tier,
        total=int(response["hits"]["total"]["value"]),
        hits=tuple(_hit(raw) for raw in response["hits"]["hits"]),
        facets=facets_from(response.get("aggregations") or {}),
        dsl=body,
        runs=runs,
        round_trips=round_trips,
    )


def _served(
    answers: Sequence[tuple[Tier, Mapping[str, Any], Mapping[str, Any]]], min_hits: int
) -> tuple[Tier, Mapping[str, Any], Mapping[str, Any]]:
    def total(answer: tuple[Tier, Mapping[str, Any], Mapping[str, Any]]) -> int:
        return int(answer[2]["hits"]["total"]["value"])

    if total(answers[-1]) >= min_hits:
        return answers[-1]
    return max(answers, key=lambda answer: (total(answer), -TIERS.index(answer[0])))


def _hit(raw: Mapping[str, Any]) -> Hit:
    names = raw.get("matched_queries")
    if names:  # Elasticsearch 8.8+ may return {name: score}: its names are its keys
        policies, sponsored_by = _policies_of(tuple(names))
    else:
        policies = sponsored_by = ()
    # positionally: id, score, source, policies, sponsored_by
    return Hit(str(raw["_id"]), raw.get("_score"), raw.get("_source") or {}, policies, sponsored_by)


@lru_cache(maxsize=4096)
def _policies_of(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the policies, the sponsoring ones) a hit's matched clause names name: parsed once
    per distinct set of names (hits of a cached plan's searches repeat them)."""
    policies: set[str] = set()
    sponsored: set[str] = set()
    for name in names:
        parsed = parse_clause_name(name)
        if parsed is None:
            continue
        (sponsored if parsed.kind == "sponsored" else policies).add(parsed.policy)
    return tuple(sorted(policies | sponsored)), tuple(sorted(sponsored))


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

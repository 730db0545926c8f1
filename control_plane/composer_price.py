"""Price bounds for the composer (see :mod:`control_plane.composer`, section 7).

During the cascade, price rules add :class:`PriceClaim` s and the plan shows the bound
folded from the absolute claims so far. :func:`finish_price` resolves relative claims
against the final category's statistics and folds every claim into the final bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

import control_plane.composer_state as composer_state
from control_plane.composer_state import Actor, PriceClaim, Side, State, made, precedence
from control_plane.plan import Bound, Constraint, PriceBounds
from control_plane.policy import PriceRule, RelativeBound

ALL_CATEGORIES = "_all"


class StatsLike(Protocol):
    """What the composer reads from a category's price statistics."""

    @property
    def count(self) -> int: ...

    def percentile(self, p: int, /) -> float: ...


def claim_price(state: State, actor: Actor, body: PriceRule) -> State:
    claims = list(state.prices)
    absolute = False
    for side in ("min", "max"):
        bound = body.min if side == "min" else body.max
        if bound is None:
            continue
        if type(bound) is float or type(bound) is int:  # the usual bound, without the model hook
            claims.append(_claim(side, actor, body.strategy, float(bound)))
            absolute = True
        elif isinstance(bound, RelativeBound):
            claims.append(_claim(side, actor, body.strategy, None, bound.percentile, bound.of))
        elif isinstance(bound, str):
            raise TypeError(f"price bound {bound!r} of '{actor.id}' reached the cascade unbound")
        else:
            claims.append(_claim(side, actor, body.strategy, float(bound)))
            absolute = True
    state = state.evolved(prices=tuple(claims))
    if not absolute and not composer_state.REFERENCE:  # a relative claim waits: the bounds so far stand
        return state
    resolved = [c for c in state.prices if c.value is not None]
    current = state.plan.price
    low, high = _bound("min", resolved, current.min), _bound("max", resolved, current.max)
    if low is current.min and high is current.max and not composer_state.REFERENCE:
        return state
    return state.with_plan(price=made(PriceBounds, {"min": low, "max": high}))


def _claim(
    side: Side,
    actor: Actor,
    strategy: Literal["most_restrictive", "override"],
    value: float | None,
    percentile: int | None = None,
    of: Literal["union", "each", "max"] = "union",
) -> PriceClaim:
    """``PriceClaim(...)`` without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field)."""
    claim = object.__new__(PriceClaim)
    claim.__dict__.update(
        side=side, actor=actor, strategy=strategy, value=value, percentile=percentile, of=of
    )
    return claim


def _resolved(claim: PriceClaim, value: float) -> PriceClaim:
    """``claim`` with its value (``dataclasses.replace``, without ``__init__``)."""
    new = object.__new__(PriceClaim)
    fields = new.__dict__
    fields.update(claim.__dict__)
    fields["value"] = value
    return new


def _bound(side: Side, claims: Sequence[PriceClaim], current: Bound | None = None) -> Bound | None:
    """The bound :func:`_fold` gives for ``claims``, without wording its resolutions: during
    the cascade the plan shows the bound so far, and the contests are recorded once, by
    :func:`finish_price` (``claims`` are resolved and in application order). ``current``
    (the plan's bound so far) is returned itself when the bound is the same."""
    best: PriceClaim | None = None
    holder: Actor | None = None
    for claim in claims:
        if claim.side != side:
            continue
        assert claim.value is not None
        if best is None or best.value is None:
            best = claim
            holder = claim.actor if claim.strategy == "override" else None
            continue
        if holder is not None and not claim.actor.consumes:
            continue
        if _tighter(side, claim.value, best.value):
            best = claim
        if claim.strategy == "override" and holder is None:
            holder = claim.actor
    if best is None or best.value is None:
        return None
    if current is not None and not composer_state.REFERENCE:
        data = current.__dict__
        if (
            data["value"] is best.value and data["policy"] == best.actor.id
            and data["relative"] == best.percentile
        ):
            return current
    return made(Bound, {"value": best.value, "policy": best.actor.id, "relative": best.percentile})


def _rank(claim: PriceClaim) -> int:
    return claim.actor.rank


def _tighter(side: Side, a: float, b: float) -> bool:
    return a > b if side == "min" else a < b


def _fold(state: State, side: Side, claims: Sequence[PriceClaim]) -> tuple[State, Bound | None]:
    """One side's bound from its claims, in application order; resolutions recorded."""
    key = f"price.{side}"
    best: PriceClaim | None = None
    holder: Actor | None = None
    for claim in sorted([c for c in claims if c.side == side], key=_rank):
        assert claim.value is not None
        if best is None or best.value is None:
            best = claim
            holder = claim.actor if claim.strategy == "override" else None
            continue
        if holder is not None and not claim.actor.consumes:
            reason = (
                f"{key} is held by the override of '{holder.id}'"
                f" ({precedence(holder, claim.actor)}): {claim.value} ignored"
            )
            state = state.record(key, "override", holder, [claim.actor], reason)
            continue
        sign = ">" if side == "min" else "<"
        note = ""
        if holder is not None:
            note = (
                f" ('{claim.actor.id}' consumed the shopper's words,"
                f" so it may tighten the bound held by '{holder.id}')"
            )
        elif claim.strategy == "override":
            note = (
                f" (an override cannot loosen a higher-precedence bound; '{claim.actor.id}' now holds {key})"
            )
        if _tighter(side, claim.value, best.value):
            reason = f"most restrictive: {claim.value} {sign} {best.value}{note}"
            state = state.record(key, "most_restrictive", claim.actor, [best.actor], reason)
            best = claim
        else:
            relation = "=" if claim.value == best.value else sign
            reason = f"most restrictive: {best.value} {relation} {claim.value}{note}"
            state = state.record(key, "most_restrictive", best.actor, [claim.actor], reason)
        if claim.strategy == "override" and holder is None:
            holder = claim.actor
    if best is None or best.value is None:
        return state, None
    if composer_state.REFERENCE:
        return state, Bound(value=best.value, policy=best.actor.id, relative=best.percentile)
    return state, made(Bound, {"value": best.value, "policy": best.actor.id, "relative": best.percentile})


def finish_price(state: State, stats: Mapping[str, StatsLike]) -> State:
    """Resolve relative claims against the final category, then fold both sides."""
    if not state.prices and not composer_state.REFERENCE:
        return state  # no price rule applied: the bounds stay empty
    state = state.draft()  # one copy, then the resolutions are recorded in place
    claims: list[PriceClaim] = []
    found: dict[tuple[object, ...], tuple[float, str]] = {}  # what _percentile reads of a claim
    for claim in state.prices:
        if claim.percentile is not None:
            asked = (claim.percentile, claim.of, claim.side)
            known = None if composer_state.REFERENCE else found.get(asked)
            if known is None:
                known = found[asked] = _percentile(claim, state.plan.category, stats)
            value, reason = known
            state = state.record(f"price.{claim.side}", "relative", claim.actor, [], reason)
            claim = _resolved(claim, value)
        claims.append(claim)
    state, low = _fold(state, "min", claims)
    state, high = _fold(state, "max", claims)
    if low is not None and high is not None and low.value > high.value:
        keep, drop = sorted((state.actors[low.policy], state.actors[high.policy]), key=lambda a: a.rank)
        reason = f"floor {low.value} is above ceiling {high.value}: {precedence(keep, drop)}"
        state = state.record("price", "floor_below_ceiling", keep, [drop], reason)
        if drop.id == low.policy and keep.id != drop.id:
            low = None
        else:
            high = None
    if composer_state.REFERENCE:
        return state.with_plan(price=PriceBounds(min=low, max=high))
    return state.with_plan(price=made(PriceBounds, {"min": low, "max": high}))


def _percentile(
    claim: PriceClaim, category: Constraint | None, stats: Mapping[str, StatsLike]
) -> tuple[float, str]:
    """The claim's percentile for the final category, and how it was found."""
    assert claim.percentile is not None
    p = claim.percentile
    names = [str(v) for v in category.values] if category is not None else []
    if not names:
        value = _stat(p, ALL_CATEGORIES, stats)
        return value, f"p{p} of all categories ('{ALL_CATEGORIES}') = {value}"
    parts: list[tuple[float, str]] = []
    known: list[StatsLike] = []
    for name in names:
        found = stats.get(name)
        if found is not None and found.count > 0:
            value = _stat(p, name, stats)
            parts.append((value, f"'{name}' = {value}"))
            known.append(found)
        else:
            value = _stat(p, ALL_CATEGORIES, stats)
            fallback = f"no price statistics for '{name}': '{ALL_CATEGORIES}' used"
            parts.append((value, f"'{name}' = {value} ({fallback})"))
            known.append(stats[ALL_CATEGORIES])
    if len(parts) == 1:
        return parts[0][0], f"p{p} of category {parts[0][1]}"
    listed = ", ".join(text for _, text in parts)
    if claim.of == "union":
        samples = [(s.count, tuple(getattr(s, "samples", ()))) for s in known]
        if all(found for _, found in samples):
            value = round(union_percentile(samples, p), 2)
            return value, f"p{p} of the union of {', '.join(repr(n) for n in names)} = {value}"
        best = max(value for value, _ in parts)
        return best, (
            f"p{p} = {best}, the highest of {listed} (of: union, but the statistics keep no"
            " price samples: reload the catalog)"
        )
    if claim.of == "each" and claim.side == "max":
        value = min(value for value, _ in parts)
        return value, f"p{p} = {value}, the lowest of {listed} (of: each)"
    value = max(value for value, _ in parts)
    return value, f"p{p} = {value}, the highest of {listed} (of: {claim.of})"


def union_percentile(parts: Iterable[tuple[int, tuple[float, ...]]], p: float) -> float:
    """The p-th percentile (type 7) of the union of several categories' prices, each given
    as (count, samples): a sample stands for count / len(samples) prices, so the result is
    exact when every category kept all its prices. A product in two of the categories
    counts twice."""
    weighted = sorted(
        (price, count / len(samples)) for count, samples in parts if samples for price in samples
    )
    if not weighted:
        raise ValueError("no samples")
    total = math.fsum(weight for _, weight in weighted)
    rank = (total - 1) * p / 100
    start = 0.0
    for index, (price, weight) in enumerate(weighted):
        last = start + weight - 1  # the last virtual position this sample stands for
        if rank <= last or index == len(weighted) - 1:
            return price
        if rank < start + weight:
            following = weighted[index + 1][0]
            return price + (rank - last) * (following - price)
        start += weight
    return weighted[-1][0]


def _stat(p: int, name: str, stats: Mapping[str, StatsLike]) -> float:
    found = stats.get(name)
    if found is None:
        needed = f"the composer needs '{ALL_CATEGORIES}' at least"
        raise ValueError(f"no price statistics for '{name}': {needed}")
    value = float(found.percentile(p))
    if not math.isfinite(value):
        raise ValueError(f"price statistics for '{name}' give p{p} = {value}")
    return value

"""The composer's working state (see :mod:`control_plane.composer`).

A :class:`State` is the plan so far plus the bookkeeping the field strategies need: which
policy first set a field, which override holds it, price claims waiting for the final
category, and the resolutions recorded on the way. It is frozen: every strategy returns a
new one. Nothing here depends on dict or set iteration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, TypeVar

from pydantic import BaseModel

from control_plane.plan import Constraint, Plan, Resolution
from control_plane.policy import SPECIFICITY, Governance, Policy, RewriteRule, Value

Side = Literal["min", "max"]


@dataclass(frozen=True)
class Actor:
    """A policy taking its turn in the cascade, with what decides its precedence."""

    policy: Policy
    rank: int
    """position in the application order (0 applies first)"""
    length: int
    """intent characters its spans cover"""

    @property
    def id(self) -> str:
        return self.policy.id

    @property
    def consumes(self) -> bool:
        return self.policy.trigger.consume

    @property
    def is_guard(self) -> bool:
        return self.policy.kind == "guard"


@dataclass(frozen=True)
class PriceClaim:
    """One bound a price rule asked for; relative claims get their value at the end."""

    side: Side
    actor: Actor
    strategy: Literal["most_restrictive", "override"]
    value: float | None
    percentile: int | None = None
    of: Literal["union", "each", "max"] = "union"
    """several resolved categories: which percentile (``RelativeBound.of``)"""


@dataclass(frozen=True)
class State:
    """The plan so far, and what the strategies remember about how it was built."""

    plan: Plan
    governance: Governance
    category_field: str
    actors: Mapping[str, Actor] = field(default_factory=dict)
    """policy id -> its actor, for every policy in the cascade"""
    setters: Mapping[str, Actor] = field(default_factory=dict)
    """field key -> the first (highest-precedence) policy that set it"""
    holds: Mapping[str, Actor] = field(default_factory=dict)
    """field key -> the override holding it"""
    prices: tuple[PriceClaim, ...] = ()
    pinned_by: Mapping[str, Actor] = field(default_factory=dict)
    hidden_by: Mapping[str, Actor] = field(default_factory=dict)
    rewrites: tuple[RewriteRule, ...] = ()
    resolutions: tuple[Resolution, ...] = ()

    def evolved(self, **changes: object) -> State:
        """A copy with ``changes``: what ``dataclasses.replace`` gives, without running
        ``__init__`` again (a new state per rule puts this on the composer's hot path)."""
        if not _STATE_FIELDS.issuperset(changes):
            unknown = changes.keys() - _STATE_FIELDS
            raise TypeError(f"State has no field {', '.join(sorted(unknown))}")
        new = object.__new__(State)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def with_plan(self, **update: object) -> State:
        return self.evolved(plan=replaced(self.plan, update))

    def record(self, key: str, strategy: str, winner: Actor, losers: Sequence[Actor], reason: str) -> State:
        resolution = made(
            Resolution,
            {
                "field": key,
                "strategy": strategy,
                "winner": winner.policy.id,
                "losers": tuple(loser.policy.id for loser in losers),
                "reason": reason,
            },
        )
        return self.evolved(resolutions=(*self.resolutions, resolution))

    def noted(self, resolution: Resolution) -> State:
        return self.evolved(resolutions=(*self.resolutions, resolution))


_STATE_FIELDS = frozenset(f.name for f in fields(State))

_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__
_new = object.__new__


def made(cls: type[_M], values: dict[str, object]) -> _M:
    """``cls(**values)`` without validation, for the explanation records the cascade makes
    by the hundred from data validated at the edges (policies, matches). ``values`` names
    every field of ``cls`` in declaration order, each of its declared type (tuples, not
    lists): ``tests/composer/test_fast_models.py`` revalidates whole compositions to hold
    the composer to it."""
    new = _new(cls)
    _set(new, "__dict__", values)
    _set(new, "__pydantic_fields_set__", set(values))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def replaced(model: _M, update: Mapping[str, object]) -> _M:
    """``model.model_copy(update=update)`` (no validation either), without pydantic's
    generic copy machinery: a new plan per rule puts this on the composer's hot path.
    The models here are frozen, with ``extra="forbid"`` and no private attributes."""
    new = object.__new__(type(model))
    values = model.__dict__.copy()
    values.update(update)
    _set(new, "__dict__", values)
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


# --- shared wording and value handling -------------------------------------------------


def precedence(winner: Actor, loser: Actor) -> str:
    """Why ``winner`` comes before ``loser`` in the application order, in words."""
    w, lo = winner.policy, loser.policy
    if w.id == lo.id:
        return "an earlier rule of the same policy"
    if w.priority != lo.priority:
        return f"priority {w.priority} > {lo.priority}"
    same = f"priority {w.priority} = {lo.priority}"
    if SPECIFICITY[w.trigger.kind] != SPECIFICITY[lo.trigger.kind]:
        return f"{same}, {w.trigger.kind} is more specific than {lo.trigger.kind}"
    if winner.length != loser.length:
        return f"{same}, both {w.trigger.kind}, longer match {winner.length} > {loser.length}"
    return f"{same}, both {w.trigger.kind}, same match length, id '{w.id}' < '{lo.id}'"


def identity(value: Value) -> tuple[str, str]:
    return (type(value).__name__, repr(value))


def _order(value: Value) -> tuple[str, float, str]:
    if isinstance(value, str):
        return ("str", 0.0, value)
    return (type(value).__name__, float(value), "")


def canonical(values: Iterable[Value]) -> tuple[Value, ...]:
    """Distinct values, sorted (``1`` and ``True`` stay distinct)."""
    distinct = {identity(value): value for value in values}
    return tuple(sorted(distinct.values(), key=_order))


def shown(values: Iterable[Value]) -> str:
    return "[" + ", ".join(repr(v) if isinstance(v, str) else str(v) for v in values) + "]"


def with_actor(mapping: Mapping[str, Actor], key: str, actor: Actor) -> dict[str, Actor]:
    return {**mapping, key: actor}


def by_field(constraints: Iterable[Constraint]) -> tuple[Constraint, ...]:
    return tuple(sorted(constraints, key=lambda c: (c.field, c.policies, shown(c.values))))

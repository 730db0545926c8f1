"""The composer's working state (see :mod:`control_plane.composer`).

A :class:`State` is the plan so far plus the bookkeeping the field strategies need: which
policy first set a field, which override holds it, price claims waiting for the final
category, and the resolutions recorded on the way. It is frozen: every strategy returns a
new one, except that inside one step of the cascade the composer hands the strategies a
:class:`Draft`, which they change in place (ADR 0021). Nothing here depends on dict or set
iteration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, fields
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from control_plane.bounded import keep
from control_plane.plan import Constraint, Plan, Resolution
from control_plane.policy import SPECIFICITY, Governance, Policy, RewriteRule, Value

Side = Literal["min", "max"]

#: on: the reference path, which ``tests/composer/test_incremental.py`` holds the fast one
#: to: a frozen state per rule, the residual recomputed from every consumed span, pydantic's
#: dumps, nothing remembered across composes (ADR 0021)
REFERENCE = False


@dataclass(frozen=True)
class Actor:
    """A policy taking its turn in the cascade, with what decides its precedence."""

    policy: Policy
    rank: int
    """position in the application order (0 applies first)"""
    length: int
    """intent characters its spans cover"""
    id: str = field(init=False)
    """the policy's id (read by every strategy: kept, not looked up through the policy)"""
    consumes: bool = field(init=False)
    """the policy's trigger consumes its words"""
    is_guard: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self.policy.id)
        object.__setattr__(self, "consumes", self.policy.trigger.consume)
        object.__setattr__(self, "is_guard", self.policy.kind == "guard")


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
                "losers": _ids(losers),
                "reason": reason,
            },
        )
        return self.noted(resolution)

    def noted(self, resolution: Resolution) -> State:
        """``resolution`` appended (one already made: :meth:`record` makes one)."""
        return self.evolved(resolutions=(*self.resolutions, resolution))

    def draft(self) -> State:
        """A working copy for one step of the cascade (see :class:`Draft`)."""
        if REFERENCE:
            return self
        new = _new(Draft)
        values = new.__dict__
        values.update(self.__dict__)
        values["touched"] = _UNTOUCHED  # a set of its own with the plan's first change
        values["own_plan"] = False
        return new


@dataclass(frozen=True)
class Draft(State):
    """The state inside one step of the cascade, changed in place.

    The field strategies are written against the frozen API (``state = state.evolved(...)``,
    ``state.with_plan(...)``, ``state.record(...)``); on a draft those calls change the
    draft itself and return it, so a step costs one copy of the state (and of the plan,
    when a rule changes it) instead of one per rule. The state it was drafted from is
    untouched: the composer compares the two for the step's changes and falls back to the
    original when the step is undone (ADR 0021). ``touched`` names the plan fields the step
    set to another value, so only those are compared. Once the step is over, the composer
    drafts the next step from it and never changes it again.
    """

    touched: AbstractSet[str] = field(default_factory=frozenset)
    own_plan: bool = False
    """the plan is this draft's own copy (made on the first change)"""

    def evolved(self, **changes: object) -> State:
        if "plan" in changes:
            raise TypeError("a draft's plan changes through with_plan, field by field")
        if not _STATE_FIELDS.issuperset(changes):
            unknown = changes.keys() - _STATE_FIELDS
            raise TypeError(f"State has no field {', '.join(sorted(unknown))}")
        self.__dict__.update(changes)
        return self

    def noted(self, resolution: Resolution) -> State:  # (``record`` comes here too)
        values = self.__dict__
        values["resolutions"] = (*values["resolutions"], resolution)
        return self

    def with_plan(self, **update: object) -> State:
        values = self.__dict__
        current = values["plan"].__dict__
        if len(update) == 1:  # the usual call: one field
            (name, value), = update.items()
            if current[name] is value:
                return self
            changed = [name]
        else:
            changed = [name for name, value in update.items() if current[name] is not value]
            if not changed:
                return self
        if not values["own_plan"]:  # ``replaced(plan, update)``, with the touched set made
            old = values["plan"]
            plan = _new(Plan)
            fields = old.__dict__.copy()
            fields.update(update)
            _DICT(plan, fields)
            _FIELDS_SET(plan, old.__pydantic_fields_set__.union(changed))
            _EXTRA(plan, None)
            _PRIVATE(plan, None)
            values["plan"] = plan
            values["own_plan"] = True
            values["touched"] = set(changed)
            return self
        plan = values["plan"]
        for name in changed:
            plan.__dict__[name] = update[name]
        plan.__pydantic_fields_set__.update(changed)
        values["touched"].update(changed)
        return self


_STATE_FIELDS = frozenset(f.name for f in fields(State))
_UNTOUCHED: frozenset[str] = frozenset()


_V = TypeVar("_V")


class Remembered(Generic[_V]):
    """Values computed from an immutable object of the policy set (a policy, a rule body),
    optionally other objects (``also``: the set's vocabularies, the catalog's money
    notation) and a few hashable keys, remembered across composes by the objects'
    identity: what a policy's rule proposes does not change until a new version brings new
    objects. An entry holds its objects, so their ids are never reused while it is
    remembered; the table is bounded (cleared when full: bodies with substituted captures
    are new per compose)."""

    def __init__(self, limit: int = 16_384) -> None:
        self._entries: dict[tuple[object, ...], tuple[object, tuple[object, ...], _V]] = {}
        self._limit = limit

    def get(self, owner: object, *keys: object, also: tuple[object, ...] = ()) -> _V | None:
        if REFERENCE:
            return None
        key = (id(owner), len(also), *map(id, also), *keys) if also else (id(owner), 0, *keys)
        entry = self._entries.get(key)
        if entry is None or entry[0] is not owner:
            return None
        for held, given in zip(entry[1], also, strict=True):  # the key holds their count
            if held is not given:
                return None
        return entry[2]

    def put(self, owner: object, value: _V, *keys: object, also: tuple[object, ...] = ()) -> _V:
        keep(self._entries, (id(owner), len(also), *map(id, also), *keys), (owner, also, value), self._limit)
        return value


_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
#: the slots every pydantic model has, set through their descriptors (no attribute lookup)
_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
_DICT = BaseModel.__dict__["__dict__"].__set__


def _ids(losers: Sequence[Actor]) -> tuple[str, ...]:
    if len(losers) == 1:  # the usual contest
        return (losers[0].policy.id,)
    if not losers:  # a resolution without a loser (a percentile resolved, an intersection)
        return ()
    return tuple([loser.policy.id for loser in losers])


def made(cls: type[_M], values: dict[str, object]) -> _M:
    """``cls(**values)`` without validation, for the explanation records the cascade makes
    by the hundred from data validated at the edges (policies, matches). ``values`` names
    every field of ``cls`` in declaration order, each of its declared type (tuples, not
    lists): ``tests/composer/test_fast_models.py`` revalidates whole compositions to hold
    the composer to it."""
    new = _new(cls)
    _DICT(new, values)
    fields_set = _ALL_SET.get(cls)
    if fields_set is None:
        fields_set = _ALL_SET[cls] = set(cls.model_fields)
    _FIELDS_SET(new, fields_set)  # shared: frozen models, and model_copy copies it
    _EXTRA(new, None)
    _PRIVATE(new, None)
    return new


#: model class -> the set of all its fields, which every record ``made`` of it shares
_ALL_SET: dict[type, set[str]] = {}


def replaced(model: _M, update: Mapping[str, object]) -> _M:
    """``model.model_copy(update=update)`` (no validation either), without pydantic's
    generic copy machinery: a new plan per rule puts this on the composer's hot path.
    The models here are frozen, with ``extra="forbid"`` and no private attributes."""
    new = _new(type(model))
    values = model.__dict__.copy()
    values.update(update)
    _DICT(new, values)
    _FIELDS_SET(new, model.__pydantic_fields_set__ | update.keys())
    _EXTRA(new, None)
    _PRIVATE(new, None)
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

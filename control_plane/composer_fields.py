"""Per-field conflict strategies of the composer (see :mod:`control_plane.composer`).

:func:`apply` applies one rule body (captures already substituted) of one :class:`Actor`
to the :class:`State` so far and returns the new state; one function per plan field.
Price bounds live in :mod:`control_plane.composer_price`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_
from typing import Any, assert_never

import control_plane.composer_state as composer_state
from control_plane.bounded import keep
from control_plane.composer_price import claim_price
from control_plane.composer_state import (
    Actor,
    Remembered,
    State,
    by_field,
    canonical,
    identity,
    made,
    precedence,
    replaced,
    shown,
    with_actor,
)
from control_plane.plan import Boost, Constraint, Resolution, Sponsored, Weight
from control_plane.policy import (
    BoostRule,
    BuryRule,
    CategoryRule,
    EconomicsRule,
    ExcludeRule,
    FilterRule,
    HideRule,
    PinRule,
    PriceRule,
    RewriteRule,
    RouteRule,
    RuleBody,
    SponsoredRule,
    SynonymsRule,
    Value,
)

# --- dispatch --------------------------------------------------------------------------


def apply(state: State, actor: Actor, body: RuleBody) -> State:
    """Apply one rule body of ``actor`` to ``state``."""
    step = _STEPS.get(type(body))  # one lookup instead of a class pattern per kind
    if step is not None:
        return step(state, actor, body)
    match body:
        case FilterRule():
            return _guard(state, actor, body) if actor.is_guard else _filter(state, actor, body)
        case ExcludeRule():
            return _guard(state, actor, body) if actor.is_guard else _exclude(state, actor, body)
        case CategoryRule():
            return _category(state, actor, body)
        case PriceRule():
            return claim_price(state, actor, body)
        case BoostRule() | BuryRule():
            return _boost(state, actor, body)
        case PinRule():
            return _pin(state, actor, body)
        case HideRule():
            return _hide(state, actor, body)
        case SponsoredRule():
            return _sponsored(state, actor, body)
        case RewriteRule():
            return state.evolved(rewrites=(*state.rewrites, body))
        case SynonymsRule():
            terms = (" ".join(t.split()) for t in (*state.plan.synonyms, *body.terms))
            return state.with_plan(synonyms=tuple(sorted({t for t in terms if t})))
        case RouteRule():
            return _route(state, actor, body)
        case EconomicsRule():
            return _economics(state, actor, body)
        case _:
            assert_never(body)


def _filter_or_guard(state: State, actor: Actor, body: FilterRule) -> State:
    return _guard(state, actor, body) if actor.policy.kind == "guard" else _filter(state, actor, body)


def _exclude_or_guard(state: State, actor: Actor, body: ExcludeRule) -> State:
    return _guard(state, actor, body) if actor.policy.kind == "guard" else _exclude(state, actor, body)


# --- category and filters: sets of values on one field ----------------------------------


#: (rule body, field, policy id) -> the constraint the rule proposes
_PROPOSED: Remembered[Constraint] = Remembered()
#: (rule body, policy id) -> the boost the rule adds
_BOOSTS: Remembered[Boost] = Remembered()


def _proposed(body: CategoryRule | FilterRule | ExcludeRule, field: str, policy: str) -> Constraint:
    """The constraint a rule proposes on its own: its values canonical, its policy alone
    (``made``: the rule was validated with its policy; remembered per rule body)."""
    entry = None if composer_state.REFERENCE else _PROPOSED_BY_BODY.get(id(body))
    if entry is not None and entry[0] is body and entry[1] == field and entry[2] == policy:
        return entry[3]
    found = _PROPOSED.get(body, field, policy)
    if found is None:
        match = "terms" if isinstance(body, CategoryRule) else body.match or "terms"
        values = canonical(body.values)
        found = made(Constraint, {"field": field, "values": values, "policies": (policy,), "match": match})
        _PROPOSED.put(body, found, field, policy)
    if not composer_state.REFERENCE:
        keep(_PROPOSED_BY_BODY, id(body), (body, field, policy, found), _BY_BODY_LIMIT)
    return found


#: id(rule body) -> (the body, field, policy id, the constraint it proposes): the last
#: proposal of each body, found by one dict lookup (the entry holds the body, so its id is
#: not reused while it is there); bounded like :class:`Remembered`
_PROPOSED_BY_BODY: dict[int, tuple[object, str, str, Constraint]] = {}
#: id(rule body) -> (the body, policy id, the boost it adds, its field's key), likewise
_BOOSTS_BY_BODY: dict[int, tuple[object, str, Boost, str]] = {}
_BY_BODY_LIMIT = 16_384  # as Remembered


def _meet(
    state: State,
    actor: Actor,
    key: str,
    current: Constraint | None,
    proposed: Constraint,
    strategy: str,
    what: str,
) -> tuple[State, Constraint | None]:
    """A set-valued rule meets what is already on its field; returns the field's new value."""
    if current is None:
        state = state.evolved(setters=with_actor(state.setters, key, actor))
        if strategy == "override":
            state = state.evolved(holds=with_actor(state.holds, key, actor))
        return state, proposed
    holder = state.holds.get(key)
    narrows = strategy in ("override", "intersect")
    if holder is not None and not (actor.consumes and narrows):
        return _held(state, key, holder, actor, what), current
    policies = current.policies + ((actor.id,) if actor.id not in current.policies else ())
    if strategy == "merge":
        merged = canonical((*current.values, *proposed.values))
        return state, replaced(current, {"values": merged, "policies": policies})
    common = _common(current, proposed)
    if not common:
        winner = holder or state.setters[key]
        return _disjoint(state, key, strategy, winner, actor, current, proposed), current
    narrowed = f"{shown(current.values)} narrowed to {shown(common)}"
    if holder is not None:
        reason = (
            f"'{actor.id}' consumed the shopper's words, so it still narrows the {what}"
            f" held by '{holder.id}': {narrowed}"
        )
        state = state.record(key, strategy, actor, [], reason)
    elif strategy == "override":
        first = state.setters[key]
        reason = (
            f"an override cannot replace the {what} set by '{first.id}'"
            f" ({precedence(first, actor)}): {narrowed}, and '{actor.id}' now holds it"
        )
        state = state.record(key, "override", actor, [], reason)
        state = state.evolved(holds=with_actor(state.holds, key, actor))
    elif common != current.values or len(common) != len({identity(v) for v in proposed.values}):
        kept = f"{shown(current.values)} and {shown(proposed.values)} share {shown(common)}"
        state = state.record(key, "intersect", actor, [], kept)
    return state, replaced(current, {"values": common, "policies": policies})


def _held(state: State, key: str, holder: Actor, actor: Actor, what: str) -> State:
    """``actor``'s rule loses ``key`` to the override of ``holder``: the resolution, made
    once per pair of policies, their match lengths and the field (all that its wording
    reads) and shared by the compositions that record it (frozen)."""
    if composer_state.REFERENCE:
        reason = f"{what} is held by the override of '{holder.id}' ({precedence(holder, actor)})"
        return state.record(key, "override", holder, [actor], reason)
    return state.noted(_held_resolution(key, holder, actor, what))


def _held_resolution(key: str, holder: Actor, actor: Actor, what: str) -> Resolution:
    """What :func:`_held` notes (kept per pair of policies, lengths, key and wording)."""
    winner, loser = holder.policy, actor.policy
    pair = (id(winner), id(loser), holder.length, actor.length, key, what)
    entry = _HELD.get(pair)
    if entry is None or entry[0] is not winner or entry[1] is not loser:
        reason = f"{what} is held by the override of '{holder.id}' ({precedence(holder, actor)})"
        resolution = made(
            Resolution,
            {
                "field": key, "strategy": "override", "winner": holder.id, "losers": (actor.id,),
                "reason": reason,
            },
        )
        entry = (winner, loser, resolution)
        keep(_HELD, pair, entry, _BY_BODY_LIMIT)
    return entry[2]


def lost_to_holder(state: State, actor: Actor, body: RuleBody) -> Resolution | None:
    """The resolution a rule body notes when all it does is lose its field to the
    override holding it, or None when it may do anything else: a category rule on a held
    category, when :func:`_meet` then notes :func:`_held` (the policy does not consume its
    words, or its strategy does not narrow) or :func:`_disjoint` (it narrows, and has no
    value in common with the held one), and :func:`_category` sets nothing. The cascade's
    loop asks it first, so such a step costs no draft (``composer``; the reference path
    never asks)."""
    if type(body) is not CategoryRule:
        return None
    holder = state.holds.get("category")
    if holder is None:
        return None
    strategy = body.strategy
    if not (actor.consumes and strategy in ("override", "intersect")):
        return _held_resolution("category", holder, actor, "category")
    current = state.plan.category
    if current is None:  # (a held field has a value)
        return None
    proposed = _proposed(body, state.category_field, actor.id)
    if _common(current, proposed):  # it narrows the category: a change
        return None
    return _disjoint_resolution("category", strategy, holder, actor, current, proposed)


#: (id(holder's policy), id(loser's policy), their lengths, key, what) -> (the two
#: policies, the resolution): the entry holds the policies, so their ids are not reused
_HELD: dict[tuple[int, int, int, int, str, str], tuple[object, object, Resolution]] = {}


def _common(current: Constraint, proposed: Constraint) -> tuple[Value, ...]:
    """The values of ``current`` that ``proposed`` also has, in ``current``'s order;
    remembered per pair of constraint objects (most are the rules' own, the same objects
    from compose to compose; the entry holds both, so their ids are not reused)."""
    if not composer_state.REFERENCE:
        entry = _COMMON.get((id(current), id(proposed)))
        if entry is not None and entry[0] is current and entry[1] is proposed:
            return entry[2]
    wanted = {identity(v) for v in proposed.values}
    common = tuple(v for v in current.values if identity(v) in wanted)
    if not composer_state.REFERENCE:
        keep(_COMMON, (id(current), id(proposed)), (current, proposed, common), _BY_BODY_LIMIT)
    return common


_COMMON: dict[tuple[int, int], tuple[Constraint, Constraint, tuple[Value, ...]]] = {}


def _disjoint(
    state: State,
    key: str,
    strategy: str,
    winner: Actor,
    actor: Actor,
    current: Constraint,
    proposed: Constraint,
) -> State:
    """``proposed`` has nothing in common with ``current``: ``actor``'s rule loses to
    ``winner``. The resolution is made once per pair of constraints, of policies and
    their match lengths, key and strategy (all its wording reads), like :func:`_held`'s."""
    if composer_state.REFERENCE:
        reason = _disjoint_reason(winner, actor, current, proposed)
        return state.record(key, strategy, winner, [actor], reason)
    return state.noted(_disjoint_resolution(key, strategy, winner, actor, current, proposed))


def _disjoint_resolution(
    key: str, strategy: str, winner: Actor, actor: Actor, current: Constraint, proposed: Constraint
) -> Resolution:
    """What :func:`_disjoint` notes (kept as said there)."""
    held = (current, proposed, winner.policy, actor.policy)
    pair = (*map(id, held), winner.length, actor.length, key, strategy)
    entry = _DISJOINT.get(pair)
    if entry is None or not all(map(is_, entry[0], held)):  # (four objects on each side)
        reason = _disjoint_reason(winner, actor, current, proposed)
        resolution = made(
            Resolution,
            {
                "field": key, "strategy": strategy, "winner": winner.id, "losers": (actor.id,),
                "reason": reason,
            },
        )
        entry = (held, resolution)
        keep(_DISJOINT, pair, entry, _BY_BODY_LIMIT)
    return entry[1]


def _disjoint_reason(winner: Actor, actor: Actor, current: Constraint, proposed: Constraint) -> str:
    return (
        f"{shown(proposed.values)} has nothing in common with {shown(current.values)}"
        f" ({precedence(winner, actor)})"
    )


#: (ids of the constraints and policies, lengths, key, strategy) -> (those objects, the
#: resolution), bounded
_DISJOINT: dict[tuple[object, ...], tuple[tuple[object, ...], Resolution]] = {}


def _category(state: State, actor: Actor, body: CategoryRule) -> State:
    proposed = _proposed(body, state.category_field, actor.id)
    current = state.plan.category
    state, category = _meet(state, actor, "category", current, proposed, body.strategy, "category")
    if category is current and not composer_state.REFERENCE:  # lost, or held: nothing to set
        return state
    return state.with_plan(category=category)


def _filter(state: State, actor: Actor, body: FilterRule) -> State:
    match = body.match or "terms"
    key = f"filters.{body.field}" if match == "terms" else f"filters.{body.field}.{match}"
    others = [c for c in state.plan.filters if (c.field, c.match) != (body.field, match)]
    current = next((c for c in state.plan.filters if (c.field, c.match) == (body.field, match)), None)
    proposed = _proposed(body, body.field, actor.id)
    state, merged = _meet(state, actor, key, current, proposed, body.strategy, f"filter on '{body.field}'")
    for guard in (g for g in state.plan.guards if g.field == body.field):
        lift = "cannot lift it" if body.strategy == "override" else "does not replace it"
        reason = (
            f"the guard on '{body.field}' stays in force: '{actor.id}' {lift}, its filter applies in addition"
        )
        state = _guard_note(state, body.field, guard.policies[0], reason)
    return state.with_plan(filters=by_field([*others, *([merged] if merged else [])]))


def _exclude(state: State, actor: Actor, body: ExcludeRule) -> State:
    match = body.match or "terms"
    current = next((c for c in state.plan.exclusions if (c.field, c.match) == (body.field, match)), None)
    others = [c for c in state.plan.exclusions if (c.field, c.match) != (body.field, match)]
    if current is None:
        merged = _proposed(body, body.field, actor.id)
    else:
        policies = current.policies + ((actor.id,) if actor.id not in current.policies else ())
        values = canonical((*current.values, *body.values))
        merged = replaced(current, {"values": values, "policies": policies})
    return state.with_plan(exclusions=by_field([*others, merged]))


def _guard(state: State, actor: Actor, body: FilterRule | ExcludeRule) -> State:
    constraint = _proposed(body, body.field, actor.id)
    if isinstance(body, ExcludeRule):
        return state.with_plan(guard_exclusions=by_field([*state.plan.guard_exclusions, constraint]))
    for existing in (c for c in state.plan.filters if c.field == body.field):
        reason = (
            f"the guard on '{body.field}' stays in force: the filter of"
            f" {', '.join(repr(p) for p in existing.policies)} applies in addition"
        )
        state = _guard_note(state, body.field, actor.id, reason)
    return state.with_plan(guards=by_field([*state.plan.guards, constraint]))


def _guard_note(state: State, field: str, guard: str, reason: str) -> State:
    note = made(
        Resolution,
        {"field": f"guards.{field}", "strategy": "guard", "winner": guard, "losers": (), "reason": reason},
    )
    return state.noted(note)


# --- soft scoring -------------------------------------------------------------------------


def _boost(state: State, actor: Actor, body: BoostRule | BuryRule) -> State:
    entry = None if composer_state.REFERENCE else _BOOSTS_BY_BODY.get(id(body))
    if entry is not None and entry[0] is body and entry[1] == actor.id:  # the usual step
        holder = state.holds.get(entry[3])
        if holder is None and body.strategy != "override":  # accumulate: the boost added
            return state.with_plan(boosts=(*state.plan.boosts, entry[2]))
    key = f"boosts.{body.field}"
    holder = state.holds.get(key)
    if holder is not None:
        return _held(state, key, holder, actor, f"scoring on '{body.field}'")
    if body.strategy == "override":
        earlier = [b.policy for b in state.plan.boosts if b.field == body.field]
        if earlier:
            names = ", ".join(repr(p) for p in dict.fromkeys(earlier))
            reason = (
                f"an override cannot remove the boosts of {names} on '{body.field}'"
                f" (higher precedence): added alongside, and '{actor.id}' now holds the field"
            )
            state = state.record(key, "override", actor, [], reason)
        state = state.evolved(holds=with_actor(state.holds, key, actor))
    entry = None if composer_state.REFERENCE else _BOOSTS_BY_BODY.get(id(body))
    if entry is not None and entry[0] is body and entry[1] == actor.id:
        boost = entry[2]
    else:
        found = _BOOSTS.get(body, actor.id)
        if found is None:
            fields = {"field": body.field, "values": canonical(body.values), "weight": body.weight}
            found = made(Boost, {**fields, "policy": actor.id})
            _BOOSTS.put(body, found, actor.id)
        boost = found
        if not composer_state.REFERENCE:
            keep(_BOOSTS_BY_BODY, id(body), (body, actor.id, boost, key), _BY_BODY_LIMIT)
    return state.with_plan(boosts=(*state.plan.boosts, boost))


def _route(state: State, actor: Actor, body: RouteRule) -> State:
    setter = state.setters.get("route")
    if setter is not None:
        reason = f"{precedence(setter, actor)}: route stays '{state.plan.route}', not '{body.to}'"
        return state.record("route", "highest_priority", setter, [actor], reason)
    state = state.evolved(setters=with_actor(state.setters, "route", actor))
    return state.with_plan(route=body.to)


def _economics(state: State, actor: Actor, body: EconomicsRule) -> State:
    for key, value in (
        ("margin_weight", body.margin_weight),
        ("popularity_weight", body.popularity_weight),
    ):
        if value is None:
            continue
        setter = state.setters.get(key)
        if setter is not None:
            kept: Weight = getattr(state.plan, key)
            reason = f"{precedence(setter, actor)}: {key} stays {kept.value}, not {value}"
            state = state.record(key, "highest_priority", setter, [actor], reason)
            continue
        state = state.evolved(setters=with_actor(state.setters, key, actor))
        state = state.with_plan(**{key: made(Weight, {"value": value, "policy": actor.id})})
    return state


# --- product ids: pins, hides, sponsored ---------------------------------------------------


def _pin(state: State, actor: Actor, body: PinRule) -> State:
    pins = list(state.plan.pins)
    pinned_by = dict(state.pinned_by)
    for product in dict.fromkeys(body.ids):
        hider = state.hidden_by.get(product)
        if hider is not None:
            reason = f"'{product}' is hidden by '{hider.id}': hide beats pin"
            state = state.record("pins", "hide_beats_pin", hider, [actor], reason)
        elif product in pinned_by:
            continue
        elif len(pins) >= state.governance.max_pins:
            holder = pinned_by[pins[-1]] if pins else actor
            reason = f"governance allows {state.governance.max_pins} pins: '{product}' is not pinned"
            state = state.record("pins", "max_pins", holder, [actor], reason)
        else:
            pins.append(product)
            pinned_by[product] = actor
    return state.evolved(pinned_by=pinned_by).with_plan(pins=tuple(pins))


def _hide(state: State, actor: Actor, body: HideRule) -> State:
    hidden_by = dict(state.hidden_by)
    for product in body.ids:
        hidden_by.setdefault(product, actor)
    hidden = set(hidden_by)
    for product in (p for p in state.plan.pins if p in hidden):
        reason = f"'{product}' is hidden by '{hidden_by[product].id}': hide beats pin"
        state = state.record("pins", "hide_beats_pin", hidden_by[product], [state.pinned_by[product]], reason)
    sponsored: list[Sponsored] = []
    for entry in state.plan.sponsored:
        for product in (p for p in entry.ids if p in hidden):
            reason = f"'{product}' is hidden by '{hidden_by[product].id}': hide beats sponsored"
            sponsor = state.actors[entry.policy]
            state = state.record("sponsored", "hide_beats_sponsored", hidden_by[product], [sponsor], reason)
        ids = tuple(p for p in entry.ids if p not in hidden)
        if ids:
            sponsored.append(replaced(entry, {"ids": ids}))
    return state.evolved(hidden_by=hidden_by).with_plan(
        hides=tuple(sorted(hidden)),
        pins=tuple(p for p in state.plan.pins if p not in hidden),
        sponsored=tuple(sponsored),
    )


def _sponsored(state: State, actor: Actor, body: SponsoredRule) -> State:
    taken = {p for entry in state.plan.sponsored for p in entry.ids}
    ids: list[str] = []
    for product in dict.fromkeys(body.ids):
        hider = state.hidden_by.get(product)
        if hider is not None:
            reason = f"'{product}' is hidden by '{hider.id}': hide beats sponsored"
            state = state.record("sponsored", "hide_beats_sponsored", hider, [actor], reason)
        elif product in taken:
            continue
        elif len(taken) + len(ids) >= state.governance.max_sponsored:
            entries = state.plan.sponsored
            holder = state.actors[entries[-1].policy] if entries and not ids else actor
            allowed = state.governance.max_sponsored
            reason = f"governance allows {allowed} sponsored products: '{product}' is not sponsored"
            state = state.record("sponsored", "max_sponsored", holder, [actor], reason)
        else:
            ids.append(product)
    if not ids:
        return state
    entry = made(Sponsored, {"ids": tuple(ids), "weight": body.weight, "policy": actor.id})
    return state.with_plan(sponsored=(*state.plan.sponsored, entry))


#: rule body class -> its strategy (the ``match`` in :func:`apply` says the same, for
#: subclasses); exact classes only
_STEPS: dict[type, Callable[[State, Actor, Any], State]] = {
    FilterRule: _filter_or_guard,
    ExcludeRule: _exclude_or_guard,
    CategoryRule: _category,
    PriceRule: claim_price,
    BoostRule: _boost,
    BuryRule: _boost,
    PinRule: _pin,
    HideRule: _hide,
    SponsoredRule: _sponsored,
}

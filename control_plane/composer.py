"""Composition: fold the matched policies into one search plan, and record why.

``compose(policy_set, intent, matches, context) -> Composition`` is the whole stage. It is
pure: no engine, no clock, no randomness, no I/O. The same arguments give a byte-identical
``composition.model_dump_json()``, whatever order the matches arrive in. This docstring is
the specification; ``tests/composer/cases/*.yaml`` are its worked examples. Helpers live in
:mod:`control_plane.composer_captures` (captures, vocabularies, context values),
:mod:`control_plane.composer_fields` (one function per plan field),
:mod:`control_plane.composer_price` (price bounds) and :mod:`control_plane.composer_state`
(the working state, its per-step draft and the wording of precedence).

1. Inputs
---------
``matches`` is what the matcher found: at most one match per policy, each with the spans of
the intent it matched (``[start, end)`` character offsets) and, for patterns, the captured
words. A second match for one policy, a match for a policy the set does not hold, or an
empty span or one outside the intent raises ``ValueError``: the matcher and the policy set
disagree, and no plan is better than a wrong one. The matcher's own result is a
:class:`~control_plane.matches.Matches`: the matches grouped by equal spans and captures,
read group by group (each group's spans checked and measured once, ADR 0028); any other
sequence of :class:`~control_plane.plan.Match` composes the same.

Every enabled guard of the set that has no ``active`` window is composed even when the
matcher did not return it: guards are security trimming, and a plan never loses one because
of a matching problem. A guard with an active window applies only when matched (the
matcher knows ``now``; the composer has no clock).

``context`` carries the request's cohorts and market, the catalog field holding the
category path (``category_field``), and price statistics per category name, plus
``"_all"`` for the whole catalog.

2. Order
--------
Policies apply one at a time, in one total order:

1. ``priority``, highest first;
2. trigger specificity: ``exact`` > ``pattern`` > ``phrase`` > ``any`` > ``always``;
3. matched length, longest first: how many intent characters the policy's spans cover
   (for a pattern, the cue and the captured words together);
4. policy id, ascending.

The order never depends on the order of matches, files or engine hits. "Higher
precedence" below means "earlier in this order". Guards take their place in the same order;
nothing they put in the plan can be undone, wherever they stand (section 6).

3. Skipped policies
-------------------
A matched policy is skipped, with a code and a reason, when:

- ``disabled``: ``enabled: false`` (the matcher filters these already; belt and braces);
- ``cohort``: it names cohorts and the request carries none of them;
- ``span_consumed``: one of its spans (cue or captured words) overlaps a span consumed by a
  policy applied before it; the reason names the consumer and the span. Guards and
  ``always`` policies have no span and are never skipped this way;
- ``capture_missing``: a rule uses ``{name}`` and the match captured no words for it;
- ``capture_unmapped``: the rule's vocabulary has no entry for the captured words (or a
  price capture is not one number);
- ``would_empty_intent``: never an unconstrained browse from words. Applying the policy
  would consume the last words of the residual while the plan (with its rules applied)
  has no positive constraint: no category, policy filter, price bound (absolute or
  relative), pin, nor a ``browse`` route. Guards and exclusions do not count: "without
  nuts" alone, or a brand that starts with a cue word, would otherwise list the whole
  catalog. The policy is skipped (it changes nothing; its words stay in the residual and
  are searched). Of the two remedies the issue allowed -- keep the last consumer's words,
  or skip it -- skipping is the one that never applies a rule to words the shopper meant
  as a search.

The active window (``inactive``) is the matcher's check. A skipped policy changes nothing
and consumes nothing: its words stay in the residual text.

4. Consumption and the residual text
------------------------------------
The residual is the text full-text retrieval searches: the intent with every consumed span
removed, white space collapsed, ends trimmed, then every applied ``rewrite`` rule in
application order. A policy with ``consume: true`` that applies consumes all its spans and,
for a pattern, the captured words ("cheap chocolate" -> price ceiling, residual
"chocolate"). Consumption is per policy: a policy that applies consumes its spans even when
some of its rules lost a conflict. A policy that does not consume leaves its words in the
residual, and a later policy whose spans overlap them still applies.

A rewrite replaces every whole-word occurrence of ``from`` in the residual by ``to``,
ignoring case and accents (``creme`` matches ``Crème``); an empty ``to`` deletes the words.
Rewrites are kept aside and replayed on the residual after every step, so a later
consumption never has to find its span in rewritten text.

5. Captures, vocabularies and context values
--------------------------------------------
A rule value ``"{name}"`` is replaced by what the pattern captured under that name:

- filter and exclude rules that name a ``vocabulary`` map the captured words to catalog
  values. Lookup is normalised (casefold, accents stripped by NFKD, white space collapsed
  and trimmed): the whole capture first, then each of its words (punctuation at a word's
  edges ignored), taking the union of the hits. A catalog value also stands for itself.
  No hit for any word: ``capture_unmapped``, and the policy's span is not consumed;
- every other use takes the captured words as written (``{item}`` in a boost's values);
- a price bound ``"{amount}"`` parses the words as one amount: ``5``, ``5€``, ``$5``,
  ``5,50`` (decimal comma), ``1,000.50`` and ``12,50 euros`` all work; anything else is
  ``capture_unmapped``, including a number followed by another word ("under 10 words",
  "moins de 500 g": it counts something else);
- a value with text around the placeholder (``"{item}-free"``) gets one value per mapped
  value; a single-valued text (a rewrite's ``from``/``to``) takes them joined by a space;
- several captures with one name (``without nuts without milk``, and the items of a
  list, ``without strap or lid``, which the matcher captures one by one) give the union
  of their values (for a price bound, the most restrictive number): the rule applies to
  each item, and the list's connectors are spans of the match, consumed with it;
- a ``vocabulary`` trigger's capture (``{colours}``, or the trigger's ``capture`` name)
  maps through the trigger's vocabulary even where the rule names none: the matched words
  ("noir", "women's") become the entry ("black", "women").

Filter and exclude rules keep their ``match`` in the plan's constraint (``terms``,
``phrase``, ``words``; the loader chose it from the field's mapping type): constraints are
per field *and* match, so a phrase exclusion on ``text`` and a terms exclusion on
``allergens`` never merge.

``{market}`` (``CONTEXT_VALUES``) is the request's market, used as written. A request with
no market drops each rule that uses it; the policy, guard or not, still applies with its
other rules, and the step lists the dropped rule (``AppliedStep.dropped``).

Every capture of an evaluated policy is recorded in ``explanation.captures``: its text,
the vocabulary used (None when the words are used as written) and the values it gave
(empty when unmapped).

6. Conflicts, field by field
----------------------------
Rule kinds write these plan fields: ``filter`` -> ``filters`` (``guards`` for a guard),
``exclude`` -> ``exclusions`` (``guard_exclusions`` for a guard), ``category`` ->
``category``, ``price`` -> ``price``, ``boost`` and ``bury`` -> ``boosts``, ``pin`` ->
``pins``, ``hide`` -> ``hides``, ``sponsored`` -> ``sponsored``, ``synonyms`` ->
``synonyms``, ``rewrite`` -> ``residual``, ``route`` -> ``route``, ``economics`` ->
``margin_weight`` and ``popularity_weight``.

Each rule meets what higher-precedence policies already put on its field. Cooperative
strategies (``merge``, ``intersect``, ``most_restrictive``, ``accumulate``, unions)
combine with it. ``override`` is "highest priority wins": a policy that overrides a field
*holds* it, and every later rule on that field loses. An override cannot undo what a
higher-precedence policy did: if the field already has a value, the override combines
with it the narrowing way (intersect, most restrictive, or alongside for boosts) and holds
the result.

One exception protects the shopper's words: a policy that consumed them (``consume:
true``, e.g. "cheap", "under {amount}") still *narrows* a held field (category and filter
rules intersect, price bounds tighten), because those words are no longer in the residual
and ignoring its rule would silently drop what the shopper asked for.

========================  ============================================================
plan field                strategies (default first)
========================  ============================================================
``category``              ``override``: the first rule to set the category holds it;
                          if a category is already set (not held), the override
                          intersects with it, then holds it. ``merge``: union.
                          ``intersect``: the common values. Merge and intersect lose
                          against a held category. An intersection that would be
                          empty loses instead and the earlier values stand
                          (contradictory rules are a review finding, not a
                          zero-result plan).
``filters`` (per field)   ``intersect`` and ``override``, exactly as for category.
``exclusions``            union per field; never contested.
``price.min`` /           ``most_restrictive``: highest floor, lowest ceiling.
``price.max``             ``override``: holds the bound, even against a more
                          restrictive lower-priority bound; bounds from consuming
                          policies still tighten it (section 7).
``boosts`` (boost/bury)   ``accumulate``: each rule is its own function; equal boosts
                          from two policies both stay. ``override``: holds the field
                          (boost and bury share it); later boosts on it lose. Earlier
                          boosts on the field stay.
``pins`` / ``hides``      union: pins in application order (first pin keeps its place),
                          hides sorted. Hide beats pin, whichever applies first.
                          Pins beyond ``governance.max_pins`` are dropped.
``sponsored``             union of ids (each id once, first sponsor's weight); hidden
                          ids and ids beyond ``governance.max_sponsored`` are dropped.
``route``                 the highest-precedence route rule wins.
``margin_weight`` /       the highest-precedence policy that sets each weight wins
``popularity_weight``     (0 is a value: it removes the signal).
``synonyms``              union, sorted.
``residual``              consumption, then rewrites (section 4).
``guards`` /              filter and exclude rules of guard policies, one constraint
``guard_exclusions``      per rule, sorted by field; never merged, held, overridden or
                          removed. A policy filter on a guard's field goes to
                          ``filters``: it adds a constraint, it never replaces the
                          guard's. A guard's other rule kinds apply like any policy's.
========================  ============================================================

Constraint values are sorted; a constraint's ``policies`` are in application order, so the
first one is the highest-precedence contributor.

7. Price bounds, absolute and relative
--------------------------------------
Price rules make claims on ``min`` and/or ``max``. During the cascade the plan shows the
bound folded from the absolute claims so far; a relative claim (``{percentile: P}``) waits.
After the cascade, each relative claim is resolved against the *final* category: the
``P``-th percentile of each category value's price statistics, the highest of them when the
category has several values (the loosest reading: no category in the constraint loses its
own cheap products), or of ``"_all"`` when the plan has no category. A category without
statistics (absent or with a count of 0) uses ``"_all"``'s percentile instead, recorded in
the resolution's reason. Missing ``"_all"`` statistics raise ``ValueError`` (no silently
unbounded "cheap"). The bound keeps ``relative=P``.

Then every claim, absolute and relative, is folded per side in application order: the
first claim sets the bound (and holds it, if it is an override); a later claim loses if the
bound is held and the claim's policy did not consume, and otherwise the most restrictive
value wins (equal values: the earlier claim). Example (DESIGN section 12): the Christmas
campaign (90) overrides the ceiling to 15; "cheap" (40, consuming) asks for p30 of the
final category, Christmas chocolates, 4.2; 4.2 < 15 so cheap's bound wins. A floor above
the ceiling after folding drops the bound of the lower-precedence policy.

8. What is recorded
-------------------
- ``explanation.matched``: every match, in application order, with its spans (captured
  words included), kind and priority;
- ``applied``: each applied policy, in order, with the spans it consumed, every plan field
  the step changed (``Change(field, before, after)``, top-level plan fields as JSON data;
  a relative price claim appears as ``price.min``/``price.max`` with ``after`` naming its
  percentile) and its dropped rules;
- ``skipped``: code and reason, in application order;
- ``resolutions``: one per contest, in the order decided (price last, since prices are
  settled after the cascade): ``field`` (``category``, ``filters.<field>``,
  ``price.max``, ``boosts.<field>``, ``pins``, ``sponsored``, ``route``,
  ``margin_weight``, ``guards.<field>``...), the ``strategy`` that decided, the ``winner``,
  the ``losers`` (empty when nobody lost outright, e.g. an intersection) and a ``reason``
  such as ``priority 90 > 60`` or ``most restrictive: 4.2 < 15.0``. The strategy is the
  rule's own (``override``, ``merge``, ``intersect``, ``most_restrictive``) or one of
  ``highest_priority`` (route, weights), ``relative`` (a percentile resolved, with the
  statistics used), ``floor_below_ceiling``, ``hide_beats_pin``, ``hide_beats_sponsored``,
  ``max_pins``, ``max_sponsored`` and ``guard`` (a policy filter met a guard on its
  field). Unions and accumulations that drop nothing are not contests and are not
  recorded;
- ``residual``, ``captures``, ``policy_set_version`` and ``intent``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any, NamedTuple, cast

from pydantic import BaseModel

import control_plane.composer_state as composer_state
from control_plane.bounded import keep
from control_plane.composer_captures import Binding, VocabularyIndex, bind
from control_plane.composer_fields import apply, lost_to_holder
from control_plane.composer_price import StatsLike, finish_price
from control_plane.composer_state import Actor, Draft, Remembered, State, made
from control_plane.matches import Matches, MatchGroup
from control_plane.money import MoneyNotation
from control_plane.plan import (
    AppliedStep,
    Boost,
    Bound,
    CapturedText,
    CaptureMapping,
    Change,
    Composition,
    Constraint,
    Explanation,
    Match,
    MatchedPolicy,
    Plan,
    PriceBounds,
    Skipped,
    Span,
    Sponsored,
    Weight,
)
from control_plane.policy import SPECIFICITY, Policy, PolicySet, RewriteRule

__all__ = ["ComposeContext", "StatsLike", "compose", "residual_text"]


@dataclass(frozen=True)
class ComposeContext:
    """What the composer needs to know about the request and the catalog."""

    cohorts: tuple[str, ...] = ()
    market: str | None = None
    category_field: str = field(kw_only=True)
    """the profile's category path field (what category constraints filter)"""
    price_stats: Mapping[str, StatsLike] = field(default_factory=dict)
    """category name -> its price statistics, plus ``"_all"``"""
    money: MoneyNotation | None = None
    """how the catalog's amounts are written (the profile's ``money``; None: built-in)"""


class _Turn(NamedTuple):
    actor: Actor
    match: Match | MatchGroup
    """the policy's match, or its group's (the same spans and captures)"""
    footprint: tuple[Span, ...]
    matched: dict[str, object]
    """its :class:`MatchedPolicy` record's fields but the spans (kept per policy: ``_HEADS``)"""


def compose(
    policy_set: PolicySet, intent: str, matches: Sequence[Match], context: ComposeContext
) -> Composition:
    """Compose ``matches`` of ``intent`` into a plan and its explanation (module docstring)."""
    index = policy_set.lookups()
    turns = _turns(policy_set, intent, matches)
    vocabularies = index.vocabularies
    left = _ReferenceResidual(intent) if composer_state.REFERENCE else _Residual(intent)
    state = State(
        plan=Plan(residual=left.text(())),
        governance=policy_set.governance,
        category_field=context.category_field,
        actors={turn.actor.id: turn.actor for turn in turns},
    )
    consumed: list[tuple[Span, str]] = []
    dumped = _Dumped()
    applied: list[AppliedStep] = []
    skipped: list[Skipped] = []
    captures: list[CaptureMapping] = []
    applied_ids: list[str] = []
    free = left.free
    reference = composer_state.REFERENCE
    residual = state.plan.residual  # the residual so far (the plan's, on the reference path)
    for turn in turns:
        actor, footprint = turn.actor, turn.footprint
        policy = actor.policy
        if not (  # the usual turn, which ``_skip`` lets through: no cohorts, its spans free
            policy.enabled and not policy.cohorts
            and (
                actor.is_guard
                or (free(footprint[0]) if len(footprint) == 1 else all(map(free, footprint)))
            )
        ):
            skip = _skip(policy, footprint, consumed, left, context)
            if skip is not None:
                skipped.append(skip)
                continue
        found_captures = turn.match.captures
        plain = None if found_captures or reference else _PLAIN.get(id(policy))
        if plain is not None and plain[0] is policy:  # the rules as written, remembered
            binding = plain[1]
        else:
            rule_captures = index.rule_captures[policy.id]
            binding = _bound(policy, found_captures, vocabularies, context, rule_captures)
            if not found_captures and not any(rule_captures) and not reference:
                keep(_PLAIN, id(policy), (policy, binding), _PLAIN_LIMIT)
        if binding.mappings:
            captures.extend(binding.mappings)
        if binding.problem is not None:
            problem = binding.problem
            skipped.append(
                made(Skipped, {"policy_id": policy.id, "code": problem.code, "reason": problem.reason})
            )
            continue
        bodies = binding.bodies
        # its one rule loses to a holder, changing nothing: the step needs no draft (the
        # contest is noted once the step is known to apply)
        lost = lost_to_holder(state, actor, bodies[0]) if len(bodies) == 1 and not reference else None
        before = state
        if lost is None:
            state = state.draft()  # changed in place by this step's rules; ``before`` stays
            for body in bodies:
                state = apply(state, actor, body)
        spans = footprint if policy.trigger.consume else ()
        if spans and _would_empty(state, left, spans):  # (consuming nothing empties nothing)
            reason = (
                f"consuming '{' '.join(s.text for s in spans)}' would leave no words to search"
                " and the plan has no category, filter, price, pin or browse route"
            )
            skip = made(Skipped, {"policy_id": policy.id, "code": "would_empty_intent", "reason": reason})
            skipped.append(skip)
            state = before
            continue
        applied_ids.append(policy.id)  # the plan's ``applied``, set once after the cascade
        if lost is not None:
            state = state.noted(lost)  # (a draft of the step before, done: noted in place)
            if not spans:  # nothing changed, nothing consumed: the policy's own record, kept
                applied.append(_unchanged(policy, binding))
                continue
            before = state
        if spans:
            consumed.extend([(span, policy.id) for span in spans])
            left.consume(spans)
        moved: Change | None = None  # the residual's change, made here (see below)
        if spans or state.rewrites is not before.rewrites:  # else the residual is unchanged
            if reference:
                state = state.with_plan(residual=left.text(state.rewrites))
            else:  # no strategy reads the plan's residual: it is set once, after the cascade
                text = left.text(state.rewrites)
                if text != residual:
                    moved = made(Change, {"field": "residual", "before": residual, "after": text})
                    residual = text
        if lost is None and (reference or cast(Draft, state).touched or state.prices is not before.prices):
            changes = _changes(before, state, dumped)
            if moved is not None:  # the plan's first field: the first change
                changes = (moved, *changes)
        elif moved is not None:
            changes = (moved,)
        elif not spans:  # nothing changed, nothing consumed: the policy's own record, kept
            applied.append(_unchanged(policy, binding))
            continue
        else:
            changes = ()  # nothing changed: none
        applied.append(
            made(
                AppliedStep,
                {
                    "policy_id": policy.id,
                    "consumed": spans,
                    "changes": changes,
                    "explain": policy.explain,
                    "dropped": binding.dropped,
                },
            )
        )
    state = finish_price(state, context.price_stats)
    if reference:
        state = state.with_plan(applied=tuple(applied_ids))
    else:
        state = state.with_plan(residual=residual, applied=tuple(applied_ids))
    matched = [made(MatchedPolicy, {**turn.matched, "spans": turn.footprint}) for turn in turns]
    explanation = made(
        Explanation,
        {
            "policy_set_version": policy_set.version,
            "intent": intent,
            "matched": tuple(matched),
            "applied": tuple(applied),
            "skipped": tuple(skipped),
            "residual": state.plan.residual,
            "resolutions": state.resolutions,
            "captures": tuple(captures),
        },
    )
    return made(Composition, {"plan": state.plan, "explanation": explanation})


#: id(policy) -> (the policy, its binding) for a policy whose rules capture nothing and a
#: match without captures: its rules as written, whatever the request (one dict lookup per
#: turn instead of ``bind``'s remembered tables); the entry holds the policy, so its id is
#: not reused while remembered; bounded like :class:`Remembered`
_PLAIN: dict[int, tuple[Policy, Binding]] = {}
_PLAIN_LIMIT = 16_384  # as Remembered

#: id(policy) -> (the policy, its binding, the step it makes when it changes nothing and
#: consumes nothing: a policy that loses every contest, the same record whatever the
#: request, shared by the compositions it is in like the resolutions it loses; frozen);
#: the entry holds the policy and the binding (its ``dropped``), so neither id is reused
#: while it is there; bounded
_UNCHANGED: dict[int, tuple[Policy, Binding, AppliedStep]] = {}


def _unchanged(policy: Policy, binding: Binding) -> AppliedStep:
    """The step of ``policy`` (bound as ``binding``) when it changes nothing and consumes
    nothing: the one kept in :data:`_UNCHANGED`, made and kept the first time."""
    kept = _UNCHANGED.get(id(policy))
    if kept is not None and kept[0] is policy and kept[1] is binding:
        return kept[2]
    step = made(
        AppliedStep,
        {
            "policy_id": policy.id, "consumed": (), "changes": (), "explain": policy.explain,
            "dropped": binding.dropped,
        },
    )
    keep(_UNCHANGED, id(policy), (policy, binding, step), _PLAIN_LIMIT)
    return step


#: (policy, the set's vocabularies, the captured words, market, money) -> its binding
_BINDINGS: Remembered[Binding] = Remembered()


def _bound(
    policy: Policy,
    captures: Sequence[CapturedText],
    vocabularies: Mapping[str, VocabularyIndex],
    context: ComposeContext,
    rule_captures: Sequence[tuple[str, ...]],
) -> Binding:
    """``bind(...)``, remembered: a binding is a function of the policy, the vocabularies,
    the captured words in span order, the market and the money notation (patterns such as
    "under {amount}" see the same few words again and again)."""
    if not captures:  # ``bind`` remembers these itself
        return bind(policy, captures, vocabularies, context.market, rule_captures, money=context.money)
    words = tuple((c.name, c.text) for c in sorted(captures, key=_capture_order))
    held = (vocabularies, context.money)  # by identity: a money notation holds a dict
    found = _BINDINGS.get(policy, words, context.market, also=held)
    if found is not None:
        return found
    binding = bind(policy, captures, vocabularies, context.market, rule_captures, money=context.money)
    return _BINDINGS.put(policy, binding, words, context.market, also=held)


def _capture_order(capture: CapturedText) -> tuple[int, int, str, str]:
    return (capture.span.start, capture.span.end, capture.name, capture.text)


# --- order -------------------------------------------------------------------------------


def _turns(policy_set: PolicySet, intent: str, matches: Sequence[Match]) -> list[_Turn]:
    index = policy_set.lookups()
    policies = index.by_id
    seen: set[str] = set()
    size = len(intent)
    heads: dict[int, Any] = {} if composer_state.REFERENCE else _HEADS  # the reference makes its own
    unordered: list[tuple[Any, ...]] = []  # (the order key, section 2, then the turn's parts)
    for found, ids in _intake(matches):
        if not ids:
            continue
        spans: tuple[Span, ...] = found.spans
        footprint: tuple[Span, ...]
        one = len(spans) == 1 and not found.captures
        if one:  # the usual match: one span is its footprint
            start, end = spans[0].start, spans[0].end
            footprint, length = spans, end - start
        else:  # once per group: its members share spans and captures
            footprint = _footprint(found)
            length = _covered(footprint)
        for policy_id in ids:
            policy = policies.get(policy_id)
            if policy is None:
                raise ValueError(
                    f"match for '{policy_id}', which policy set {policy_set.version} does not hold"
                )
            if policy_id in seen:
                raise ValueError(f"two matches for '{policy_id}': the matcher returns one per policy")
            seen.add(policy_id)
            head = heads.get(id(policy))
            if head is None or head[0] is not policy:
                head = _head(policy)
            unordered.append((head[1], head[2], -length, policy_id, head, found, footprint, length))
        if one:  # (checked after the ids, as every span is)
            if not 0 <= start < end <= size:
                raise ValueError(f"span [{start}, {end}) of '{ids[0]}' is empty or outside the intent")
            continue
        for span in (*spans, *(c.span for c in found.captures)) if found.captures else spans:
            if not 0 <= span.start < span.end <= size:
                raise ValueError(
                    f"span [{span.start}, {span.end}) of '{ids[0]}' is empty or outside the intent"
                )
    for policy in index.standing_guards:
        if policy.id not in seen:
            head = heads.get(id(policy))
            if head is None or head[0] is not policy:
                head = _head(policy)
            unordered.append((head[1], head[2], 0, policy.id, head, Match(policy_id=policy.id), (), 0))
    unordered.sort()  # (the order key, section 2) the keys end with the policy id: never equal
    turns: list[_Turn] = []
    new_actor, new_turn, append = object.__new__, tuple.__new__, turns.append
    for rank, entry in enumerate(unordered):
        # ``_Turn(Actor(policy, rank, length), found, footprint, matched)``, without the
        # frozen dataclass's ``__init__`` nor the named tuple's: the actor's fields that are
        # the policy's come from its head, the rest are this request's
        head = entry[4]
        actor = new_actor(Actor)
        values = actor.__dict__
        values.update(head[4])
        values["rank"] = rank
        values["length"] = entry[7]
        append(new_turn(_Turn, (actor, entry[5], entry[6], head[3])))
    return turns


#: id(policy) -> (the policy, -priority, -specificity, its matched record but the spans,
#: its actor's fields but the rank and length): the head of its order key, kept (the entry
#: holds the policy, so its id is not reused while it is there); bounded
_HEADS: dict[int, tuple[Policy, int, int, dict[str, object], dict[str, object]]] = {}


def _head(policy: Policy) -> tuple[Policy, int, int, dict[str, object], dict[str, object]]:
    matched = {
        "policy_id": policy.id, "kind": policy.kind, "priority": policy.priority,
        "trigger": policy.trigger.kind,
    }
    actor = {
        "policy": policy, "id": policy.id, "consumes": policy.trigger.consume,
        "is_guard": policy.kind == "guard",
    }
    head = (policy, -policy.priority, -SPECIFICITY[policy.trigger.kind], matched, actor)
    if composer_state.REFERENCE:  # neither read nor written by the reference path
        return head
    keep(_HEADS, id(policy), head, _PLAIN_LIMIT)
    return head


def _intake(matches: Sequence[Match]) -> Iterable[tuple[Match | MatchGroup, Sequence[str]]]:
    """Each match with the ids of the policies it is the match of: the matcher's groups as
    they come (:class:`~control_plane.matches.Matches`, ADR 0028), any other sequence one
    policy per match."""
    if isinstance(matches, Matches):
        return ((group, group.policy_ids) for group in matches.groups)
    return ((found, (found.policy_id,)) for found in matches)


def _turn(
    policy: Policy, rank: int, length: int, found: Match | MatchGroup, footprint: tuple[Span, ...]
) -> _Turn:
    """One turn, as :func:`_turns` makes them (the policy's actor fields from its head)."""
    head = None if composer_state.REFERENCE else _HEADS.get(id(policy))
    if head is None or head[0] is not policy:
        head = _head(policy)
    actor = object.__new__(Actor)
    actor.__dict__.update(head[4], rank=rank, length=length)
    return tuple.__new__(_Turn, (actor, found, footprint, head[3]))


def _footprint(found: Match | MatchGroup) -> tuple[Span, ...]:
    if not found.captures and len(found.spans) < 2:  # one span or none: itself
        return found.spans
    spans = {(s.start, s.end, s.text): s for s in (*found.spans, *(c.span for c in found.captures))}
    return tuple(spans[key] for key in sorted(spans))


def _covered(spans: Sequence[Span]) -> int:
    """Characters covered by the union of ``spans`` (sorted by start)."""
    if len(spans) == 1:
        return spans[0].end - spans[0].start
    total, reach = 0, 0
    for span in spans:
        start = max(span.start, reach)
        if span.end > start:
            total += span.end - start
        reach = max(reach, span.end)
    return total


# --- skips -------------------------------------------------------------------------------


def _would_empty(state: State, left: _Left, spans: Sequence[Span]) -> bool:
    """Consuming ``spans`` empties the residual and nothing positive selects products.
    (The cheap test first: once the plan selects products, no residual is computed.)"""
    plan = state.plan
    positive = (
        plan.category is not None or plan.filters or plan.pins or plan.route == "browse"
        or plan.price.min is not None or plan.price.max is not None or state.prices
    )
    if positive or not spans:
        return False
    if not left.text(state.rewrites):
        return False
    return not left.without(spans).text(state.rewrites)


def _skip(
    policy: Policy,
    footprint: Sequence[Span],
    consumed: Sequence[tuple[Span, str]],
    left: _Left,
    context: ComposeContext,
) -> Skipped | None:
    if not policy.enabled:
        return _skipped(policy.id, "disabled", "the policy is disabled")
    if policy.cohorts and not set(policy.cohorts) & set(context.cohorts):
        request = ", ".join(sorted(set(context.cohorts))) or "none"
        reason = f"for cohorts {', '.join(policy.cohorts)}; the request has {request}"
        return _skipped(policy.id, "cohort", reason)
    if policy.kind == "guard":
        return None
    for span in footprint:
        if left.free(span):
            continue
        start, end = span.start, span.end
        for taken, consumer in consumed:
            if start < taken.end and taken.start < end:  # span.overlaps(taken), inlined
                reason = (
                    f"'{span.text}' [{span.start}, {span.end}) overlaps '{taken.text}'"
                    f" [{taken.start}, {taken.end}), consumed by '{consumer}'"
                )
                return _skipped(policy.id, "span_consumed", reason)
    return None


def _skipped(policy_id: str, code: str, reason: str) -> Skipped:
    return made(Skipped, {"policy_id": policy_id, "code": code, "reason": reason})


# --- residual text -----------------------------------------------------------------------


def residual_text(intent: str, consumed: Sequence[Span], rewrites: Sequence[RewriteRule]) -> str:
    """``intent`` without the ``consumed`` spans, white space collapsed, then ``rewrites``."""
    pieces: list[str] = []
    position = 0
    for span in sorted(consumed, key=lambda s: (s.start, s.end)):
        if span.start > position:
            pieces.append(intent[position : span.start])
        position = max(position, span.end)
    pieces.append(intent[position:])
    text = " ".join(" ".join(pieces).split())
    for rule in rewrites:
        text = _rewrite(text, rule)
    return text


class _Residual:
    """What is left of the intent as spans are consumed, kept between the steps of one
    compose: the runs of the intent that no consumed span covers, in order, each with its
    words (white space collapsed). Consuming a span cuts only the runs it overlaps, so the
    text is the runs' words joined, never a sort of every consumed span again:
    ``text(rewrites)`` is :func:`residual_text` of the spans consumed so far."""

    __slots__ = ("_ends", "_intent", "_plain", "_starts", "_words")

    def __init__(self, intent: str) -> None:
        self._intent = intent
        self._starts: list[int] = [0] if intent else []
        self._ends: list[int] = [len(intent)] if intent else []
        self._words: list[str] = [" ".join(intent.split())] if intent else []
        self._plain = not intent or self._words[0] == intent
        """the intent's white space is already collapsed (single spaces between words, no
        space at its ends), as a shopper's normalised intent is: a run's words are then its
        text without the spaces at its ends, no split needed"""

    def text(self, rewrites: Sequence[RewriteRule]) -> str:
        text = " ".join([words for words in self._words if words])
        for rule in rewrites:
            text = _rewrite(text, rule)
        return text

    def free(self, span: Span) -> bool:
        """No consumed span overlaps ``span``: it lies inside one run (the runs are the
        intent's longest stretches that nothing consumed)."""
        ends = self._ends
        index = bisect_right(ends, span.start)
        return index < len(ends) and self._starts[index] <= span.start and span.end <= ends[index]

    def without(self, spans: Sequence[Span]) -> _Residual:
        """A copy that also consumed ``spans`` (this one is unchanged)."""
        new = object.__new__(_Residual)
        new._intent, new._plain = self._intent, self._plain
        new._starts, new._ends, new._words = list(self._starts), list(self._ends), list(self._words)
        new.consume(spans)
        return new

    def consume(self, spans: Sequence[Span]) -> None:
        for span in spans:
            self._cut(span.start, span.end)

    def _first(self, start: int) -> int:
        """The index of the first run that ends after ``start``."""
        return bisect_right(self._ends, start)

    def _run_words(self, start: int, end: int) -> str:
        """The words of ``intent[start:end]``, white space collapsed."""
        if self._plain:  # only single spaces between words: strip its ends
            return self._intent[start:end].strip(" ")
        return " ".join(self._intent[start:end].split())

    def _cut(self, start: int, end: int) -> None:
        starts, ends, words = self._starts, self._ends, self._words
        first = last = bisect_right(ends, start)
        while last < len(starts) and starts[last] < end:  # the runs the span overlaps
            last += 1
        if first == last:
            return
        new_starts, new_ends, new_words = [], [], []
        if starts[first] < start:
            new_starts.append(starts[first])
            new_ends.append(start)
            new_words.append(self._run_words(starts[first], start))
        if end < ends[last - 1]:
            new_starts.append(end)
            new_ends.append(ends[last - 1])
            new_words.append(self._run_words(end, ends[last - 1]))
        starts[first:last] = new_starts
        ends[first:last] = new_ends
        words[first:last] = new_words


class _ReferenceResidual:
    """:class:`_Residual` as the specification says it (the reference path): the residual
    recomputed by :func:`residual_text` from every span consumed so far."""

    def __init__(self, intent: str, spans: Sequence[Span] = ()) -> None:
        self._intent = intent
        self._spans = list(spans)

    def text(self, rewrites: Sequence[RewriteRule]) -> str:
        return residual_text(self._intent, self._spans, rewrites)

    def free(self, span: Span) -> bool:
        return not any(span.overlaps(taken) for taken in self._spans)

    def without(self, spans: Sequence[Span]) -> _ReferenceResidual:
        return _ReferenceResidual(self._intent, [*self._spans, *spans])

    def consume(self, spans: Sequence[Span]) -> None:
        self._spans.extend(spans)


_Left = _Residual | _ReferenceResidual


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` casefolded without accents, and for each folded char its index in ``text``."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        bare = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        for folded in bare.casefold():
            chars.append(folded)
            origin.append(index)
    return "".join(chars), origin


def _rewrite(text: str, rule: RewriteRule) -> str:
    words = _folded(rule.replace)[0].split()
    if not words:
        return text
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)")
    folded, origin = _folded(text)
    pieces: list[str] = []
    position = 0
    for found in pattern.finditer(folded):
        start, end = origin[found.start()], origin[found.end() - 1] + 1
        pieces.append(text[position:start] + rule.to)
        position = end
    pieces.append(text[position:])
    return " ".join("".join(pieces).split())


# --- changes -----------------------------------------------------------------------------


class _Dumped:
    """Plan field values as JSON data, each distinct value object dumped once per compose.

    Frozen plans share what a step did not touch (a tuple of boosts grows by one, its
    earlier boosts are the same objects), so a field is compared by identity first and
    only the values a step made are dumped. The data is what ``model_dump(mode="json")``
    gives (:func:`_dump` for the plan's own value models); entries keep their object alive
    so an id is never reused within one compose.
    """

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, Any]] = {}

    def __call__(self, value: object) -> Any:
        kind = type(value)
        if kind is str or value is None or kind is float or kind is int or kind is bool:
            return value  # (isinstance against a pydantic class costs a metaclass hook)
        if kind is not tuple and kind not in _VALUE_MODELS and not isinstance(value, BaseModel):
            return value
        entry = self._seen.get(id(value))
        if entry is None:
            if isinstance(value, tuple):  # a step's "after" is often the next one's "before"
                entry = (value, [self(item) for item in value])
            elif composer_state.REFERENCE:
                entry = (value, cast(BaseModel, value).model_dump(mode="json"))
            elif kind is Boost or kind is Constraint:  # the rules' own, remembered across composes
                entry = _KEPT_DUMPS.get(id(value))
                if entry is None or entry[0] is not value:
                    entry = (value, _dump(cast(BaseModel, value), self))
                    keep(_KEPT_DUMPS, id(value), entry, _KEPT_LIMIT)
            else:
                entry = (value, _dump(cast(BaseModel, value), self))  # a value model (checked above)
            self._seen[id(value)] = entry
        return entry[1]

    def extended(self, old: tuple[object, ...], new: object) -> Any:
        """``self(new)``, where ``new`` is often ``old`` with items appended (a boost, a pin):
        then only the new items are dumped (``old`` must have been dumped already)."""
        if composer_state.REFERENCE or type(new) is not tuple or len(new) <= len(old):
            return self(new)
        if id(new) in self._seen:
            return self(new)
        if not all(map(is_, old, new)):  # not the same items
            return self(new)
        if len(new) == len(old) + 1:  # the usual step: one boost, one pin
            data = [*self._seen[id(old)][1], self(new[-1])]
        else:
            data = [*self._seen[id(old)][1], *[self(item) for item in new[len(old) :]]]
        self._seen[id(new)] = (new, data)
        return data


#: id(boost or constraint) -> (it, its dump): what a rule proposes is the same object from
#: compose to compose (``composer_fields``), so its dump is made once and shared, like
#: every dump in a composition, by the changes that show it (JSON data, never changed);
#: the entry holds the object, so its id is not reused while it is there; bounded
_KEPT_DUMPS: dict[int, tuple[object, Any]] = {}
_KEPT_LIMIT = 16_384


def _finite(values: Sequence[object]) -> bool:
    """No value is a float that is not finite (the type test runs in C: most values are
    strings)."""
    return float not in map(type, values) or all(
        math.isfinite(v) for v in values if isinstance(v, float)
    )


def _dump(model: BaseModel, dumped: _Dumped) -> Any:
    """``model.model_dump(mode="json")``, written out for the plan's value models (the same
    keys in the same order; ``tests/composer/test_incremental.py`` holds it to pydantic's). A
    value pydantic would convert (a float that is not finite) goes through pydantic."""
    kind = type(model)
    data = model.__dict__
    if kind is Constraint and _finite(data["values"]):
        out = {"field": data["field"], "values": list(data["values"]), "policies": list(data["policies"])}
        if data["match"] != "terms":
            out["match"] = data["match"]
        return out
    if kind is Boost and math.isfinite(data["weight"]) and _finite(data["values"]):
        return {
            "field": data["field"], "values": list(data["values"]), "weight": data["weight"],
            "policy": data["policy"],
        }
    if kind is Bound and math.isfinite(data["value"]):
        return {"value": data["value"], "policy": data["policy"], "relative": data["relative"]}
    if kind is PriceBounds:
        low, high = data["min"], data["max"]
        return {
            "min": None if low is None else dumped(low), "max": None if high is None else dumped(high)
        }
    if kind is Weight and math.isfinite(data["value"]):
        return {"value": data["value"], "policy": data["policy"]}
    if kind is Sponsored and math.isfinite(data["weight"]):
        return {"ids": list(data["ids"]), "weight": data["weight"], "policy": data["policy"]}
    return model.model_dump(mode="json")


#: the plan's value models, which :func:`_dump` writes out
_VALUE_MODELS = frozenset({Constraint, Boost, Bound, PriceBounds, Weight, Sponsored})
_CHANGED_FIELDS = tuple(name for name in Plan.model_fields if name != "applied")
_FIELD_ORDER = {name: position for position, name in enumerate(_CHANGED_FIELDS)}


def _changes(before: State, after: State, dumped: _Dumped) -> tuple[Change, ...]:
    changes = []
    old_fields, new_fields = before.plan.__dict__, after.plan.__dict__
    touched = after.touched if isinstance(after, Draft) else _CHANGED_FIELDS
    for name in sorted(touched, key=_FIELD_ORDER.__getitem__) if len(touched) > 1 else touched:
        old_value, new_value = old_fields[name], new_fields[name]
        if old_value is new_value:
            continue
        if type(old_value) is str and type(new_value) is str:  # the residual: itself
            old, new = old_value, new_value
        else:
            old = dumped(old_value)
            new = dumped.extended(old_value, new_value) if type(old_value) is tuple else dumped(new_value)
        if old != new:
            changes.append(made(Change, {"field": name, "before": old, "after": new}))
    for claim in after.prices[len(before.prices) :]:
        if claim.percentile is not None:
            pending = {
                "percentile": claim.percentile,
                "policy": claim.actor.id,
                "resolved": "after the cascade, against the final category",
            }
            side = dumped(getattr(before.plan.price, claim.side))
            changes.append(made(Change, {"field": f"price.{claim.side}", "before": side, "after": pending}))
    return tuple(changes)

"""Lint between policies: the analyses of policies taken together (see
:mod:`control_plane.lifecycle.lint`, whose docstring specifies every code).

:func:`shadowed` finds a policy whose every trigger text higher-precedence policies consume
first (``shadowed_policy``); :func:`between` finds, for two policies that apply together on
an intent lint can name, triggers only their ids order (``overlapping_triggers``) and
constraints that cannot both hold (``conflicting_filters``, ``contradictory_filters``).

Both are bounded by a :class:`TriggerIndex` rather than run on every pair: two policies
can only meet on a text one of them names if the other's trigger fires there, i.e. one of
its phrases occurs in that text (a pattern's cue ends it, an exact text equals it), so the
index maps phrases to policies and each text asks only for its own contiguous word runs.
The pairs it yields are a superset of the pairs with findings, in the order of
``combinations``, so the findings are the same as comparing all pairs, at a cost that
follows the pairs that do meet instead of n squared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from control_plane.lifecycle.lint_facts import (
    CAPTURED,
    Constraint,
    Finding,
    Where,
    bounds,
    constraints,
    crossed,
    disjoint_on_one_key,
    excluded,
    folded_words,
    reachable_texts,
)
from control_plane.policy import SPECIFICITY, Policy

# --- two policies: texts both fire on ---------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """An intent lint can name: folded words (``CAPTURED`` for a pattern's captured words)."""

    words: tuple[str, ...]
    shown: str


def _texts(policy: Policy) -> list[_Text]:
    if policy.trigger.kind == "always":
        return []
    if policy.trigger.kind == "pattern":
        return [_Text((*folded_words(c), CAPTURED), f"'{c} …'") for c in reachable_texts(policy)]
    return [_Text(folded_words(v), f"'{v}'") for v in reachable_texts(policy)]


def _occurrences(words: tuple[str, ...], part: tuple[str, ...]) -> Iterator[int]:
    for start in range(len(words) - len(part) + 1):
        if part and words[start : start + len(part)] == part:
            yield start


def _matched_length(
    policy: Policy, words: tuple[str, ...], folded: Sequence[tuple[str, ...]] | None = None
) -> int | None:
    """Intent characters the policy's spans cover on ``words`` (adjacent matched words merge,
    like the engine's highlights), or None when it does not fire there. ``folded``: the
    policy's reachable texts, folded, when already known."""
    kind = policy.trigger.kind
    if kind == "always":
        return 0
    if folded is None:
        folded = [folded_words(v) for v in reachable_texts(policy)]
    text_length = len(" ".join(words))
    if kind == "exact":
        return text_length if any(part == words for part in folded) else None
    if kind == "pattern":
        fires = any(words[-len(cue) - 1 :] == (*cue, CAPTURED) for cue in folded)
        return text_length if fires else None
    covered = [False] * len(words)
    for part in folded:
        for start in _occurrences(words, part):
            covered[start : start + len(part)] = [True] * len(part)
    if not any(covered):
        return None
    length = 0
    for index, word in enumerate(words):
        if covered[index]:
            length += len(word) + (1 if index > 0 and covered[index - 1] else 0)
    return length


@dataclass(frozen=True)
class _Together:
    """Two policies both firing on ``text``, ``first`` applying before ``second``."""

    text: str
    first: Policy
    second: Policy
    first_length: int
    second_length: int

    @property
    def tie(self) -> bool:
        """Only the ids order them."""
        a, b = self.first, self.second
        return a.trigger.kind != "always" and (a.priority, a.trigger.kind, self.first_length) == (
            b.priority, b.trigger.kind, self.second_length
        )

    @property
    def both_apply(self) -> bool:
        """The first does not consume the words the second matched (an ``always`` policy has
        no span; on a witness text, matched spans always overlap)."""
        return not (self.first.trigger.consume and self.second.trigger.kind != "always")

    def precedence(self) -> str:
        a, b = self.first, self.second
        if a.priority != b.priority:
            return f"priority {a.priority} > {b.priority}"
        same = f"priority {a.priority} = {b.priority}"
        if a.trigger.kind != b.trigger.kind:
            return f"{same}, {a.trigger.kind} is more specific than {b.trigger.kind}"
        if self.first_length != self.second_length:
            return f"{same}, longer match {self.first_length} > {self.second_length}"
        return f"{same}, both {a.trigger.kind}, id '{a.id}' < '{b.id}'"


def _rank(policy: Policy, length: int) -> tuple[int, int, int, str]:
    return (-policy.priority, -SPECIFICITY[policy.trigger.kind], -length, policy.id)


def _windows_meet(one: Policy, other: Policy, now: datetime) -> bool:
    starts = [now] + [p.active.start for p in (one, other) if p.active and p.active.start]
    ends = [p.active.until for p in (one, other) if p.active and p.active.until]
    return not ends or min(ends) > max(starts)


def _together(
    one: Policy, other: Policy, now: datetime, index: TriggerIndex | None = None
) -> list[_Together]:
    """Every named text both fire on, shortest first (policies that can fire at all).
    ``index``: where each policy's texts were computed once (else computed here)."""
    if not _windows_meet(one, other, now):
        return []
    texts = index.witness_texts if index is not None else _texts
    candidates = {t.words: t for t in [*texts(one), *texts(other)]}
    if one.trigger.kind == "always" and other.trigger.kind == "always":
        candidates = {(): _Text((), "every intent")}
    folded_one = index.folded(one) if index is not None else None
    folded_other = index.folded(other) if index is not None else None
    found = []
    for words in sorted(candidates, key=lambda w: (len(w), w)):
        length_one = _matched_length(one, words, folded_one)
        length_other = _matched_length(other, words, folded_other)
        if length_one is None or length_other is None:
            continue
        (first, first_length), (second, second_length) = sorted(
            ((one, length_one), (other, length_other)), key=lambda pair: _rank(*pair)
        )
        found.append(_Together(candidates[words].shown, first, second, first_length, second_length))
    return found


def between(
    one: Policy,
    other: Policy,
    now: datetime,
    category_field: str | None,
    where: Where,
    index: TriggerIndex | None = None,
) -> Iterator[Finding]:
    """``index``: the :class:`TriggerIndex` holding both, whose per-policy texts are reused."""
    together = _together(one, other, now, index)
    tie = next((t for t in together if t.tie), None)
    if tie is not None:
        a, b = tie.first, tie.second
        consumed = f", and it consumes the words, so '{b.id}' is skipped there" if a.trigger.consume else ""
        yield where.finding(
            "overlapping_triggers", b.id,
            f"'{b.id}' and '{a.id}' both match {tie.text} at priority {a.priority} with {a.trigger.kind}"
            f" triggers: '{a.id}' applies first only because its id sorts first{consumed}",
            ("trigger", b.trigger.kind),
        )
    applying = next((t for t in together if t.both_apply), None)
    if applying is not None:
        yield from _clashes(applying, category_field, where)


def _clashes(pair: _Together, category_field: str | None, where: Where) -> Iterator[Finding]:
    """Constraints of two policies that apply together and cannot both hold; findings go to
    the later policy and name the earlier."""
    first, second = pair.first, pair.second
    ours = constraints(second, category_field)
    theirs = constraints(first, category_field)
    for mine in ours:
        for other in theirs:
            if disjoint_on_one_key(other, mine) and _composer_drops(other, mine):
                consumed = (
                    f", although '{second.id}' consumed the shopper's words"
                    if other.strategy == "override" else ""
                )
                yield where.finding(
                    "conflicting_filters", second.id,
                    f"{mine.shown()} has nothing in common with {other.shown(second)}: when both apply"
                    f" (e.g. on {pair.text}), the composer keeps the values of '{first.id}'"
                    f" ({pair.precedence()}) and drops this rule{consumed}",
                    mine.path,
                )
            if excluded(mine, other) or excluded(other, mine):
                positive, exclusion = (mine, other) if excluded(mine, other) else (other, mine)
                yield where.finding(
                    "contradictory_filters", second.id,
                    f"every value of {positive.shown(second)} is excluded by {exclusion.shown(second)}:"
                    f" whenever both are in force (e.g. on {pair.text}), nothing can match",
                    mine.path,
                )
    for mine_bound in bounds(second):
        for other_bound in bounds(first):
            if mine_bound.value is None or other_bound.value is None:
                continue
            if crossed(mine_bound, other_bound) or crossed(other_bound, mine_bound):
                yield where.finding(
                    "conflicting_filters", second.id,
                    f"price {mine_bound.shown} and the {other_bound.shown} of '{first.id}' cannot both hold:"
                    f" when both apply (e.g. on {pair.text}), the composer keeps the bound of '{first.id}'"
                    f" ({pair.precedence()}) and drops this one",
                    mine_bound.path,
                )


def _composer_drops(earlier: Constraint, later: Constraint) -> bool:
    """Disjoint values on one plan field: does the composer drop the later rule for having
    nothing in common? (An override holds its field: a later rule that did not consume the
    shopper's words loses by design, not by contradiction; a merge unions.)"""
    if later.strategy == "merge":
        return False
    held = earlier.strategy == "override"
    return not held or later.policy.trigger.consume


# --- which pairs can meet ------------------------------------------------------------------


def _runs(words: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every contiguous run of ``words`` (the text itself included; ``()`` for no words)."""
    if not words:
        yield ()
    for start in range(len(words)):
        for end in range(start + 1, len(words) + 1):
            yield words[start:end]


class TriggerIndex:
    """Policies by the folded word runs their triggers fire on (see the module docstring)."""

    def __init__(self, policies: Iterable[Policy]) -> None:
        self.policies = list(policies)
        self._position = {policy.id: n for n, policy in enumerate(self.policies)}
        self._contains: dict[tuple[str, ...], list[Policy]] = {}
        """a phrase or any part: fires on every text holding the run"""
        self._equals: dict[tuple[str, ...], list[Policy]] = {}
        """an exact text: fires on that text only"""
        self._ends: dict[tuple[str, ...], list[Policy]] = {}
        """a pattern cue and its capture: fires on texts ending so"""
        self._everywhere: list[Policy] = []
        self._texts: dict[tuple[str, ...], list[Policy]] = {}
        """every reachable text of a policy that may shadow others (consuming, ``exact``,
        ``phrase`` or ``any``: :func:`_consumes_first` is False for any other)"""
        self._folded: dict[str, tuple[Policy, list[tuple[str, ...]]]] = {}
        """policy id -> its reachable texts, folded"""
        self._witness: dict[str, tuple[Policy, list[_Text]]] = {}
        for policy in self.policies:
            kind = policy.trigger.kind
            if kind == "always":
                self._everywhere.append(policy)
                continue
            self._folded[policy.id] = (policy, [folded_words(text) for text in reachable_texts(policy)])
            shadows = policy.trigger.consume and kind in ("exact", "phrase", "any")
            for text in reachable_texts(policy):
                words = folded_words(text)
                if shadows:
                    self._texts.setdefault(words, []).append(policy)
                if kind == "exact":
                    self._equals.setdefault(words, []).append(policy)
                elif kind == "pattern":
                    self._ends.setdefault((*words, CAPTURED), []).append(policy)
                elif words:
                    self._contains.setdefault(words, []).append(policy)

    def firing_on(self, words: tuple[str, ...]) -> Iterator[Policy]:
        """Policies that may fire on ``words`` (a superset; ``always`` ones excepted)."""
        yield from self._equals.get(words, ())
        for run in _runs(words):
            yield from self._contains.get(run, ())
            if run and run[-1] == CAPTURED:
                yield from self._ends.get(run, ())

    def with_texts_in(self, words: tuple[str, ...]) -> Iterator[Policy]:
        """Policies that may shadow (consuming ``exact``, ``phrase`` or ``any``) with a text
        that is a run of ``words``: the shadowing candidates."""
        for run in _runs(words):
            yield from self._texts.get(run, ())

    def witness_texts(self, policy: Policy) -> list[_Text]:
        """:func:`_texts` of the policy, computed once per policy of this index."""
        found = self._witness.get(policy.id)
        if found is None or found[0] is not policy:
            found = (policy, _texts(policy))
            self._witness[policy.id] = found
        return found[1]

    def folded(self, policy: Policy) -> list[tuple[str, ...]]:
        """The policy's reachable texts, folded (computed once per indexed policy)."""
        found = self._folded.get(policy.id)
        if found is None or found[0] is not policy:  # not indexed: computed here
            return [folded_words(t) for t in reachable_texts(policy)]
        return found[1]

    def pairs(self, policies: Sequence[Policy]) -> Iterator[tuple[Policy, Policy]]:
        """The pairs of ``policies`` (a subset of the indexed ones) that may fire together on
        a text one of them names, in ``itertools.combinations`` order."""
        position = {policy.id: n for n, policy in enumerate(policies)}
        found: set[tuple[int, int]] = set()
        everywhere = [position[p.id] for p in self._everywhere if p.id in position]
        for n, policy in enumerate(policies):
            found.update((min(n, m), max(n, m)) for m in everywhere if m != n)
            for text in _texts(policy):
                for other in self.firing_on(text.words):
                    m = position.get(other.id)
                    if m is not None and m != n:
                        found.add((min(n, m), max(n, m)))
        for n, m in sorted(found):
            yield policies[n], policies[m]


# --- shadowing ---------------------------------------------------------------------------


def shadowed(low: Policy, live: TriggerIndex, now: datetime, where: Where) -> Iterator[Finding]:
    """``low`` can never apply: each of its trigger texts is consumed first by a policy that
    fires whenever it does (``exact``, ``phrase`` and ``any`` triggers; a pattern's captured
    words are not known, so patterns are neither shadowed nor shadowing). ``live`` indexes
    the policies that can fire; only those with a text inside ``low``'s are compared."""
    if low.trigger.kind not in ("exact", "phrase", "any"):
        return
    reasons = []
    for text in reachable_texts(low):
        words = folded_words(text)
        candidates = {high.id: high for high in live.with_texts_in(words)}.values()
        shadows = sorted(
            (high for high in candidates if _consumes_first(high, low, words, now, live.folded(high))),
            key=lambda high: _rank(high, 0),
        )
        if not shadows:
            return
        reasons.append(f"'{text}' by '{shadows[0].id}' ({_shadow_precedence(shadows[0], low)})")
    yield where.finding(
        "shadowed_policy", low.id,
        f"'{low.id}' can never apply: policies with consume: true that are active whenever it is"
        f" match its words first and consume them: {'; '.join(reasons)}",
        ("trigger", low.trigger.kind),
    )


def _consumes_first(
    high: Policy,
    low: Policy,
    words: tuple[str, ...],
    now: datetime,
    texts: Sequence[tuple[str, ...]] | None = None,
) -> bool:
    """Wherever ``low`` matches ``words``, ``high`` matches overlapping words, applies first
    and consumes them. For ``low`` exact, ``high`` may match part of the phrase (the intent
    is exactly the phrase); otherwise it must match the same phrase (its spans are then
    exactly ``low``'s, so a third policy that skips one skips both)."""
    if high.id == low.id or not high.trigger.consume or high.trigger.kind not in ("exact", "phrase", "any"):
        return False
    if not (_active_whenever(high, low, now) and _cohorts_cover(high, low)):
        return False
    if texts is None:  # ``high``'s reachable texts, folded
        texts = [folded_words(t) for t in reachable_texts(high)]
    higher = high.priority > low.priority
    equal = high.priority == low.priority
    if low.trigger.kind == "exact" and high.trigger.kind == "exact":
        return words in texts and (higher or (equal and high.id < low.id))
    if low.trigger.kind == "exact":
        return higher and any(any(True for _ in _occurrences(words, t)) for t in texts)
    if high.trigger.kind == "exact":
        return False  # it fires on the phrase alone, ``low`` on any intent containing it
    more_specific = SPECIFICITY[high.trigger.kind] > SPECIFICITY[low.trigger.kind]
    return words in texts and (higher or (equal and more_specific))


def _shadow_precedence(high: Policy, low: Policy) -> str:
    if high.priority != low.priority:
        return f"priority {high.priority} > {low.priority}"
    if high.trigger.kind != low.trigger.kind:
        return f"priority {high.priority} = {low.priority}, {high.trigger.kind} is more specific"
    return f"priority {high.priority} = {low.priority}, both {high.trigger.kind}, id '{high.id}' < '{low.id}'"


def _active_whenever(high: Policy, low: Policy, now: datetime) -> bool:
    """``high``'s window covers ``low``'s from ``now`` on."""
    if high.active is None:
        return True
    low_start = max(now, low.active.start) if low.active and low.active.start else now
    low_until = low.active.until if low.active else None
    starts = high.active.start is None or high.active.start <= low_start
    ends = high.active.until is None or (low_until is not None and high.active.until >= low_until)
    return starts and ends


def _cohorts_cover(high: Policy, low: Policy) -> bool:
    """Every request ``low`` fires for carries a cohort of ``high`` (or ``high`` has none)."""
    return not high.cohorts or (bool(low.cohorts) and set(low.cohorts) <= set(high.cohorts))

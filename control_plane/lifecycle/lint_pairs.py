"""Lint between policies: the analyses of policies taken together (see
:mod:`control_plane.lifecycle.lint`, whose docstring specifies every code).

:func:`shadowed` finds a policy whose every trigger text higher-precedence policies consume
first (``shadowed_policy``); :func:`meetings` finds, on each text a trigger names, the
policies that meet there: triggers only their ids order (``overlapping_triggers``) and
constraints that cannot both hold (``conflicting_filters``, ``contradictory_filters``).

Both work per distinct trigger text, through a :class:`TriggerIndex`, never per pair of
policies. Two policies meet on a text one of them names when the other's trigger fires
there: one of its phrases occurs in the text (a pattern's cue ends it, an exact text
equals it), so the index maps phrases to policies and each text asks only for its own
contiguous word runs. A text shared by thousands of policies is one finding per code and
plan field (listing the first policies involved, counting the rest), not one per pair:
the findings and the work follow the index, not the square of the set (ADR 0023). A
finding that would repeat on a longer text with the same policies is given once, on the
shortest text (the witness quoted in the message).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from control_plane.lifecycle.lint_facts import (
    CAPTURED,
    Bound,
    Constraint,
    Finding,
    Where,
    bounds,
    constraints,
    crossed,
    excluded,
    folded_words,
    identities,
    reachable_texts,
)
from control_plane.policy import SPECIFICITY, Loc, Policy

#: how many policy ids a finding about a shared text names before counting the rest
LISTED = 10

# --- texts both fire on ------------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """An intent lint can name: folded words (``CAPTURED`` for a pattern's captured words)."""

    words: tuple[str, ...]
    shown: str


EVERY_INTENT = _Text((), "every intent")
"""where two ``always`` policies meet"""


def _texts(policy: Policy, texts: Sequence[str] | None = None) -> list[_Text]:
    """The texts the policy names (``texts``: its reachable texts, when known)."""
    if policy.trigger.kind == "always":
        return []
    texts = reachable_texts(policy) if texts is None else texts
    if policy.trigger.kind == "pattern":
        return [_Text((*folded_words(c), CAPTURED), f"'{c} …'") for c in texts]
    return [_Text(folded_words(v), f"'{v}'") for v in texts]


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


def _window(policy: Policy) -> tuple[datetime | None, datetime | None]:
    return (policy.active.start, policy.active.until) if policy.active else (None, None)


def _windows_meet(one: Policy, other: Policy, now: datetime) -> bool:
    starts = [now] + [p.active.start for p in (one, other) if p.active and p.active.start]
    ends = [p.active.until for p in (one, other) if p.active and p.active.until]
    return not ends or min(ends) > max(starts)


def listed(ids: Sequence[str], cap: int | None = None) -> str:
    """``'a', 'b' and 'c'``; past ``cap`` (:data:`LISTED`) ids, ``'a', ..., 'j' and 1,990 more``."""
    cap = LISTED if cap is None else cap
    shown = [f"'{i}'" for i in ids[:cap]]
    if len(ids) > cap:
        return f"{', '.join(shown)} and {len(ids) - cap:,} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


# --- which policies meet on a text ------------------------------------------------------


def _runs(words: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every contiguous run of ``words`` (the text itself included; ``()`` for no words)."""
    if not words:
        yield ()
    for start in range(len(words)):
        for end in range(start + 1, len(words) + 1):
            yield words[start:end]


_Shadows = list[list[Policy]]
"""shadowing candidates of one text, in groups that share every condition but precedence"""


class TriggerIndex:
    """Policies by the folded word runs their triggers fire on (see the module docstring)."""

    def __init__(self, policies: Iterable[Policy]) -> None:
        self.policies = list(policies)
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
        self._named: dict[tuple[str, ...], tuple[_Text, list[Policy]]] = {}
        """every witness text -> the policies naming it, in index order"""
        self._shadows: dict[tuple[str, ...], _Shadows] = {}
        for policy in self.policies:
            kind = policy.trigger.kind
            if kind == "always":
                self._everywhere.append(policy)
                self._named.setdefault((), (EVERY_INTENT, []))[1].append(policy)
                continue
            texts = reachable_texts(policy)
            folded = [folded_words(text) for text in texts]
            self._folded[policy.id] = (policy, folded)
            for witness in _texts(policy, texts):
                named = self._named.setdefault(witness.words, (witness, []))[1]
                if not named or named[-1] is not policy:
                    named.append(policy)
            shadows = policy.trigger.consume and kind in ("exact", "phrase", "any")
            for words in folded:
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

    def folded(self, policy: Policy) -> list[tuple[str, ...]]:
        """The policy's reachable texts, folded (computed once per indexed policy)."""
        found = self._folded.get(policy.id)
        if found is None or found[0] is not policy:  # not indexed: computed here
            return [folded_words(t) for t in reachable_texts(policy)]
        return found[1]

    def named_texts(self) -> list[tuple[_Text, list[Policy]]]:
        """Every text a trigger names (and ``every intent`` where ``always`` policies
        meet), shortest first, with the policies naming it."""
        return [self._named[words] for words in sorted(self._named, key=lambda w: (len(w), w))]

    def ranked_on(self, text: _Text, allowed: set[str]) -> list[tuple[Policy, int]]:
        """The ``allowed`` policies firing on ``text`` with their matched lengths, in
        composer order (an ``always`` policy fires on every text; two of them meet on
        ``every intent`` only)."""
        if not text.words:
            candidates: Iterable[Policy] = self._everywhere
        else:
            candidates = {p.id: p for p in [*self.firing_on(text.words), *self._everywhere]}.values()
        ranked = []
        for policy in candidates:
            if policy.id not in allowed:
                continue
            length = _matched_length(policy, text.words, self.folded(policy))
            if length is not None:
                ranked.append((policy, length))
        return sorted(ranked, key=lambda pair: _rank(*pair))

    def shadow_groups(self, words: tuple[str, ...]) -> _Shadows:
        """The shadowing candidates of a text, computed once per text: grouped by kind,
        whether they name the text itself or only part of it, window and cohorts, each
        group in precedence order, so the first of a group that is not the shadowed policy
        decides for the whole group (:func:`shadowed`)."""
        found = self._shadows.get(words)
        if found is None:
            groups: dict[tuple[object, ...], list[Policy]] = {}
            for high in {p.id: p for p in self.with_texts_in(words)}.values():
                if not high.trigger.consume or high.trigger.kind not in ("exact", "phrase", "any"):
                    continue
                texts = self.folded(high)
                key = (
                    high.trigger.kind, words in texts,
                    any(any(True for _ in _occurrences(words, t)) for t in texts),
                    _window(high), frozenset(high.cohorts),
                )
                groups.setdefault(key, []).append(high)
            found = [sorted(group, key=lambda high: _rank(high, 0)) for group in groups.values()]
            found.sort(key=lambda group: _rank(group[0], 0))
            self._shadows[words] = found
        return found


# --- policies meeting on a text: ties and clashes -----------------------------------------


def meetings(
    index: TriggerIndex, policies: Sequence[Policy], now: datetime, category_field: str | None, where: Where
) -> Iterator[Finding]:
    """Ties and clashes between ``policies`` (indexed ones that can apply), text by text.

    On a text ``T`` two policies meet when both fire there and one of them names ``T`` (it
    then covers all of ``T``, so their spans overlap), their windows meet at or after
    ``now``; they *both apply* unless the earlier consumes (and the later is not
    ``always``). Same meaning as comparing every pair on its texts; reported once per text,
    code and plan field, and not again on a longer text with the same policies."""
    if len(policies) < len(index.policies):  # an index of these only: shorter candidate lists
        index = TriggerIndex(policies)
    allowed = {policy.id for policy in policies}
    facts = _Facts(category_field)
    given: set[tuple[object, ...]] = set()
    for text, named in index.named_texts():
        namers = {policy.id for policy in named if policy.id in allowed}
        if not namers:
            continue
        ranked = index.ranked_on(text, allowed)
        if len(ranked) < 2:
            continue
        for finding, key in [*_ties(text, ranked, namers, now, where), *_clashes(
            text, ranked, namers, now, facts, where
        )]:
            if key not in given:
                given.add(key)
                yield finding


def _ties(
    text: _Text, ranked: list[tuple[Policy, int]], namers: set[str], now: datetime, where: Where
) -> Iterator[tuple[Finding, tuple[object, ...]]]:
    """``overlapping_triggers``: policies covering all of the text at one priority with one
    trigger kind (not ``always``), whose windows meet the first's: only ids order them."""
    full = len(" ".join(text.words))
    level: dict[tuple[int, str], list[Policy]] = {}
    for policy, length in ranked:
        if length == full and policy.trigger.kind != "always":
            level.setdefault((policy.priority, policy.trigger.kind), []).append(policy)
    for tied in level.values():
        rest = sorted(tied, key=lambda p: p.id)
        while len(rest) > 1:
            head = rest[0]
            group = [head] + [p for p in rest[1:] if _windows_meet(head, p, now)]
            rest = [p for p in rest[1:] if not _windows_meet(head, p, now)]
            if len(group) > 1 and any(p.id in namers for p in group):
                yield _tie(text, group, where), ("tie", frozenset(p.id for p in group))


def _tie(text: _Text, group: list[Policy], where: Where) -> Finding:
    a, later = group[0], group[1:]
    b = later[0]
    if len(later) == 1:
        consumed = f", and it consumes the words, so '{b.id}' is skipped there" if a.trigger.consume else ""
        message = (
            f"'{b.id}' and '{a.id}' both match {text.shown} at priority {a.priority} with {a.trigger.kind}"
            f" triggers: '{a.id}' applies first only because its id sorts first{consumed}"
        )
    else:
        consumed = ", and it consumes the words, so the others are skipped there" if a.trigger.consume else ""
        message = (
            f"{listed([p.id for p in group])} all match {text.shown} at priority {a.priority} with"
            f" {a.trigger.kind} triggers ({len(group):,} policies): only their ids order them,"
            f" '{a.id}' applies first{consumed}"
        )
    return where.finding("overlapping_triggers", b.id, message, ("trigger", b.trigger.kind))


@dataclass
class _Earlier:
    """The first policy (in composer order) with one kind of constraint on a text: whatever
    decides whether a later policy clashes with it is in its key, so later ones compare
    with it only, not with every earlier policy of that kind."""

    policy: Policy
    length: int
    constraint: Constraint | Bound
    values: frozenset[tuple[str, str]] = frozenset()
    """the constraint's values as the composer compares them"""
    names: bool = False
    """the policy names the text"""
@dataclass
class _Clash:
    """The later policies whose rule clashes on one text, code and plan field; the first is
    the example the message spells out."""

    example: Finding
    pair: frozenset[str]
    later: list[str]


def _meets(
    first: _Earlier, second: Policy, second_names: bool, now: datetime, meet: dict[object, bool]
) -> bool:
    """On a text: one of the two names it, both apply (the earlier does not consume the
    later's words), their windows meet (``meet``: known answers by window pair)."""
    skipped = first.policy.trigger.consume and second.trigger.kind != "always"
    if skipped or not (first.names or second_names):
        return False
    windows = (_window(first.policy), _window(second))
    known = meet.get(windows)
    if known is None:
        known = meet[windows] = _windows_meet(first.policy, second, now)
    return known


_Keyed = list[tuple[Constraint, tuple[object, ...]]]
"""a policy's constraints, each with what a clash with it depends on"""


class _Facts:
    """Each policy's constraints and absolute price bounds, computed once for every text
    the policy fires on."""

    def __init__(self, category_field: str | None) -> None:
        self.category_field = category_field
        self._known: dict[str, tuple[Policy, _Keyed, list[Bound]]] = {}

    def of(self, policy: Policy) -> tuple[_Keyed, list[Bound]]:
        known = self._known.get(policy.id)
        if known is None or known[0] is not policy:
            keyed: _Keyed = [
                (c, (c.kind, c.plan_key, frozenset(identities(c.values)), c.strategy))
                for c in constraints(policy, self.category_field)
            ]
            known = (policy, keyed, [b for b in bounds(policy) if b.value is not None])
            self._known[policy.id] = known
        return known[1], known[2]


class _TextClashes:
    """The clashes on one text, policy by policy in composer order (:func:`_clashes`)."""

    def __init__(self, text: _Text, namers: set[str], now: datetime, where: Where) -> None:
        self.text, self.namers, self.now, self.where = text, namers, now, where
        self.earlier: dict[str | None, dict[tuple[object, ...], _Earlier]] = {}
        """catalog field -> the first policy of each kind of constraint on it"""
        self.earlier_bounds: dict[tuple[object, ...], _Earlier] = {}
        self.found: dict[tuple[str, str], _Clash] = {}
        self.meet: dict[object, bool] = {}

    def note(self, code: str, key: str, pair: _Together, message: str, path: Loc) -> None:
        second = pair.second
        clash = self.found.get((code, key))
        if clash is None:
            finding = self.where.finding(code, second.id, message, path)
            self.found[(code, key)] = _Clash(finding, frozenset({pair.first.id, second.id}), [])
        elif second.id != clash.example.policy_id and second.id not in clash.later[-1:]:
            clash.later.append(second.id)

    def add(self, second: Policy, length: int, facts: _Facts) -> None:
        """Compare ``second`` with the earlier policies, then count it among them."""
        mine_all, mine_bounds = facts.of(second)
        names = second.id in self.namers
        for mine, kind in mine_all:
            self._constraint(second, length, names, mine, kind)
        for mine_bound in mine_bounds:
            self._bound(second, length, names, mine_bound)
        standing = (second.trigger.consume, _window(second), names)
        for mine, kind in mine_all:
            on_field = self.earlier.setdefault(mine.field, {})
            values = kind[2]
            assert isinstance(values, frozenset)
            on_field.setdefault((*kind, *standing), _Earlier(second, length, mine, values, names))
        for mine_bound in mine_bounds:
            key = (mine_bound.side, mine_bound.value, *standing)
            self.earlier_bounds.setdefault(key, _Earlier(second, length, mine_bound, names=names))

    def _constraint(
        self, second: Policy, length: int, names: bool, mine: Constraint, kind: tuple[object, ...]
    ) -> None:
        dropped = contradicted = False
        values = kind[2]
        assert isinstance(values, frozenset)
        for rep in self.earlier.get(mine.field, {}).values():
            other = rep.constraint
            if not isinstance(other, Constraint) or not _meets(rep, second, names, self.now, self.meet):
                continue
            pair = _Together(self.text.shown, rep.policy, second, rep.length, length)
            key = mine.plan_key
            disjoint = key is not None and other.plan_key == key and not values & rep.values
            if not dropped and disjoint and _composer_drops(other, mine):
                dropped = True
                held = other.strategy == "override"
                consumed = f", although '{second.id}' consumed the shopper's words" if held else ""
                self.note(
                    "conflicting_filters", str(mine.plan_key), pair,
                    f"{mine.shown()} has nothing in common with {other.shown(second)}: when both apply"
                    f" (e.g. on {pair.text}), the composer keeps the values of '{rep.policy.id}'"
                    f" ({pair.precedence()}) and drops this rule{consumed}",
                    mine.path,
                )
            if not contradicted and (excluded(mine, other) or excluded(other, mine)):
                contradicted = True
                positive, exclusion = (mine, other) if excluded(mine, other) else (other, mine)
                self.note(
                    "contradictory_filters", str(mine.field), pair,
                    f"every value of {positive.shown(second)} is excluded by {exclusion.shown(second)}:"
                    f" whenever both are in force (e.g. on {pair.text}), nothing can match",
                    mine.path,
                )
            if dropped and contradicted:
                return

    def _bound(self, second: Policy, length: int, names: bool, mine: Bound) -> None:
        for rep in self.earlier_bounds.values():
            other = rep.constraint
            if not isinstance(other, Bound) or not _meets(rep, second, names, self.now, self.meet):
                continue
            if crossed(mine, other) or crossed(other, mine):
                first = rep.policy
                pair = _Together(self.text.shown, first, second, rep.length, length)
                self.note(
                    "conflicting_filters", "price bounds", pair,
                    f"price {mine.shown} and the {other.shown} of '{first.id}' cannot both hold: when both"
                    f" apply (e.g. on {pair.text}), the composer keeps the bound of '{first.id}'"
                    f" ({pair.precedence()}) and drops this one",
                    mine.path,
                )
                return

    def findings(self) -> Iterator[tuple[Finding, tuple[object, ...]]]:
        for (code, key), clash in self.found.items():
            finding = clash.example
            if clash.later:
                finding = Finding(
                    finding.code, finding.severity, finding.policy_id, finding.location,
                    f"{finding.message}; the same on {self.text.shown} for {listed(clash.later)}"
                    f" ({len(clash.later) + 1:,} policies in all)",
                )
            yield finding, ("clash", code, key, clash.pair | frozenset(clash.later))


def _clashes(
    text: _Text,
    ranked: list[tuple[Policy, int]],
    namers: set[str],
    now: datetime,
    facts: _Facts,
    where: Where,
) -> Iterator[tuple[Finding, tuple[object, ...]]]:
    """Constraints of policies that apply together on the text and cannot both hold: one
    finding per code and plan field, at the first policy whose rule is dropped, counting
    the others."""
    clashes = _TextClashes(text, namers, now, where)
    for second, length in ranked:
        clashes.add(second, length, facts)
    yield from clashes.findings()


def _composer_drops(earlier: Constraint, later: Constraint) -> bool:
    """Disjoint values on one plan field: does the composer drop the later rule for having
    nothing in common? (An override holds its field: a later rule that did not consume the
    shopper's words loses by design, not by contradiction; a merge unions.)"""
    if later.strategy == "merge":
        return False
    held = earlier.strategy == "override"
    return not held or later.policy.trigger.consume


# --- shadowing ---------------------------------------------------------------------------


def shadowed(low: Policy, live: TriggerIndex, now: datetime, where: Where) -> Iterator[Finding]:
    """``low`` can never apply: each of its trigger texts is consumed first by a policy that
    fires whenever it does (``exact``, ``phrase`` and ``any`` triggers; a pattern's captured
    words are not known, so patterns are neither shadowed nor shadowing). ``live`` indexes
    the policies that can fire; only those with a text inside ``low``'s are compared, and of
    those only the first of each group of :meth:`TriggerIndex.shadow_groups`."""
    if low.trigger.kind not in ("exact", "phrase", "any"):
        return
    reasons = []
    for text in reachable_texts(low):
        words = folded_words(text)
        best: Policy | None = None
        for group in live.shadow_groups(words):  # by their first's precedence
            if group[0].priority < low.priority or (best is not None and _rank(group[0], 0) > _rank(best, 0)):
                break  # nothing further can come first
            high = group[0] if group[0].id != low.id else next(iter(group[1:]), None)
            if high is None or not _consumes_first(high, low, words, now, live.folded(high)):
                continue
            if best is None or _rank(high, 0) < _rank(best, 0):
                best = high
        if best is None:
            return
        reasons.append(f"'{text}' by '{best.id}' ({_shadow_precedence(best, low)})")
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

"""What the matcher hands the composer: the matched policies, grouped by equal match.

At 100,000 policies an intent matches hundreds or thousands of policies, and most of them
share their spans and captures with others (policies with equal triggers or the same
matched phrases, ADR 0022). :class:`Matches` holds one :class:`MatchGroup` per distinct
match: the ids of the policies it is the match of, and the spans and captures they share.
The composer reads the groups (:attr:`Matches.groups`): it checks a group's spans, and
computes its footprint and covered length, once per group, not per policy (ADR 0028).

As a sequence, a :class:`Matches` is the per-policy view: one :class:`~control_plane.plan.Match`
per policy, sorted by policy id, what :func:`control_plane.matcher.match` returned before.
That view is built the first time it is asked for (tests, tools, comparisons; never by a
search) and equals any sequence of the same matches in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, overload

from control_plane.plan import CapturedText, Match, Span


class MatchGroup(NamedTuple):
    """The match of every policy in ``policy_ids``: the same spans, the same captures."""

    policy_ids: tuple[str, ...]
    spans: tuple[Span, ...] = ()
    captures: tuple[CapturedText, ...] = ()


class Matches(Sequence[Match]):
    """Matched policies by group (:attr:`groups`); as a sequence, one match per policy,
    sorted by policy id. A policy id appears at most once (the composer checks)."""

    __slots__ = ("_count", "_each", "groups")

    def __init__(self, groups: Iterable[MatchGroup] = ()) -> None:
        self.groups: tuple[MatchGroup, ...] = tuple(groups)
        self._count = sum(len(group.policy_ids) for group in self.groups)
        self._each: tuple[Match, ...] | None = None

    @classmethod
    def of(cls, matches: Iterable[Match]) -> Matches:
        """One group per match (a per-policy result, e.g. an earlier index layout's)."""
        return cls(MatchGroup((m.policy_id,), m.spans, m.captures) for m in matches)

    def each(self) -> tuple[Match, ...]:
        """One :class:`Match` per policy, sorted by policy id (built once)."""
        if self._each is None:
            self._each = tuple(
                sorted(
                    (
                        Match.model_construct(policy_id=policy_id, spans=group.spans, captures=group.captures)
                        for group in self.groups
                        for policy_id in group.policy_ids
                    ),
                    key=_policy_id,
                )
            )
        return self._each

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Match: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Match, ...]: ...

    def __getitem__(self, index: int | slice) -> Match | tuple[Match, ...]:
        return self.each()[index]

    def __iter__(self) -> Iterator[Match]:
        return iter(self.each())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Matches):
            return len(self) == len(other) and self.each() == other.each()
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self.each() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to tuples, which hash otherwise

    def __repr__(self) -> str:
        return f"Matches({list(self.groups)!r})"


def _policy_id(found: Match) -> str:
    return found.policy_id

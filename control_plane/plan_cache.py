"""Plan cache: compiled plans keyed by (policy-set version, normalised intent, cohorts,
market, catalog index: the price statistics its relative prices were resolved with): a plan
is the same for every user, whose purchase boosts are applied when it is
rendered (the service keeps each user's purchase rows in a cache of their own). Dropped
whole when the policy-set version changes. An entry holds only between the active-window
boundaries around the time it was compiled for: it expires at the next one, so a campaign
that starts at midnight is never hidden by a plan cached the evening before, and a request
for an earlier time (a fixed ``now`` in a test, a replay) never gets a plan compiled for a
later window.

A cached plan carries its :class:`Renderings`: the request body of each tier it was
rendered to, already serialised (keyed by tier, page, size and the personalization boosts
of the request), the explanation's JSON data, the plan's digest and the tier the fallback
stopped at last time. A hit whose boosts re-age to the same values reuses those bytes: no
composition, no rendering, no serialisation."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from control_plane.policy import PolicySet
from control_plane.policy_index import index_of

if TYPE_CHECKING:
    from control_plane.executor import Replay

T = TypeVar("T")
V = TypeVar("V")

RENDERINGS_PER_PLAN = 32
"""rendered bodies kept per cached plan (pages, sizes, boosts): the oldest goes first"""


@dataclass(frozen=True)
class RenderedTier:
    """One tier's request body as rendered (never changed once built) and as sent."""

    body: Mapping[str, Any]
    text: str
    """``body`` as one line of JSON text, the form ``_msearch`` sends"""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> RenderedTier:
        return cls(body, _TEXT(body))


_TEXT = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
"""``json.dumps(body, ensure_ascii=False)``, the same text, from one kept encoder without the
check for circular containers (a rendered body is a tree: a container in it twice is written
twice, as before): a new encoder per body and the check were about a quarter of the encoding
(ADR 0046)"""


class Renderings:
    """What one compiled plan rendered to, shared by every hit on it. Values are computed
    once and then only read; two threads computing the same value at once store equal
    values, so the lock guards the dictionaries' shape only."""

    def __init__(self, limit: int = RENDERINGS_PER_PLAN) -> None:
        self.limit = limit
        self._bodies: OrderedDict[Hashable, RenderedTier] = OrderedDict()
        self._memo: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.stop_tier: str | None = None
        """the last tier the fallback ran for this plan (where the last request stopped):
        the next request sends every tier up to it in one round trip"""
        self.replay: Replay | None = None
        """what the last full run that fell back saw (:func:`control_plane.executor.replay_steps`)"""

    def body(self, key: Hashable, render: Callable[[], Mapping[str, Any]]) -> RenderedTier:
        """The rendered body for ``key``, rendering it (``render()``) only the first time."""
        with self._lock:
            rendered = self._bodies.get(key)
            if rendered is not None:
                self._bodies.move_to_end(key)
                return rendered
        rendered = RenderedTier.of(render())
        with self._lock:
            self._bodies[key] = rendered
            while len(self._bodies) > self.limit:
                self._bodies.popitem(last=False)
        return rendered

    def memo(self, name: str, compute: Callable[[], V]) -> V:
        """``compute()`` once per plan (the explanation's data, the plan's digest)."""
        try:
            value: V = self._memo[name]
        except KeyError:
            value = self._memo[name] = compute()
        return value

    def __len__(self) -> int:
        return len(self._bodies)


def window_edges(policy_set: PolicySet) -> list[datetime]:
    """Every active-window start and end in the set, sorted, each once."""
    return list(index_of(policy_set).window_edges)


def next_boundary(policy_set: PolicySet, now: datetime) -> datetime | None:
    """The earliest window start or end strictly after ``now`` (None: no boundary ahead).
    A binary search in the set's sorted edges (:mod:`control_plane.policy_index`)."""
    return index_of(policy_set).next_boundary(now)


def previous_boundary(policy_set: PolicySet, now: datetime) -> datetime | None:
    """The latest window start or end at or before ``now`` (None: no boundary behind)."""
    return index_of(policy_set).previous_boundary(now)


class PlanCache(Generic[T]):
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[T, datetime | None, datetime | None]] = OrderedDict()
        self._version: str | None = None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, version: str, key: Hashable, now: datetime, *, counted: bool = True) -> T | None:
        """The entry for ``key`` valid at ``now`` (None: none); ``counted``: as a hit or a
        miss of :attr:`hits` / :attr:`misses` (a look that may be repeated elsewhere is not,
        and counts with :meth:`note_hit` once it is used)."""
        with self._lock:
            if version != self._version:
                self._entries.clear()
                self._version = version
            entry = self._entries.get(key)
            if (
                entry is None
                or (entry[1] is not None and now >= entry[1])
                or (entry[2] is not None and now < entry[2])
            ):
                self.misses += counted
                return None
            self._entries.move_to_end(key)
            self.hits += counted
            return entry[0]

    def note_hit(self) -> None:
        with self._lock:
            self.hits += 1

    def note_miss(self) -> None:
        with self._lock:
            self.misses += 1

    def put(
        self,
        version: str,
        key: Hashable,
        value: T,
        expires: datetime | None,
        since: datetime | None = None,
    ) -> None:
        """Cache ``value`` for times in ``[since, expires)`` (None: unbounded)."""
        if self.max_entries <= 0:
            return
        with self._lock:
            if version != self._version:
                self._entries.clear()
                self._version = version
            self._entries[key] = (value, expires, since)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

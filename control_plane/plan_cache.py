"""Plan cache: compiled plans keyed by (policy-set version, normalised intent, cohorts,
market, user). Dropped whole when the policy-set version changes. An entry holds only
between the active-window boundaries around the time it was compiled for: it expires at
the next one, so a campaign that starts at midnight is never hidden by a plan cached the
evening before, and a request for an earlier time (a fixed ``now`` in a test, a replay)
never gets a plan compiled for a later window."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from datetime import datetime
from typing import Generic, TypeVar

from control_plane.policy import PolicySet
from control_plane.policy_index import index_of

T = TypeVar("T")


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

    def get(self, version: str, key: Hashable, now: datetime) -> T | None:
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
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

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

"""What a request needs to look up in a policy set, computed once per loaded set.

``index_of(policy_set)`` builds a :class:`PolicyIndex` the first time it is asked for a
given :class:`PolicySet` object and returns the same one afterwards, for as long as that
object lives: the policy-id map, the standing guards (composed on every request), the
vocabularies as lookup tables, the sorted active-window edges (plan-cache validity) and
each rule's captures (a JSON dump and a regex per rule, per request, before).
Without it, every compose rebuilt the id map and scanned every policy for guards, and every
plan-cache miss scanned every policy's window: milliseconds per request at 10,000 policies.

The set is frozen, so its index never goes stale; the cache holds the set weakly (an
index lives exactly as long as the set it describes). Loading a version warms it
(:func:`control_plane.policy_store.read_index`), so requests find it built.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from control_plane.composer_captures import VocabularyIndex, index_vocabularies
from control_plane.matcher import PolicyMap
from control_plane.policy import Policy, PolicySet


@dataclass(frozen=True)
class PolicyIndex:
    """Per-version lookup structures of one policy set (see the module docstring)."""

    version: str
    by_id: PolicyMap
    """policies by id, with the triggers the matcher expands matched documents with"""
    standing_guards: tuple[Policy, ...]
    """enabled guards without an active window: composed even when not matched"""
    vocabularies: Mapping[str, VocabularyIndex]
    window_edges: tuple[datetime, ...]
    """every active-window start and end, sorted, each once"""
    rule_captures: Mapping[str, tuple[tuple[str, ...], ...]]
    """policy id -> the ``captures`` of each of its rules"""

    def next_boundary(self, now: datetime) -> datetime | None:
        """The earliest window edge strictly after ``now``."""
        position = bisect_right(self.window_edges, now)
        return self.window_edges[position] if position < len(self.window_edges) else None

    def previous_boundary(self, now: datetime) -> datetime | None:
        """The latest window edge at or before ``now``."""
        position = bisect_right(self.window_edges, now)
        return self.window_edges[position - 1] if position > 0 else None

    def edges_between(self, start: datetime, end: datetime) -> tuple[datetime, ...]:
        """The window edges in ``[start, end)``."""
        return self.window_edges[bisect_left(self.window_edges, start) : bisect_left(self.window_edges, end)]


def build_index(policy_set: PolicySet, previous: PolicyIndex | None = None) -> PolicyIndex:
    """The lookups of ``policy_set``; a policy that is the very object ``previous`` (the
    index of the version loaded before) holds keeps its rule captures from there."""
    known = previous.by_id if previous is not None else {}
    known_captures = previous.rule_captures if previous is not None else {}
    edges = {
        edge
        for policy in policy_set.policies
        if policy.active is not None
        for edge in (policy.active.start, policy.active.until)
        if edge is not None
    }
    return PolicyIndex(
        version=policy_set.version,
        by_id=PolicyMap(policy_set.policies),
        standing_guards=tuple(
            policy
            for policy in policy_set.policies
            if policy.kind == "guard" and policy.enabled and policy.active is None
        ),
        vocabularies=index_vocabularies(policy_set),
        window_edges=tuple(sorted(edges)),
        rule_captures={
            policy.id: known_captures[policy.id]
            if known.get(policy.id) is policy
            else tuple(rule.captures for rule in policy.rules)
            for policy in policy_set.policies
        },
    )


_INDEXES: dict[int, tuple[weakref.ref[PolicySet], PolicyIndex]] = {}
_LOCK = threading.RLock()  # reentrant: a collected set's callback may run inside


def index_of(policy_set: PolicySet, previous: PolicyIndex | None = None) -> PolicyIndex:
    """The index of ``policy_set``, built on first use (module docstring), from
    ``previous`` where it describes the very same policy objects (:func:`build_index`)."""
    key = id(policy_set)
    entry = _INDEXES.get(key)
    if entry is not None and entry[0]() is policy_set:
        return entry[1]
    index = build_index(policy_set, previous)  # outside the lock: concurrent builders agree
    with _LOCK:
        entry = _INDEXES.get(key)
        if entry is not None and entry[0]() is policy_set:
            return entry[1]
        _INDEXES[key] = (weakref.ref(policy_set, lambda ref: _forget(key, ref)), index)
    return index


def _forget(key: int, ref: weakref.ref[PolicySet]) -> None:
    with _LOCK:
        entry = _INDEXES.get(key)
        if entry is not None and entry[0] is ref:
            del _INDEXES[key]

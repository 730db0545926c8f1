"""Who authored a candidate version: everyone who authored a change between the version
now live and the candidate. Pure: the registry and the history are passed in.

Versions form a tree through their registry ``parent`` (the version a change was made
from: a draft on top of staging, an apply over staging, a kill switch over live). The
changes between live ``L`` and candidate ``C`` are those on the versions ``C`` descends
from and ``L`` does not (``git log L..C``): walking ``C``'s parents, every version until the
first one that is ``L`` or one of ``L``'s ancestors (the *base*). Plus the test edits on the
base whose suite is not the one live carries (tests are edited in place: a ``tests`` event
keeps the version and changes its suite).

After a rollback, live is the older version: the rolled-back changes lie between live and
any candidate that still contains them again, and their authors count again, even though
someone reviewed them once (see docs/lifecycle.md, "Four-eyes over the lineage").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from control_plane.lifecycle.store import Event

CHANGES = ("apply", "draft", "tests", "suggest")
"""the actions that author a change (the operator's ``bootstrap`` is not reviewed work)"""
MAX_DEPTH = 10_000


@dataclass(frozen=True)
class Change:
    """One authored change in a candidate's lineage."""

    actor: str
    action: str
    version: str
    event_id: str
    time: str
    reason: str | None
    policy_ids: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "actor": self.actor, "action": self.action, "version": self.version,
            "event_id": self.event_id, "time": self.time, "reason": self.reason,
            "policy_ids": list(self.policy_ids),
        }

    def describe(self) -> str:
        what = f" ({', '.join(self.policy_ids)})" if self.policy_ids else ""
        return f"{self.action} of {self.version[:12]}{what} at {self.time}, event {self.event_id}"


def ancestry(version: str, parent_of: Callable[[str], str | None]) -> list[str]:
    """``version``, its parent, its parent's parent... (stops at a root or a cycle)."""
    chain: list[str] = []
    seen: set[str] = set()
    current: str | None = version
    while current is not None and current not in seen and len(chain) < MAX_DEPTH:
        chain.append(current)
        seen.add(current)
        current = parent_of(current)
    return chain


def unreviewed_versions(
    candidate: str, live: str | None, parent_of: Callable[[str], str | None]
) -> tuple[list[str], str | None]:
    """The versions between live and the candidate (candidate first), and the base: the
    first of the candidate's ancestors that live has too (None when they share none)."""
    behind = set(ancestry(live, parent_of)) if live else set()
    between: list[str] = []
    for version in ancestry(candidate, parent_of):
        if version in behind:
            return between, version
        between.append(version)
    return between, None


def lineage_changes(
    candidate: str,
    live: str | None,
    live_suite: str | None,
    parent_of: Callable[[str], str | None],
    events_of: Callable[[Sequence[str]], Sequence[Event]],
) -> list[Change]:
    """Every authored change between ``live`` and ``candidate``, newest first.
    ``events_of(versions)``: the authoring events (:data:`CHANGES`) on those versions."""
    between, base = unreviewed_versions(candidate, live, parent_of)
    asked = [*between, base] if base is not None else between
    changes = []
    for event in events_of(asked):
        on_base = event.version == base and event.version not in between
        if on_base and (event.action != "tests" or event.suite_sha256 == live_suite):
            continue
        changes.append(Change(
            actor=event.actor, action=event.action, version=event.version or "",
            event_id=event.event_id, time=event.time, reason=event.reason,
            policy_ids=tuple(event.policy_ids),
        ))
    return changes


def authors(changes: Sequence[Change]) -> tuple[str, ...]:
    return tuple(sorted({change.actor for change in changes}))

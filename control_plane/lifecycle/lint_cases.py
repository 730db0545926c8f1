"""Lint of a policy test suite against the set's active windows (``test_unpinned_window``).

A test case that pins no ``now`` (neither the case nor its test file) runs at whatever
instant the run is given, by default the day it runs. When its intent fires a policy with
an ``active`` window, its result depends on that day: it passes in November and fails in
December, and a version carrying it cannot be promoted on the days it fails. This check
names every such case, at the ``file:line`` of the case, with the policy and the window.

Fires is judged statically, and leans towards warning: the intent and the trigger texts
are folded (case, accents), split into words (apostrophes and punctuation split, like the
analyzer), and a plural ``s`` is dropped, so ``chocolats`` fires ``chocolat``. A phrase or
any-term text fires when its words occur in a row in the intent, an exact text when they
are the intent, a pattern when a cue occurs with a word after it, ``always`` on every
intent. The policy must be enabled and its cohorts (if any) among the case's.

A window matters when it is open at ``now`` or one of its edges falls within the horizon
after ``now`` (default a year): a window that ended, or starts beyond the horizon, does not
make today's result move. Pure: ``now`` is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from control_plane.lifecycle.lint_facts import Finding, fold, trigger_texts
from control_plane.policy import ActiveWindow, Policy

DEFAULT_HORIZON = timedelta(days=365)
"""how far ahead of now a window edge makes an unpinned case time-dependent"""

_WORD = re.compile(r"\w+")


class Case(Protocol):
    """What the check reads of a test case (:class:`control_plane.lifecycle.suite.TestCase`)."""

    @property
    def name(self) -> str: ...
    @property
    def intent(self) -> str: ...
    @property
    def cohorts(self) -> tuple[str, ...]: ...
    @property
    def now(self) -> datetime | None: ...
    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...


def unpinned_windows(
    policies: Sequence[Policy], cases: Iterable[Case], now: datetime, horizon: timedelta = DEFAULT_HORIZON
) -> Iterator[Finding]:
    """A ``test_unpinned_window`` warning for each (unpinned case, windowed policy it fires)
    whose window is open at ``now`` or has an edge within ``horizon`` after it. A case is
    compared only with the policies one of its words can fire (a text's first word)."""
    windowed = [
        (policy, why)
        for policy in policies
        if policy.enabled and policy.active is not None
        and (why := window_moves(policy.active, now, horizon)) is not None
    ]
    by_word = _by_first_word(windowed)
    for case in cases:
        if case.now is not None:
            continue
        intent = words(case.intent)
        candidates = sorted({n for word in (*intent, None) for n in by_word.get(word, ())})
        for n in candidates:
            policy, why = windowed[n]
            if policy.cohorts and not set(policy.cohorts) & set(case.cohorts):
                continue
            if not fires(policy, intent):
                continue
            location = f"{case.file}:{case.line}" if case.file and case.line else f"test:{case.name}"
            yield Finding(
                "test_unpinned_window", "warning", policy.id, location,
                f"test case {case.name!r} pins no 'now' and its intent {case.intent!r} fires"
                f" {policy.id!r}, {why}: its result depends on the day it runs. Give the case, or"
                " its test file, a 'now'",
            )


def _by_first_word(windowed: Sequence[tuple[Policy, str]]) -> dict[str | None, list[int]]:
    """Positions of the windowed policies by the first word of each trigger text (None:
    ``always``), so a case is compared only with the policies one of its words can fire:
    cases x windowed policies was the whole cost with many of both."""
    found: dict[str | None, list[int]] = {}
    for n, (policy, _) in enumerate(windowed):
        if policy.trigger.kind == "always":
            found.setdefault(None, []).append(n)
        for first in {text[0] for text in map(words, trigger_texts(policy)) if text}:
            found.setdefault(first, []).append(n)
    return found


def window_moves(window: ActiveWindow, now: datetime, horizon: timedelta) -> str | None:
    """Why a result under ``window`` can differ from one day to another from ``now`` on
    (open now, or an edge within the horizon), or None."""
    edges = [
        f"{name} {edge.isoformat()}"
        for name, edge in (("starts", window.start), ("ends", window.until))
        if edge is not None and now < edge <= now + horizon
    ]
    if window.contains(now):
        ends = f", ends {window.until.isoformat()}" if window.until else ""
        return f"whose window is open now{ends}"
    if edges:
        return "whose window " + " and ".join(edges)
    return None


def words(text: str) -> tuple[str, ...]:
    """Folded words, plural ``s`` dropped: how both sides are compared."""
    return tuple(_singular(word) for word in _WORD.findall(fold(text)))


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def fires(policy: Policy, intent: tuple[str, ...]) -> bool:
    kind = policy.trigger.kind
    if kind == "always":
        return True
    texts = [words(text) for text in trigger_texts(policy)]
    texts = [text for text in texts if text]
    if kind == "exact":
        return intent in texts
    if kind == "pattern":  # a cue, then at least one word to capture
        return any(start + len(cue) < len(intent) for cue in texts for start in _at(intent, cue))
    return any(next(_at(intent, text), None) is not None for text in texts)


def _at(intent: tuple[str, ...], part: tuple[str, ...]) -> Iterator[int]:
    for start in range(len(intent) - len(part) + 1):
        if intent[start : start + len(part)] == part:
            yield start

"""The tests' instants. Time is an input: every shared fixture runs at :data:`FIXED_NOW`
(``clock``, in ``tests/conftest.py``); a test about another instant names it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from control_plane.times import Clock, fixed_clock

FIXED_NOW = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)
"""An ordinary Sunday noon, two weeks before the demo's only active window (the Christmas
campaign, 1 to 25 December 2026)."""

FIXED_CLOCK = fixed_clock(FIXED_NOW)


def ticking_clock(start: datetime = FIXED_NOW, step: timedelta = timedelta(seconds=1)) -> Clock:
    """A clock that moves ``step`` on every read, from ``start``: distinct, ordered times
    without the wall clock (time-window reads, event order)."""
    ticks = itertools.count()

    def clock() -> datetime:
        return start + step * next(ticks)

    return clock

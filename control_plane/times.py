"""Time as an input. Instants as the records, events and history store them: ISO 8601 in
UTC with a ``Z``.

Nothing in the core reads the wall clock. A :data:`Clock` is passed down from the edge
that owns it: the CLI, ``govsearch serve`` and the demo build :func:`system_clock` once and
hand it to the app, the recorder, the workflow and the agent gateway; the pipeline itself
(``SearchService.compile`` / ``search``) takes the instant of each request as an argument.
Tests pass :func:`fixed_clock`. ``tests/unit/test_clock_edges.py`` fails when anything else
reads the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Where an edge reads "now": an aware datetime in UTC."""


def system_clock() -> datetime:
    """The wall clock, in UTC: the one place govsearch reads it (edges pass it on)."""
    return datetime.now(UTC)


def fixed_clock(instant: datetime) -> Clock:
    """A clock that always answers ``instant`` (naive means UTC)."""
    moment = instant if instant.tzinfo else instant.replace(tzinfo=UTC)

    def clock() -> datetime:
        return moment

    return clock


def iso(moment: datetime) -> str:
    """``2026-11-30T15:37:17.226536Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """An ISO 8601 time; without a zone, UTC. Raises ``ValueError``."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

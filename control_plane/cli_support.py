"""What every ``govsearch`` command group shares: the one-line error, JSON output, the
engine connection and time options. No command lives here."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from control_plane.config import Settings
from control_plane.times import Clock, parse_time, system_clock

CLOCK: Clock = system_clock
"""The command line's one clock (an edge): every command that needs "now" reads it here
and passes the instant, or this clock, down."""


class CliError(Exception):
    """A one-line reason, printed as ``govsearch: error: ...`` with exit code 1."""


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def connect_engine(settings: Settings) -> Any:
    """The configured engine, or a :class:`CliError` saying how to start one."""
    from control_plane.engine import EngineError, connect

    try:
        return connect(settings.engine)
    except EngineError as error:
        raise CliError(f"{error} (start one with: govsearch engine start)") from error


def time_option(value: str | None) -> datetime | None:
    """An ISO time given on the command line (UTC when no zone is given), or None."""
    try:
        return parse_time(value) if value else None
    except ValueError as error:
        raise CliError(f"not an ISO 8601 time: {value!r} (e.g. 2026-12-10T12:00:00Z)") from error


def now_option(value: str | None) -> datetime:
    """A ``--now`` given on the command line, else :data:`CLOCK`'s now."""
    return time_option(value) or CLOCK()

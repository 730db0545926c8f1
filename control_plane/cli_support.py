"""What every ``govsearch`` command group shares: the one-line error, JSON output, the
engine connection and time options. No command lives here."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from control_plane.config import Settings
from control_plane.times import parse_time


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
    return parse_time(value) if value else None

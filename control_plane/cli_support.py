"""What every ``govsearch`` command group shares: the one-line error, JSON output, the
engine connection and time options. No command lives here."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from control_plane.config import Settings, project_path
from control_plane.times import Clock, parse_time, system_clock

CLOCK: Clock = system_clock
"""The command line's one clock (an edge): every command that needs "now" reads it here
and passes the instant, or this clock, down."""


EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3
EXIT_REFUSED = 4
EXIT_AUDIT_BROKEN = 5
EXIT_ENGINE_UNAVAILABLE = 6
EXIT_AUDIT_INCOMPLETE = 7

#: Every exit status of ``govsearch``, and what it means (docs/cli.md lists exactly these).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FINDINGS: "the command ran and the answer is no: lint errors, a failing policy test,"
    " a search answered with a status other than ok, nothing found for what was named (a"
    " request id, a key id, an audit log or index, an audit key file)",
    EXIT_USAGE: "usage: an unknown command or option, a bad option value, a file or directory"
    " named on the command line that does not exist (but audit verify's log, key and checkpoint"
    " files: their absence is a finding)",
    EXIT_INVALID_INPUT: "invalid input files: a policy, vocabulary, governance, test, catalog,"
    " queries or configuration file (every problem printed as file:line:column: code: message),"
    " or a path the configuration names that does not exist",
    EXIT_REFUSED: "refused: the workflow refused the action (its code is printed), or no valid"
    " API key was given",
    EXIT_AUDIT_BROKEN: "the audit chain does not verify",
    EXIT_ENGINE_UNAVAILABLE: "the engine cannot be reached, failed, or could not be started",
    EXIT_AUDIT_INCOMPLETE: "the audit chain shows no break, but not everything is vouched for:"
    " no key, no checkpoints, a writer without one, or a torn line (treat it as an alarm)",
}


class CliError(Exception):
    """A one-line reason, printed as ``govsearch: error: ...``; the command exits with
    ``exit_code`` (:data:`EXIT_FINDINGS`, "the answer is no", unless said otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_FINDINGS) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def report_load_errors(error: Any) -> int:
    """Print every problem of a policy directory or its tests, one per line
    (``file:line:column: code: message``), on stderr; the invalid-input exit status."""
    for problem in error.errors:
        print(problem, file=sys.stderr)
    return EXIT_INVALID_INPUT


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def connect_engine(settings: Settings) -> Any:
    """The configured engine, or a :class:`CliError` saying how to start one."""
    from control_plane.engine import EngineError, connect

    try:
        return connect(settings.engine)
    except EngineError as error:
        raise CliError(
            f"{error} (start one with: govsearch engine start)", EXIT_ENGINE_UNAVAILABLE
        ) from error


def named_path(value: str, what: str) -> Path:
    """A file or directory named on the command line, found the way a configured one is
    (:func:`control_plane.config.project_path`), or a :class:`CliError` with the usage status
    when nothing is there: the command line is wrong (docs/cli.md). Check it before the engine
    is reached or a key is asked for. A path the configuration names that is not there is the
    configuration's problem instead (invalid input)."""
    path = project_path(value)
    if not path.exists():
        raise CliError(f"{what} not found: {value}", EXIT_USAGE)
    return path


def time_option(value: str | None) -> datetime | None:
    """An ISO time given on the command line (UTC when no zone is given), or None."""
    try:
        return parse_time(value) if value else None
    except ValueError as error:
        raise CliError(
            f"not an ISO 8601 time: {value!r} (e.g. 2026-12-10T12:00:00Z)", EXIT_USAGE
        ) from error


def now_option(value: str | None) -> datetime:
    """A ``--now`` given on the command line, else :data:`CLOCK`'s now."""
    return time_option(value) or CLOCK()

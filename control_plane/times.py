"""Instants as the records, events and history store them: ISO 8601 in UTC with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime) -> str:
    """``2026-11-30T15:37:17.226536Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(value: str) -> datetime:
    """An ISO 8601 time; without a zone, UTC. Raises ``ValueError``."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

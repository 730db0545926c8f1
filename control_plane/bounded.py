"""Bounded memo tables: what the pure stages keep between calls (kept per policy object,
per clause values, per text), as plain dicts that never grow past a bound."""

from __future__ import annotations

from typing import Any


def keep(table: dict[Any, Any], key: Any, value: Any, bound: int) -> None:
    """``table[key] = value``, the oldest entries dropped first while ``table`` holds
    ``bound`` or more: a full table loses one entry per new one (each made again once if it
    comes back), never all at once (a table cleared whole sent every entry of the next
    calls through the slow path again: a latency cliff every few thousand new intents or
    policies). Threads share the tables: an entry another thread dropped first, or a table
    changed while its oldest key is read, ends the dropping for this time (a table may then
    hold a few more)."""
    while len(table) >= bound:
        try:
            del table[next(iter(table))]
        except (StopIteration, KeyError, RuntimeError):
            break
    table[key] = value

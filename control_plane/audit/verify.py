"""``govsearch audit verify``: walk every writer's chain and report the first break.

Breaks, in the order a reader meets them (file order):

- ``unparseable``: a line that is not a JSON object;
- ``edited``: the record's content no longer hashes to its ``hash``;
- ``deleted``: a writer's sequence jumps (``3`` follows ``1``) and the missing number is
  nowhere later in the log;
- ``reordered``: a sequence number arrives out of order (a missing number appears later,
  or a number arrives after a higher one);
- ``relinked``: sequence in order and content intact, but ``prev_hash`` is not the previous
  record's hash (a record replaced by a forged, self-consistent one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from control_plane.audit.chain import GENESIS, record_hash

Problem = Literal["unparseable", "edited", "deleted", "reordered", "relinked"]


@dataclass(frozen=True)
class Break:
    line: int
    request_id: str | None
    writer: str | None
    problem: Problem
    detail: str


@dataclass(frozen=True)
class Report:
    records: int
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    """per writer: last sequence and hash (an anchor against tail truncation)"""
    broken: Break | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "records": self.records,
            "heads": {w: {"sequence": s, "hash": h} for w, (s, h) in sorted(self.heads.items())},
            "broken": None if self.broken is None else self.broken.__dict__,
        }


def verify_lines(lines: Iterable[tuple[int, str]]) -> Report:
    """Verify ``(line number, text)`` pairs (JSONL file, or engine documents in order)."""
    parsed: list[tuple[int, dict[str, Any]]] = []
    for number, text in lines:
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            return Report(len(parsed), broken=Break(number, None, None, "unparseable", str(error)))
        if not isinstance(record, dict) or "writer" not in record or "sequence" not in record:
            return Report(
                len(parsed),
                broken=Break(number, None, None, "unparseable", "not a sealed record (no writer/sequence)"),
            )
        parsed.append((number, record))
    return verify_records(parsed)


def verify_records(records: list[tuple[int, dict[str, Any]]]) -> Report:
    seen: dict[str, set[int]] = {}
    for _, record in records:
        seen.setdefault(str(record["writer"]), set()).add(int(record["sequence"]))
    expected: dict[str, int] = {}
    last_hash: dict[str, str] = {}
    count = 0
    for number, record in records:
        writer, sequence = str(record["writer"]), int(record["sequence"])
        rid = record.get("request_id") or record.get("event_id")

        def broken(
            problem: Problem,
            detail: str,
            rid: Any = rid,
            number: int = number,
            writer: str = writer,
            count: int = count,
        ) -> Report:
            heads = {w: (expected[w] - 1, last_hash[w]) for w in expected}
            return Report(count, heads, Break(number, rid, writer, problem, detail))

        if record_hash(record) != record.get("hash"):
            return broken("edited", f"content does not hash to the stored hash (sequence {sequence})")
        want = expected.get(writer, 0)
        if sequence > want:
            later = set(range(want, sequence)) & seen[writer]
            if later:
                return broken("reordered", f"sequence {sequence} arrives before {min(later)}")
            missing = f"{want}" if sequence == want + 1 else f"{want}..{sequence - 1}"
            return broken(
                "deleted", f"sequence jumps from {want - 1} to {sequence}: record(s) {missing} missing"
            )
        if sequence < want:
            return broken("reordered", f"sequence {sequence} arrives after {want - 1}")
        if record.get("prev_hash") != last_hash.get(writer, GENESIS):
            return broken("relinked", "prev_hash is not the previous record's hash")
        expected[writer] = sequence + 1
        last_hash[writer] = str(record["hash"])
        count += 1
    return Report(count, {w: (expected[w] - 1, last_hash[w]) for w in expected})

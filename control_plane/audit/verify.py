"""``govsearch audit verify``: walk every writer's chain, check each record's MAC with the
key ring, compare each writer with its latest checkpoint, and report what is wrong.

Breaks in a log, in the order a reader meets them (file order):

- ``unparseable``: a line that is not JSON and does not start as an object does;
- ``edited``: the record's content no longer hashes to its ``hash``;
- ``unsealed`` / ``unknown_key`` / ``forged`` (with a key ring): the record has no MAC,
  names a key the ring does not hold, or its MAC is wrong (a record forged, appended or
  re-chained by someone without the key);
- ``deleted``: a writer's sequence jumps (``3`` follows ``1``) and the missing number is
  nowhere later in the log;
- ``reordered``: a sequence number arrives out of order (a missing number appears later,
  or a number arrives after a higher one);
- ``relinked``: sequence in order and content intact, but ``prev_hash`` is not the previous
  record's hash (a record replaced by a forged, self-consistent one).

Against the checkpoints (``line`` is None, or the line of the record concerned):

- ``truncated``: a writer's checkpoint names a sequence the log does not reach (the tail
  was cut, or the whole chain removed);
- ``rewritten``: the log's record at the checkpoint's sequence has another hash;
- ``forged_checkpoint`` (with a key ring): a checkpoint whose MAC is wrong or missing.

A writer with no checkpoint is not a break but is flagged (``checkpoint: missing``): its
tail, or the whole chain when it was forged without the key, cannot be vouched for.

A **torn** line, one that starts as an object (``{``) and does not parse, is taken for the
start of a record cut short (a writer killed in the middle of a write of more than a page,
which Linux may stop at any page boundary, so at any byte of a line; a disk that stopped). It
is not a break either: it is no record. Whether a record is missing is what the chains and
checkpoints say, as for a deleted line: a record gone from the middle of a chain shows as
``deleted``, a vouched-for tail cut off as ``truncated``; records after a writer's latest
checkpoint can be cut off unseen either way. Torn lines are listed (``torn``), and a report
with one is not complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from control_plane.audit.chain import GENESIS, RECORD_MAC, stored_hash_matches
from control_plane.audit.checkpoints import check_checkpoint
from control_plane.audit.keys import KeyRing

Problem = Literal[
    "unparseable", "edited", "unsealed", "unknown_key", "forged", "deleted", "reordered", "relinked",
    "truncated", "rewritten", "forged_checkpoint",
]


@dataclass(frozen=True)
class Break:
    line: int | None
    request_id: str | None
    writer: str | None
    problem: Problem
    detail: str


@dataclass
class WriterReport:
    """What ``verify`` saw of one writer."""

    records: int = 0
    first: int | None = None
    """first and last sequence in the log"""
    last: int | None = None
    checkpoint: int | None = None
    """the sequence of its latest checkpoint, None when it has none"""
    checkpoint_reason: str | None = None
    checkpoint_status: Literal["ok", "missing", "truncated", "rewritten", "unchecked"] = "unchecked"
    after_checkpoint: int = 0
    """records after the latest checkpoint (not vouched for by one yet)"""
    broken: bool = False


@dataclass(frozen=True)
class Report:
    records: int
    """records verified before the first break (all of them when none)"""
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    """per writer: last verified sequence and hash"""
    broken: Break | None = None
    problems: tuple[Break, ...] = ()
    """every break found (the first chain break per writer, then the checkpoint ones)"""
    writers: dict[str, WriterReport] = field(default_factory=dict)
    keyed: bool = False
    """MACs were checked (a key ring was given)"""
    checkpointed: bool = False
    """the log was compared with checkpoints"""
    torn: tuple[int, ...] = ()
    """lines that are the start of a record cut short (see the module): not records"""

    @property
    def ok(self) -> bool:
        return self.broken is None

    @property
    def unchecked_writers(self) -> list[str]:
        return sorted(w for w, r in self.writers.items() if r.checkpoint_status in ("missing", "unchecked"))

    @property
    def complete(self) -> bool:
        """No break, every MAC checked, every writer matches a checkpoint, no torn line."""
        return self.ok and self.keyed and self.checkpointed and not self.unchecked_writers and not self.torn

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "complete": self.complete,
            "keyed": self.keyed,
            "checkpointed": self.checkpointed,
            "records": self.records,
            "heads": {w: {"sequence": s, "hash": h} for w, (s, h) in sorted(self.heads.items())},
            "writers": {w: asdict(r) for w, r in sorted(self.writers.items())},
            "broken": None if self.broken is None else self.broken.__dict__,
            "problems": [p.__dict__ for p in self.problems],
            "torn": list(self.torn),
        }


def verify_lines(
    lines: Iterable[tuple[int, str]],
    *,
    keys: KeyRing | None = None,
    checkpoints: Iterable[dict[str, Any]] | None = None,
    log: str = "decisions",
) -> Report:
    """Verify ``(line number, text)`` pairs (JSONL file, or engine documents in order)."""
    parsed: list[tuple[int, dict[str, Any]]] = []
    unparseable: list[Break] = []
    torn: list[int] = []
    for number, text in lines:
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            if text.startswith("{"):  # the start of a record, cut short (see the module)
                torn.append(number)
            else:
                unparseable.append(Break(number, None, None, "unparseable", str(error)))
            continue
        if not isinstance(record, dict) or "writer" not in record or "sequence" not in record:
            unparseable.append(
                Break(number, None, None, "unparseable", "not a sealed record (no writer/sequence)")
            )
            continue
        parsed.append((number, record))
    report = verify_records(parsed, keys=keys, checkpoints=checkpoints, log=log, unparseable=unparseable)
    return replace(report, torn=tuple(torn))


def _record_problem(
    record: dict[str, Any],
    keys: KeyRing | None,
    want: int,
    prev: str,
    seen: set[int],
) -> tuple[Problem, str] | None:
    sequence = int(record["sequence"])
    digest = stored_hash_matches(record, record.get("hash"))
    if digest is None:
        return "edited", f"content does not hash to the stored hash (sequence {sequence})"
    if keys is not None:
        wrong = keys.check(record.get("key_id"), RECORD_MAC, digest, record.get("mac"))
        if wrong == "unsealed":
            return "unsealed", f"no MAC on sequence {sequence}"
        if wrong == "unknown_key":
            return "unknown_key", f"sequence {sequence} names key {record.get('key_id')!r}, not in the ring"
        if wrong == "forged":
            return "forged", f"the MAC of sequence {sequence} is wrong (forged without the key)"
    if sequence > want:
        later = set(range(want, sequence)) & seen
        if later:
            return "reordered", f"sequence {sequence} arrives before {min(later)}"
        missing = f"{want}" if sequence == want + 1 else f"{want}..{sequence - 1}"
        return "deleted", f"sequence jumps from {want - 1} to {sequence}: record(s) {missing} missing"
    if sequence < want:
        return "reordered", f"sequence {sequence} arrives after {want - 1}"
    if record.get("prev_hash") != prev:
        return "relinked", "prev_hash is not the previous record's hash"
    return None


def verify_records(
    records: list[tuple[int, dict[str, Any]]],
    *,
    keys: KeyRing | None = None,
    checkpoints: Iterable[dict[str, Any]] | None = None,
    log: str = "decisions",
    unparseable: Iterable[Break] = (),
) -> Report:
    seen: dict[str, set[int]] = {}
    for _, record in records:
        seen.setdefault(str(record["writer"]), set()).add(int(record["sequence"]))
    expected: dict[str, int] = {}
    last_hash: dict[str, str] = {}
    writers: dict[str, WriterReport] = {}
    hashes: dict[tuple[str, int], tuple[int, str]] = {}
    """(writer, sequence) -> (line, stored hash): what the checkpoints are compared with"""
    breaks: list[Break] = list(unparseable)
    verified: list[int] = []
    for number, record in records:
        writer, sequence = str(record["writer"]), int(record["sequence"])
        rid = record.get("request_id") or record.get("event_id")
        seen_writer = writers.setdefault(writer, WriterReport())
        seen_writer.records += 1
        seen_writer.first = sequence if seen_writer.first is None else min(seen_writer.first, sequence)
        seen_writer.last = sequence if seen_writer.last is None else max(seen_writer.last, sequence)
        hashes.setdefault((writer, sequence), (number, str(record.get("hash"))))
        if seen_writer.broken:
            continue
        problem = _record_problem(
            record, keys, expected.get(writer, 0), last_hash.get(writer, GENESIS), seen[writer]
        )
        if problem is not None:
            seen_writer.broken = True
            breaks.append(Break(number, rid, writer, *problem))
            continue
        expected[writer] = sequence + 1
        last_hash[writer] = str(record["hash"])
        verified.append(number)
    breaks.sort(key=lambda b: b.line or 0)
    first_line = breaks[0].line if breaks else None
    count = len(verified) if first_line is None else sum(1 for n in verified if n < first_line)
    if checkpoints is not None:
        breaks += _against_checkpoints(checkpoints, keys, log, writers, hashes)
    return Report(
        count,
        {w: (expected[w] - 1, last_hash[w]) for w in expected},
        breaks[0] if breaks else None,
        tuple(breaks),
        writers,
        keyed=keys is not None,
        checkpointed=checkpoints is not None,
    )


def _against_checkpoints(
    checkpoints: Iterable[dict[str, Any]],
    keys: KeyRing | None,
    log: str,
    writers: dict[str, WriterReport],
    hashes: dict[tuple[str, int], tuple[int, str]],
) -> list[Break]:
    breaks: list[Break] = []
    latest: dict[str, dict[str, Any]] = {}
    for checkpoint in checkpoints:
        if checkpoint.get("kind") != "checkpoint" or checkpoint.get("log") != log:
            continue
        writer = str(checkpoint.get("writer"))
        if keys is not None:
            wrong = check_checkpoint(checkpoint, keys)
            if wrong is not None:
                breaks.append(Break(None, None, writer, "forged_checkpoint",
                                    f"writer {writer}: checkpoint at seq {checkpoint.get('sequence')}"
                                    f" is {wrong}"))
                continue
        # the latest head; at the same head, the later checkpoint (a shutdown after an interval)
        if writer not in latest or int(checkpoint["sequence"]) >= int(latest[writer]["sequence"]):
            latest[writer] = checkpoint
    for writer in sorted(set(writers) | set(latest)):
        report = writers.setdefault(writer, WriterReport())
        found = latest.get(writer)
        if found is None:
            report.checkpoint_status = "missing"
            continue
        checkpoint = found
        sequence = int(checkpoint["sequence"])
        report.checkpoint, report.checkpoint_reason = sequence, checkpoint.get("reason")
        if report.last is None or report.last < sequence:
            report.checkpoint_status = "truncated"
            ends = "has no record of it" if report.last is None else f"ends at seq {report.last}"
            breaks.append(Break(None, None, writer, "truncated",
                                f"writer {writer}: checkpoint at seq {sequence} but the log {ends}"))
            continue
        stored = hashes.get((writer, sequence))
        if stored is None or stored[1] != checkpoint.get("hash"):
            report.checkpoint_status = "rewritten"
            line = stored[0] if stored else None
            breaks.append(Break(line, None, writer, "rewritten",
                                f"writer {writer}: the record at seq {sequence} is not the one"
                                " its checkpoint sealed"))
            continue
        report.checkpoint_status = "ok"
        report.after_checkpoint = report.last - sequence
    return breaks

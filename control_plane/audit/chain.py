"""The hash chain: tamper evidence for the decision log.

Every writer (one process: ``audit.instance_id``) numbers its records ``0, 1, 2, ...``
(``sequence``) and links each to the previous one::

    prev_hash = hash of the writer's previous record (GENESIS for sequence 0)
    hash      = sha256(canonical JSON of the record without its "hash" key)

Canonical JSON: sorted keys, no whitespace, UTF-8 as is (``record.canonical_json``).
Editing a record changes its hash; deleting one leaves a sequence gap; moving one breaks
the order. Truncating the tail is only visible against an anchor kept elsewhere: ``verify``
prints each writer's head (last sequence and hash) to compare with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from control_plane.audit.record import canonical_json

GENESIS = "0" * 64


def record_hash(record: dict[str, Any]) -> str:
    """The hash a record must carry: over every key but ``hash`` itself."""
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


@dataclass
class Head:
    """Where a writer's chain stands: the next sequence number and the last hash."""

    writer: str
    sequence: int = 0
    prev_hash: str = GENESIS


class Chain:
    """Seals records for one writer. Not thread-safe: the recorder holds its lock.

    ``seal`` does not move the head; ``advance`` does, once the sealed record is written,
    so a record a sink refused is sealed again (same sequence) when it is retried."""

    def __init__(self, head: Head) -> None:
        self.head = head

    def seal(self, record: dict[str, Any]) -> dict[str, Any]:
        """The record with ``writer``, ``sequence``, ``prev_hash`` and ``hash`` set."""
        sealed = {
            **record,
            "writer": self.head.writer,
            "sequence": self.head.sequence,
            "prev_hash": self.head.prev_hash,
        }
        sealed["hash"] = record_hash(sealed)
        return sealed

    def advance(self, sealed: dict[str, Any]) -> None:
        self.head = Head(self.head.writer, int(sealed["sequence"]) + 1, str(sealed["hash"]))

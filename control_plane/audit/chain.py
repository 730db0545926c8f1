"""The hash chain: tamper evidence for the decision log.

Every writer (one process: ``audit.instance_id``) numbers its records ``0, 1, 2, ...``
(``sequence``) and links each to the previous one::

    prev_hash = hash of the writer's previous record (GENESIS for sequence 0)
    hash      = sha256(canonical JSON of the record without its "hash" key)

Canonical JSON: sorted keys, no whitespace, UTF-8 as is (``record.canonical_json``; taken
by orjson where its bytes are the standard library's, see ``record.canonical_bytes``).
Editing a record changes its hash; deleting one leaves a sequence gap; moving one breaks
the order.

With a key ring (``control_plane.audit.keys``) each record also names the key that seals it
(``key_id``, inside the hashed content) and carries ``mac = HMAC-SHA-256(key, "govsearch-
audit-record-v1\n" + hash)``: without the key nobody can recompute a record that verifies,
so a forged, appended or re-chained record is found. Truncating the tail is found against
the writer's checkpoints (``control_plane.audit.checkpoints``), kept in a second place.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from control_plane.audit.keys import KeyRing
from control_plane.audit.record import canonical_bytes, canonical_json_python

GENESIS = "0" * 64
RECORD_MAC = "govsearch-audit-record-v1"
"""the purpose a record's MAC is taken for (a checkpoint's MAC is another)"""


def record_hash(record: dict[str, Any]) -> str:
    """The hash a record must carry: over every key but ``hash`` and ``mac``."""
    body = {key: value for key, value in record.items() if key not in ("hash", "mac")}
    return hashlib.sha256(canonical_bytes(body)).hexdigest()


def stored_hash_matches(record: dict[str, Any], stored: Any) -> str | None:
    """The record's hash when it is ``stored``, else None. Tried by orjson's bytes first, then
    by the standard library's: they differ only on non-finite floats (orjson writes ``null``,
    ``json.dumps`` ``NaN``), which a record written before orjson may hold."""
    digest = record_hash(record)
    if digest == stored:
        return digest
    body = {key: value for key, value in record.items() if key not in ("hash", "mac")}
    try:
        legacy = hashlib.sha256(canonical_json_python(body).encode("utf-8")).hexdigest()
    except UnicodeEncodeError:
        return None
    return legacy if legacy == stored else None


_WIDTH = 64
"""a hash's and a MAC's length: 64 hex digits (SHA-256)"""
_PLACEHOLDER = "sealing-" + "x" * (_WIDTH - 8)
"""what ``hash`` and ``mac`` hold while the record is serialised (as long as their values:
the line is the serialisation with the placeholders overwritten)"""
_HASH_MEMBER = b'"hash":"' + _PLACEHOLDER.encode() + b'"'
_MAC_MEMBER = b'"mac":"' + _PLACEHOLDER.encode() + b'"'
_COMMA = ord(",")


def _member(text: bytes, member: bytes) -> tuple[int, int, int] | None:
    """Where ``member`` (``"key":"<placeholder>"``) is in ``text``, a canonical serialisation:
    ``(cut, end, value)``: ``[cut, end)`` are the bytes of the member and of its comma (the
    text without them is the serialisation without the member), ``value`` is where the
    placeholder starts. None unless it is there exactly once: ``"key":"`` can
    only be an object member (inside a string every ``"`` is escaped, and a string's closing
    quote is never followed by a letter), so found once it is the top-level one the caller
    put there."""
    at = text.find(member)
    if at < 0:
        return None
    end = at + len(member)
    if text.find(member, end) >= 0:
        return None
    value = end - 1 - _WIDTH
    if text[at - 1] == _COMMA:  # after another member: the comma before it goes with it
        return at - 1, end, value
    if text[end] == _COMMA:  # the first member: the comma after it
        return at, end + 1, value
    return at, end, value  # the only member


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

    def __init__(self, head: Head, keys: KeyRing | None = None) -> None:
        self.head = head
        self.keys = keys if keys else None

    def seal(self, record: dict[str, Any]) -> dict[str, Any]:
        """The record with ``writer``, ``sequence``, ``prev_hash`` and ``hash`` set (and
        ``key_id`` and ``mac`` with a key ring)."""
        return self.seal_line(record)[0]

    def seal_line(self, record: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """:meth:`seal`, and the sealed record's canonical JSON (its line in a file), from
        one serialisation: the record is serialised with a placeholder for ``hash`` (and
        ``mac``); the hash is taken of those bytes without the placeholders' members (they
        are ``canonical_bytes`` of the record without ``hash`` and ``mac``), and the line is
        those bytes with the placeholders overwritten, byte for byte ``canonical_bytes`` of
        the sealed record. Where a placeholder's member is not found exactly once (a record
        holding the placeholder itself), the record is serialised twice as before."""
        sealed = {
            **record,
            "writer": self.head.writer,
            "sequence": self.head.sequence,
            "prev_hash": self.head.prev_hash,
        }
        signing = self.keys.signing if self.keys is not None else None
        if signing is not None:
            sealed["key_id"] = signing
        sealed.pop("hash", None)  # the hashed content: every key but these two
        sealed.pop("mac", None)
        sealed["hash"] = _PLACEHOLDER
        if signing is not None:
            sealed["mac"] = _PLACEHOLDER
        text = canonical_bytes(sealed)
        at_hash = _member(text, _HASH_MEMBER)
        at_mac = _member(text, _MAC_MEMBER) if signing is not None else (len(text), len(text), 0)
        if at_hash is None or at_mac is None or at_mac[0] < at_hash[1]:
            return self._seal_twice(sealed, signing)  # not certain where they are (or adjacent)
        view = memoryview(text)  # the hashed bytes: all but the two members ("hash" < "mac")
        hashed = hashlib.sha256(view[: at_hash[0]])
        hashed.update(view[at_hash[1] : at_mac[0]])
        hashed.update(view[at_mac[1] :])
        sealed["hash"] = digest = hashed.hexdigest()
        line = bytearray(text)
        line[at_hash[2] : at_hash[2] + _WIDTH] = digest.encode()
        if self.keys is not None and signing is not None:
            sealed["mac"] = mac = self.keys.mac(signing, RECORD_MAC, digest)
            line[at_mac[2] : at_mac[2] + _WIDTH] = mac.encode()
        return sealed, bytes(line)

    def _seal_twice(self, sealed: dict[str, Any], signing: str | None) -> tuple[dict[str, Any], bytes]:
        """The hash of the record serialised without ``hash`` and ``mac``, the line of it
        serialised again with them."""
        sealed.pop("hash", None)
        sealed.pop("mac", None)
        sealed["hash"] = digest = hashlib.sha256(canonical_bytes(sealed)).hexdigest()
        if self.keys is not None and signing is not None:
            sealed["mac"] = self.keys.mac(signing, RECORD_MAC, digest)
        return sealed, canonical_bytes(sealed)

    def advance(self, sealed: dict[str, Any]) -> None:
        self.head = Head(self.head.writer, int(sealed["sequence"]) + 1, str(sealed["hash"]))

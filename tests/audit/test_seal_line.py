"""One serialisation per sealed record (ADR 0042): ``Chain.seal_line`` hashes the record
serialised with placeholders for ``hash`` and ``mac`` (their members cut out of the hashed
bytes) and overwrites the placeholders for the line. The record, its hash, its MAC and its
line must be byte for byte what serialising twice gave (``seal_twice`` below, the code
before), whatever the record holds; and the prepared HMAC must be HMAC-SHA-256."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.audit import chain as chain_module
from control_plane.audit.chain import RECORD_MAC, Chain, Head, record_hash
from control_plane.audit.keys import KeyRing
from control_plane.audit.record import ErrorOut, canonical_bytes
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from tests.audit.conftest import jsonl_recorder

RING = KeyRing({"old-1": b"o" * 40, "new-2": b"n" * 48}, "new-2")
PLACEHOLDER = chain_module._PLACEHOLDER


def seal_twice(head: Head, keys: KeyRing | None, record: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The code before: the hash of one serialisation, the line of a second one."""
    sealed = {**record, "writer": head.writer, "sequence": head.sequence, "prev_hash": head.prev_hash}
    if keys is not None and keys.signing is not None:
        sealed["key_id"] = keys.signing
    sealed.pop("hash", None)
    sealed.pop("mac", None)
    sealed["hash"] = digest = hashlib.sha256(canonical_bytes(sealed)).hexdigest()
    if keys is not None and keys.signing is not None:
        secret = keys.keys[keys.signing]
        sealed["mac"] = hmac.new(secret, f"{RECORD_MAC}\n{digest}".encode(), hashlib.sha256).hexdigest()
    return sealed, canonical_bytes(sealed)


def _same(sealed: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Equal, NaN included (a NaN is not equal to itself)."""
    return canonical_bytes(sealed) == canonical_bytes(expected) and list(sealed) == list(expected)


KEYS = st.sampled_from(
    ["hash", "mac", "key_id", "kind", "answer", "a", "z", "hit_ids", "matched", "sequence", "é", "", "~"]
) | st.text(max_size=6)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # past 64 bits: the standard library's form
    | st.floats(allow_nan=True, allow_infinity=True)  # under 1e-4 too: the standard library's form
    | st.sampled_from([PLACEHOLDER, "sealing-", "1e-07", "0.00001", '","hash":"', "a\\\"b"])
    | st.text(max_size=12)
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)
RECORDS = st.dictionaries(KEYS, VALUES, max_size=10)


@settings(max_examples=600, deadline=None)
@given(RECORDS, st.booleans(), st.integers(min_value=0, max_value=10**6))
def test_one_serialisation_gives_the_bytes_of_two(record: dict[str, Any], keyed: bool, sequence: int) -> None:
    keys = RING if keyed else None
    head = Head("w-1", sequence, "ab" * 32)
    try:
        expected, expected_line = seal_twice(head, keys, record)
    except UnicodeEncodeError:  # a lone surrogate: never hashable (the code before raised too)
        return
    sealed, line = Chain(head, keys).seal_line(record)
    assert line == expected_line
    assert _same(sealed, expected)
    assert line == canonical_bytes(sealed)


def test_a_record_holding_the_placeholder_is_serialised_twice_and_still_right() -> None:
    """The placeholder's member found twice (the record holds it): the splice is not certain,
    so the record is serialised again; the line and hash are still exact."""
    head = Head("w-1", 3, "cd" * 32)
    for nested in ({"hash": PLACEHOLDER}, {"mac": PLACEHOLDER}, {"hash": PLACEHOLDER, "mac": PLACEHOLDER}):
        for key in ("applied", "kind", "nested"):  # before the top-level member, between, after
            record = {"kind": "decision", key: [nested], "z": [1e-7]}
            sealed, line = Chain(head, RING).seal_line(record)
            expected, expected_line = seal_twice(head, RING, record)
            assert line == expected_line and sealed == expected, record
            assert sealed["hash"] == record_hash(sealed) and PLACEHOLDER.encode() in line  # the nested one


def test_the_placeholder_never_reaches_a_line_or_a_record() -> None:
    sealed, line = Chain(Head("w-1"), RING).seal_line({"kind": "decision", "time": "2026-01-01T00:00:00Z"})
    assert PLACEHOLDER not in json.dumps(sealed) and PLACEHOLDER.encode() not in line
    assert sealed["hash"] == record_hash(sealed)
    assert RING.check(sealed["key_id"], RECORD_MAC, sealed["hash"], sealed["mac"]) is None


def test_a_writers_lines_are_canonical_verify_and_an_edited_byte_does_not(tmp_path: Path) -> None:
    """Lines the writer wrote by the one-serialisation path: each is the canonical JSON of
    what it holds, the log verifies with its key, and one byte changed anywhere in a record's
    content (here: in its hash, its MAC and its error message) breaks it."""
    recorder = jsonl_recorder(tmp_path)
    for number in range(5):
        recorder.failure(f"req-{number}", ErrorOut(code="engine_unavailable", message="down", status=503))
    recorder.close()
    path = tmp_path / "decisions.jsonl"
    lines = path.read_bytes().splitlines()
    assert len(lines) == 5
    assert all(line == canonical_bytes(json.loads(line)) for line in lines)
    keys = recorder.decisions._keys()
    assert verify_lines(JsonlSink(path).lines(), keys=keys).ok
    record = json.loads(lines[2])
    for edit in (record["hash"], record["mac"], "down"):
        at = lines[2].index(edit.encode())
        broken = bytearray(lines[2])
        broken[at] = ord("1") if broken[at] != ord("1") else ord("2")
        text = b"\n".join([*lines[:2], bytes(broken), *lines[3:]]).decode()
        numbered = [(number, line) for number, line in enumerate(text.splitlines(), start=1)]
        assert not verify_lines(numbered, keys=keys).ok, edit


def test_a_sink_given_the_lines_writes_them_and_without_serialises(tmp_path: Path) -> None:
    chain = Chain(Head("w-1"), RING)
    first, first_line = chain.seal_line({"kind": "decision", "request_id": "r-1"})
    chain.advance(first)
    second, second_line = chain.seal_line({"kind": "decision", "request_id": "r-2"})
    given_lines = JsonlSink(tmp_path / "given.jsonl")
    given_lines.write_many([first, second], lines=[first_line, second_line])
    serialised = JsonlSink(tmp_path / "serialised.jsonl")
    serialised.write_many([first, second])
    assert given_lines.path.read_bytes() == first_line + b"\n" + second_line + b"\n"
    assert serialised.path.read_bytes() == given_lines.path.read_bytes()


def test_the_prepared_hmac_is_hmac_sha256_for_every_key_length() -> None:
    """The pads are made once per key (a key longer than SHA-256's block is hashed first, as
    RFC 2104 says); every MAC is the standard library's."""
    for length in (32, 63, 64, 65, 100, 300):
        secret = bytes(range(256))[:length] if length <= 256 else b"k" * length
        ring = KeyRing({"k-1": secret}, "k-1")
        for message in ("", "0" * 64, "é", "x" * 1000):
            expected = hmac.new(secret, f"purpose\n{message}".encode(), hashlib.sha256).hexdigest()
            assert ring.mac("k-1", "purpose", message) == expected
            assert ring.mac("k-1", "purpose", message) == expected  # the second time from the pads
            assert ring.check("k-1", "purpose", message, expected) is None
            assert ring.check("k-1", "purpose", message + "!", expected) == "forged"

"""The canonical form by orjson: the same bytes as the standard library's ``json.dumps`` (so
every hash is the one the code before it took), and a log the old code wrote still verifies and
is continued by today's writer."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit.chain import Chain, Head, record_hash, stored_hash_matches
from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.keys import read_key_file
from control_plane.audit.record import (
    ErrorOut,
    canonical_bytes,
    canonical_json,
    canonical_json_python,
    sha256_json,
)
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.cli import main
from tests.clocks import FIXED_CLOCK

LEGACY = Path(__file__).parents[1] / "fixtures" / "audit_before_orjson"


def _python(data: Any) -> bytes:
    return canonical_json_python(data).encode("utf-8")


def _float(rng: random.Random) -> float:
    """Any finite double: raw bit patterns, and decimals at every scale from 1e-12 to 1e20."""
    while True:
        value: float = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if rng.random() < 0.5:
            value = round(value % 1000, rng.randint(0, 8)) * 10.0 ** rng.randint(-12, 20)
        if math.isfinite(value):
            return value


def test_orjson_bytes_are_the_standard_librarys_for_every_float() -> None:
    rng = random.Random(14)
    values = [_float(rng) for _ in range(20_000)]
    values += [0.0, -0.0, 1e-05, 1.5e-07, 0.0001, 0.00012, 1e16, 1.0e22, 5e-324, 1.7976931348623157e308]
    for value in values:
        assert canonical_bytes({"v": value, "w": [value]}) == _python({"v": value, "w": [value]}), value


def test_orjson_bytes_are_the_standard_librarys_for_text_keys_and_integers() -> None:
    text = "".join(chr(c) for c in range(0x0, 0x800)) + "\u2028\u2029\ufeff\U0001f600 e-mail 0.00001"
    data = {
        "text": text,
        "keys": {"b": 1, "a": 2, "é": 3, "\uffff": 4, "\U0001f600": 5, "Z": 6, "": 7},
        "ints": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**70, -(2**70)],
        "nested": [{"z": None, "y": True, "x": False}, [], {}],
    }
    assert canonical_bytes(data) == _python(data)
    assert canonical_json(data) == canonical_json_python(data)
    assert sha256_json(data) == hashlib.sha256(_python(data)).hexdigest()


def test_a_lone_surrogate_keeps_the_old_behaviour() -> None:
    data = {"text": "broken \ud800 half"}
    assert canonical_json(data) == canonical_json_python(data)
    with pytest.raises(UnicodeEncodeError):  # what hashing it always did
        record_hash(data)


def test_non_finite_floats_are_null_now_and_an_old_nan_record_still_verifies() -> None:
    chain = Chain(Head("w"))
    record = chain.seal({"request_id": "r", "latency_ms": {"total": float("nan")}})
    line = canonical_bytes(record)
    assert b'"total":null' in line  # JSON, where json.dumps wrote NaN
    parsed = json.loads(line)
    assert stored_hash_matches(parsed, parsed["hash"]) == parsed["hash"]
    old = {"request_id": "r", "latency_ms": {"total": float("nan")}, "writer": "w", "sequence": 0,
           "prev_hash": "0" * 64}
    old["hash"] = hashlib.sha256(_python(old)).hexdigest()  # how the old code hashed it
    reread = json.loads(canonical_json_python(old))
    assert record_hash(reread) != old["hash"]  # orjson's form alone would call it edited
    assert stored_hash_matches(reread, old["hash"]) == old["hash"]
    reread["request_id"] = "edited"
    assert stored_hash_matches(reread, old["hash"]) is None


def _copy_legacy(tmp_path: Path) -> Path:
    for name in ("decisions.jsonl", "checkpoints.jsonl", "audit.key"):
        shutil.copy(LEGACY / name, tmp_path / name)
    return tmp_path


def test_a_log_written_by_the_code_before_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _copy_legacy(tmp_path)
    text = (directory / "decisions.jsonl").read_text()
    assert "1e-05" in text and "NaN" in text  # the forms the two writers spell differently
    args = ["audit", "verify", "--sink", str(directory / "decisions.jsonl"),
            "--key-file", str(directory / "audit.key"), "--checkpoints", str(directory / "checkpoints.jsonl")]
    assert main(args) == 0
    assert "OK: 5 records" in capsys.readouterr().out
    lines = text.splitlines(keepends=True)  # and an edit in it is still found
    lines[1] = lines[1].replace('"tiny":1e-05', '"tiny":2e-05')
    (directory / "decisions.jsonl").write_text("".join(lines))
    report = verify_lines(JsonlSink(directory / "decisions.jsonl").lines(),
                          keys=read_key_file(directory / "audit.key"))
    assert report.broken is not None and report.broken.problem == "edited" and report.broken.line == 2


def test_todays_writer_continues_a_chain_the_code_before_wrote(tmp_path: Path) -> None:
    directory = _copy_legacy(tmp_path)
    keys = read_key_file(directory / "audit.key")
    recorder = Recorder(
        JsonlSink(directory / "decisions.jsonl"),
        JsonlSink(directory / "events.jsonl"),
        instance_id="legacy-writer",
        keys=keys,
        checkpoints=FileCheckpoints(directory / "checkpoints.jsonl"),
        clock=FIXED_CLOCK,
    )
    for number in range(3):
        recorder.failure(f"new-{number}", ErrorOut(code="engine_unavailable", message="down", status=503))
    recorder.close()
    records = [json.loads(line) for line in (directory / "decisions.jsonl").read_text().splitlines()]
    assert [r["sequence"] for r in records] == list(range(8))
    assert records[5]["prev_hash"] == records[4]["hash"]  # linked to the old code's last record
    report = verify_lines(
        JsonlSink(directory / "decisions.jsonl").lines(),
        keys=keys,
        checkpoints=FileCheckpoints(directory / "checkpoints.jsonl").scan(),
    )
    assert report.complete and report.records == 8

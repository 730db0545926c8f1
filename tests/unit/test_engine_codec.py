"""The engine codec decodes every answer exactly as ``json.loads`` does (ADR 0026), in both
adapters: the inputs where ``orjson`` alone differs (integers outside 64 bits, NaN and
infinities, lone surrogates, numbers that overflow a double) and ordinary ones. The
Elasticsearch adapter's client is checked for the codec on both media types it answers with;
no engine is asked (none runs here), so this tests the wiring, not an answer."""

from __future__ import annotations

import json
import math

import pytest

from control_plane.engine import codec
from control_plane.engine.elasticsearch import DecodingSerializer, ElasticsearchEngine

ANSWERS = [
    b'{"a": 123456789012345678901234567890}',
    b'{"a": -9223372036854775809}',
    b'{"a": 18446744073709551615, "b": 9223372036854775807, "c": -9223372036854775808}',
    b'{"a": 18446744073709551616}',
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',
    b'{"a": "\\ud800 lone"}',
    b'{"a": 1e400}',
    b'{"a": [0.1, 1e-7, 2.5e19, -0.0, 5e-324, 1.7976931348623157e308]}',
    '{"t": "Chocolat noir à 70 % — 東京 🍫", "e": "\\u00e9\\ud83c\\udf6b"}'.encode(),
    b'{"id": "12345678901234567890123", "n": 1}',
    b'{"took": 3, "hits": {"total": {"value": 2}, "hits": []}}',
    b"[]",
    b"{}",
]


def _typed(value: object) -> object:
    """``value`` with every number's type and a float's sign and NaN kept comparable."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, float):
        return ("float", repr(value), math.copysign(1.0, value))
    return (type(value).__name__, value)


@pytest.mark.parametrize("answer", ANSWERS)
def test_decodes_as_json_does(answer: bytes) -> None:
    assert _typed(codec.decode(answer)) == _typed(json.loads(answer.decode("utf-8", "surrogatepass")))


def test_an_invalid_answer_raises_a_value_error() -> None:
    with pytest.raises(ValueError):
        codec.decode(b'{"a": ')


def test_encodes_as_the_client_libraries_did() -> None:
    from datetime import UTC, datetime
    from decimal import Decimal
    from uuid import UUID

    body = {"t": "café", "n": 18446744073709551616, "f": 0.1, "d": Decimal("1.5"),
            "at": datetime(2026, 12, 1, 12, tzinfo=UTC), "u": UUID(int=1)}
    assert codec.encode(body) == (
        '{"t":"café","n":18446744073709551616,"f":0.1,"d":1.5,'
        '"at":"2026-12-01T12:00:00+00:00","u":"00000000-0000-0000-0000-000000000001"}'
    ).encode()
    assert codec.encode("line\n") == b"line\n" and codec.encode(b"raw") == b"raw"
    with pytest.raises(TypeError):
        codec.encode({"s": {1, 2}})


def test_a_nan_is_written_as_nan_for_the_engine_to_refuse() -> None:
    assert codec.encode({"lte": math.nan}) == b'{"lte":NaN}'


def test_the_elasticsearch_client_decodes_with_the_codec() -> None:
    engine = ElasticsearchEngine("http://127.0.0.1:9", 1.0)
    try:
        serializers = engine._client.transport.serializers
        for mimetype in (
            "application/json",
            "application/vnd.elasticsearch+json; compatible-with=8",
        ):
            assert isinstance(serializers.get_serializer(mimetype), DecodingSerializer)
            answer = b'{"big": 123456789012345678901234567890, "t": "caf\\u00e9", "n": NaN}'
            decoded = serializers.loads(answer, mimetype)
            assert _typed(decoded) == _typed(json.loads(answer))
        body = serializers.dumps({"t": "café", "n": 1}, "application/vnd.elasticsearch+json")
        assert json.loads(body) == {"t": "café", "n": 1}
    finally:
        engine.close()

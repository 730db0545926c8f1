"""JSON to and from the engine: answers decoded by ``orjson``, exactly as the standard
library decodes them.

``orjson`` decodes an engine answer several times faster than ``json``, but differs on three
inputs the engine may send back verbatim from a stored ``_source``: an integer outside 64 bits
(``orjson`` turns it into a float, losing digits), ``NaN``/``Infinity`` and a lone surrogate
escape (``orjson`` refuses both). An answer holding a run of 19 digits or more (which every
integer outside 64 bits has) or that ``orjson`` refuses is decoded by ``json`` instead, so the
result is always the one ``json.loads`` gives (ADR 0026).

Bodies are encoded by ``json`` as before (compact, UTF-8): ``orjson`` writes a ``NaN`` as
``null``, and a ``null`` bound in a range query is no bound at all, where the standard
library's ``NaN`` is refused by the engine (the request fails closed). The hot path's bodies
are serialised once per plan anyway (:class:`~control_plane.plan_cache.RenderedTier`).
"""

from __future__ import annotations

import json
import uuid
from datetime import date
from decimal import Decimal
from typing import Any

import orjson

_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""``bytes.translate`` table: every digit to ``0``, every other byte to a space"""
_LONG_RUN = b"0" * 19
"""a run of digits as long as the shortest integer ``orjson`` may not keep exactly (a
translation and a substring search: a tenth of a regular expression's time)"""


def decode(data: bytes) -> Any:
    """The JSON value of an answer body, as ``json.loads`` gives it."""
    if data.translate(_DIGITS).find(_LONG_RUN) < 0:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data.decode("utf-8", "surrogatepass"))


def encode(body: Any) -> bytes:
    """A request body as bytes: text as UTF-8, bytes as they are, anything else as compact
    JSON (``json``, non-ASCII kept; dates, UUIDs and decimals written as the client libraries
    write them)."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=_default)
    return text.encode("utf-8", "surrogatepass")


def _default(value: Any) -> Any:
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"cannot send {type(value).__name__} to the engine as JSON: {value!r}")

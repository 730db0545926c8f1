"""The decision record: one per request, schema-versioned, assembled from what the
stages returned (never parsed back out of log text).

With ``audit.store_raw_intent: false`` a record keeps the intent's sha256 and a redacted
form only; every other place the intent's words could appear (span texts, the residual,
captures, the user id, the agent's session id) is redacted or hashed too, and the DSL is
kept as its sha256. An agent request's message is never recorded, whatever the setting.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from control_plane.intent_text import NormalisedIntent

SCHEMA_VERSION: Literal[1] = 1

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+?\d[\d\s().-]{6,}\d")
_DIGITS = re.compile(r"\d")


def redact(text: str) -> str:
    """Emails, phone numbers and digits masked: ``<email>``, ``<phone>``, ``#``."""
    text = _EMAIL.sub("<email>", text)
    text = _PHONE.sub("<phone>", text)
    return _DIGITS.sub("#", text)


def has_contact_details(text: str) -> bool:
    """An e-mail address or a phone number in ``text``."""
    return bool(_EMAIL.search(text) or _PHONE.search(text))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_NEGATIVE_EXPONENT = re.compile(rb"e-(?<=[0-9]e-)")
"""a digit then ``e-``: the literal first, so the search skips along like ``find`` (about
6x faster than ``[0-9]e-`` on a record of 4 KB)"""


def _python_only_forms(text: bytes) -> bool:
    """Where orjson's text can differ from ``json.dumps``'s: a float under 1e-4 (``0.00001``
    against ``1e-05``, ``1.5e-7`` against ``1.5e-07``), i.e. a digit followed by ``e-``, or
    ``0.0000``. Any match, even inside a string, sends the data through ``json.dumps``:
    slower, never another form."""
    return b"0.0000" in text or _NEGATIVE_EXPONENT.search(text) is not None


def canonical_bytes(data: Any) -> bytes:
    """:func:`canonical_json` as UTF-8 bytes, by orjson where its bytes are the standard
    library's: they are but for floats under 1e-4, integers past 64 bits and lone surrogates,
    which go through ``json.dumps`` (the form does not change: records written before orjson
    verify as they did), and non-finite floats, which orjson writes ``null`` (``json.dumps``
    wrote ``NaN``, which is not JSON; ``verify`` accepts a record hashed either way)."""
    try:
        text = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return canonical_json_python(data).encode("utf-8")
    if _python_only_forms(text):
        return canonical_json_python(data).encode("utf-8")
    return text


def canonical_json_python(data: Any) -> str:
    """The canonical form by the standard library (what :func:`canonical_bytes` falls back on,
    and its reference in tests)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(data: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text as is: the form every hash is taken of."""
    try:
        return canonical_bytes(data).decode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: text the UTF-8 hash cannot take anyway
        return canonical_json_python(data)


def sha256_json(data: Any) -> str:
    return hashlib.sha256(canonical_bytes(data)).hexdigest()


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(Model):
    """Model tokens, as the completions reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Extraction(Model):
    """How the intent was obtained (filled by the agent gateway; None for direct search).
    The message itself is never recorded, nor an intent the validation refused."""

    method: str
    """``llm`` or ``rules``"""
    flags: list[str] = []
    """input guardrail flags: injection heuristics (``ignore_instructions``, ...), redacted PII
    (``pii_email``, ``pii_phone``), ``control_characters``, ``llm_fallback``"""
    refusal_code: str | None = None
    """why the extracted intent was refused (``empty``, ``structure``, ...), else None"""
    usage: Usage | None = None
    """the extraction's model tokens"""


class AnswerOut(Model):
    """How the agent gateway answered (never the answer's text, which quotes the intent)."""

    method: str
    """``deterministic`` or ``llm``"""
    fallback_reason: str | None = None
    """why the model's phrasing was not served"""
    citations: list[str] = []
    """the cited product ids, by citation number"""


class RequestParams(Model):
    cohorts: list[str] = []
    market: str | None = None
    user_id: str | None = None
    """the user id; its sha256 (``sha256:...``) when raw storage is off"""
    page: int = 1
    size: int = 10


class TierRunOut(Model):
    tier: str
    total: int
    took_ms: float
    replayed: bool = False
    """not sent this time: the total seen at the same catalog generation (a replayed fallback)"""


class ErrorOut(Model):
    code: str
    message: str
    status: int


class DecisionRecord(Model):
    """One request, as decided. ``writer``/``sequence``/``prev_hash``/``hash`` are set by
    the chain when the record is written (see :mod:`control_plane.audit.chain`)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["decision"] = "decision"
    request_id: str
    time: str
    """when the request was decided: ISO 8601, UTC"""
    now: str | None = None
    """the instant the policies were evaluated at (active windows, purchase ages): ``time``,
    unless the request previewed another instant; None in records written before it was
    recorded"""
    client: str | None = None
    caller: str | None = None
    """agent requests: who the budgets charged (``key:<principal>`` or ``address:<ip>``;
    ``client`` is then the caller's label); its sha256 when raw storage is off"""
    endpoint: str = "search"
    """``search`` (``POST /v1/search``) or ``agent`` (``POST /v1/agent/query``)"""
    session_id: str | None = None
    """the agent conversation the request belongs to (agent requests with a session); its
    sha256 (``sha256:...``) when raw storage is off"""
    intent: str | None = None
    """the normalised intent (:mod:`control_plane.intent_text`); None when raw storage is off"""
    intent_sha256: str | None = None
    intent_redacted: str | None = None
    """only when raw storage is off"""
    raw_intent_stored: bool = True
    intent_normalised: bool = False
    """normalisation changed the intent as the search received it (invisible characters
    removed, compatibility forms folded, mixed-script words mapped, spaces collapsed)"""
    intent_mixed_script: list[str] = []
    """the intent's words that mixed scripts, as received (redacted when raw storage is off)"""
    extraction: Extraction | None = None
    request: RequestParams | None = None
    policy_set_version: str | None = None
    matched: list[dict[str, Any]] = []
    applied: list[dict[str, Any]] = []
    """applied steps: policy id, consumed spans, field changes, explanation"""
    skipped: list[dict[str, Any]] = []
    resolutions: list[dict[str, Any]] = []
    captures: list[dict[str, Any]] = []
    residual: str | None = None
    applied_policies: list[str] = []
    """ids of the applied policies, in application order (what "fired" means)"""
    plan_sha256: str | None = None
    dsl_sha256: str | None = None
    """sha256 of the canonical JSON of the DSL served"""
    cached: bool = False
    status: str = "ok"
    """``ok``, ``no_results``, ``abstained`` or ``error``"""
    reason: str | None = None
    """agent requests: why the gateway abstained, or the search's ``no_results`` reason"""
    reason_code: str | None = None
    """agent requests that abstained: the reason's code (``no_policy_applied``,
    ``llm_bad_output``, an intent refusal's code...)"""
    tier: str | None = None
    tiers: list[TierRunOut] = []
    hits: int = 0
    hit_ids: list[str] = []
    """the product ids served on the page (for click-through)"""
    latency_ms: dict[str, float] = {}
    usage: Usage | None = None
    """agent requests: the model tokens of the whole request (extraction and phrasing)"""
    answer: AnswerOut | None = None
    """agent requests that searched: how the answer was produced and what it cites"""
    error: ErrorOut | None = None
    writer: str = ""
    sequence: int = -1
    prev_hash: str = ""
    hash: str = ""


class EventRecord(Model):
    """An outcome event tied to a recorded request (``POST /v1/events``)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["event"] = "event"
    event_id: str
    request_id: str
    time: str
    type: Literal["click", "add_to_cart", "purchase", "feedback"]
    product_id: str | None = None
    rating: int | None = Field(default=None, ge=1, le=5)
    writer: str = ""
    sequence: int = -1
    prev_hash: str = ""
    hash: str = ""


# --- building -----------------------------------------------------------------------


def _redact_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**span, "text": redact(span["text"])} for span in spans]


def _redact_deep(value: Any) -> Any:
    """Every string inside ``value`` redacted (numbers, booleans and keys kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_deep(item) for item in value]
    if isinstance(value, dict):
        return {key: _redact_deep(item) for key, item in value.items()}
    return value


def explanation_fields(explanation: dict[str, Any], raw: bool) -> dict[str, Any]:
    """The explanation's parts, redacted where the intent's words appear when ``raw`` is off."""
    matched = explanation["matched"]
    applied = explanation["applied"]
    captures = explanation["captures"]
    residual = explanation["residual"]
    skipped = explanation["skipped"]
    resolutions = explanation["resolutions"]
    if not raw:
        matched = [{**m, "spans": _redact_spans(m["spans"])} for m in matched]
        applied = [
            {**a, "consumed": _redact_spans(a["consumed"]), "changes": _redact_deep(a["changes"])}
            for a in applied
        ]
        captures = [{**c, "text": redact(c["text"])} for c in captures]
        residual = redact(residual)
        # reasons quote spans and captured words; changes carry captured values as written
        skipped = [{**k, "reason": redact(k["reason"])} for k in skipped]
        resolutions = [{**r, "reason": redact(r["reason"])} for r in resolutions]
    return {
        "matched": matched,
        "applied": applied,
        "skipped": skipped,
        "resolutions": resolutions,
        "captures": captures,
        "residual": residual,
    }


def intent_fields(
    intent: str | None, raw: bool, normalisation: NormalisedIntent | None = None
) -> dict[str, Any]:
    """``intent`` is the normalised text; ``normalisation`` says what normalising did."""
    if intent is None:
        return {"raw_intent_stored": raw}
    changes: dict[str, Any] = {}
    if normalisation is not None:
        words = list(normalisation.mixed_script)
        changes = {
            "intent_normalised": normalisation.changed,
            "intent_mixed_script": words if raw else [redact(word) for word in words],
        }
    if raw:
        return {"intent": intent, "intent_sha256": sha256_text(intent), "raw_intent_stored": True, **changes}
    return {
        "intent": None,
        "intent_sha256": sha256_text(intent),
        "intent_redacted": redact(intent),
        "raw_intent_stored": False,
        **changes,
    }


def pseudonym(identifier: str | None, raw: bool) -> str | None:
    """An identifier as is, or ``sha256:<hex>`` when raw storage is off (still comparable)."""
    return identifier if raw or identifier is None else "sha256:" + sha256_text(identifier)


def request_params(
    cohorts: tuple[str, ...], market: str | None, user_id: str | None, page: int, size: int, raw: bool
) -> RequestParams:
    return RequestParams(
        cohorts=list(cohorts), market=market, user_id=pseudonym(user_id, raw), page=page, size=size
    )


def intent_key(record: dict[str, Any]) -> str | None:
    """What "the same intent" means across records: the sha256 of the normalised intent."""
    value = record.get("intent_sha256")
    return str(value) if value else None

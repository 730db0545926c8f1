"""What the model endpoint's HTTP answer may be, checked before anything parses it.

The endpoint is untrusted input. :class:`BoundedTransport` wraps the ``httpx`` transport
the ``openai`` client sends through (``openai.OpenAI(http_client=httpx.Client(transport=
...))``), so every check below runs before the SDK sees a byte:

- the request asks for an uncompressed answer (``Accept-Encoding: identity``), and a
  compressed answer is refused, so the size bound is the size of what is parsed;
- the body is read in chunks up to ``max_bytes`` and within ``deadline_s`` from the
  request's start (a server dripping one byte a second times out instead of holding the
  call open);
- a successful answer (2xx) must be declared JSON (``application/json`` or ``+json``)
  and nest at most ``max_depth`` arrays and objects (:func:`json_depth`, a scan that
  needs no recursion);

A successful answer that breaks one of them raises :class:`RejectedResponse` (the SDK
wraps it in ``APIConnectionError``; :mod:`agent_gateway.llm` looks at the cause and calls
it bad output); an error answer (4xx, 5xx) that breaks one is passed on with an empty
body, so it stays the HTTP error it is. Time is measured with ``time.monotonic``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

_OPENERS = frozenset(b"[{")
_CLOSERS = frozenset(b"]}")
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


class RejectedResponse(httpx.TransportError):
    """The model answered 2xx with something that is not a bounded JSON document."""

    def __init__(self, code: str, message: str, received: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.received = received
        """bytes of body read before the answer was refused"""


class _TooLarge(Exception):
    pass


class TooDeep(ValueError):
    """JSON nested deeper than allowed."""


def json_depth(data: bytes, limit: int) -> int:
    """How deeply ``data`` nests arrays and objects (strings skipped); stops counting at
    ``limit + 1``. Malformed JSON is left to the parser: only the depth is measured."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPENERS:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif byte in _CLOSERS:
            depth -= 1
    return deepest


def loads_bounded(data: bytes | str, max_depth: int) -> Any:
    """``json.loads`` after the depth check; ``NaN`` and ``Infinity`` are not JSON.
    Raises :class:`TooDeep`, or ``ValueError`` for anything else that is not JSON."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if json_depth(raw, max_depth) > max_depth:
        raise TooDeep(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except RecursionError as error:  # not reachable after the depth check; kept as a bound
        raise TooDeep("JSON nested too deeply") from error


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class BoundedTransport(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport | None = None, *, max_bytes: int, max_depth: int,
                 deadline_s: float) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.deadline_s = deadline_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        request.headers["accept-encoding"] = "identity"
        response = self.inner.handle_request(request)
        ok = 200 <= response.status_code < 300
        try:
            problem = self._header_problem(response) if ok else None
            if problem is not None:
                raise RejectedResponse(*problem)
            body = self._read(response, started)
        except _TooLarge as error:
            if ok:
                raise RejectedResponse("too_large", f"the answer is larger than {self.max_bytes} bytes",
                                       self.max_bytes) from error
            body = b""
        finally:
            response.close()
        if json_depth(body, self.max_depth) > self.max_depth:
            if ok:
                raise RejectedResponse("too_deep", f"the answer nests deeper than {self.max_depth} levels",
                                       len(body))
            body = b""
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request,
                              extensions={k: v for k, v in response.extensions.items()
                                          if k in ("http_version", "reason_phrase")})

    def _header_problem(self, response: httpx.Response) -> tuple[str, str] | None:
        content_type = response.headers.get("content-type", "")
        if not _is_json(content_type):
            return "content_type", f"the answer is not declared JSON (content type {content_type[:60]!r})"
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            return "compressed", f"the answer is compressed ({encoding[:30]}) although identity was asked"
        declared = response.headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            return "too_large", f"the answer declares {int(declared)} bytes (limit {self.max_bytes})"
        return None

    def _read(self, response: httpx.Response, started: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        stream: Any = response.stream
        for chunk in stream:
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if time.monotonic() - started > self.deadline_s:
                raise httpx.ReadTimeout(f"the answer took longer than {self.deadline_s} s",
                                        request=response.request)
        return b"".join(chunks)

    def close(self) -> None:
        self.inner.close()

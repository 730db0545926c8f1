"""The one place that talks to the model: an OpenAI-compatible Chat Completions endpoint
(OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp) through the ``openai`` SDK.

The endpoint is untrusted input. Every call has the configured timeout (for the whole
answer, not only each read) and no retries, and goes through
:class:`~agent_gateway.llm_wire.BoundedTransport`, which bounds the answer's size, its JSON
depth and its content type before the SDK sees it. The SDK's raw response is then parsed
here (never its lenient models), and every way a call can go wrong is one of two errors:

- :class:`LlmUnavailable` (``llm_unavailable``): the model could not be reached, did not
  answer in time, answered an HTTP error, or the SDK failed in any other way;
- :class:`LlmBadOutput` (``llm_bad_output``): the model answered 2xx with something that
  is not a completion holding one JSON object: not JSON or not declared JSON
  (``not_json``, ``content_type``), too large or too deep (``too_large``, ``too_deep``),
  compressed (``compressed``), a wrong shape (``shape``), no choice (``no_choice``), a
  refusal (``refusal``), an answer cut short or filtered (``truncated``), or a ``usage``
  that is missing or not numbers (``usage_invalid``).

Usage is clamped before anyone charges it (:func:`clamp_usage`): a call is charged at
most one token per byte sent (prompt) and per byte received (completion), and at most
``max_tokens_per_call`` in all, so an endpoint reporting 2e15 tokens cannot lock a client
out. A call whose usage is unknown (bad output, missing usage) is charged that bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx
import openai

from agent_gateway.llm_wire import BoundedTransport, RejectedResponse, TooDeep, loads_bounded
from control_plane.config import LlmSettings

Message = Mapping[str, str]

MAX_RESPONSE_BYTES = 65_536
"""the largest answer read (an intent or a phrased answer is well under 2 KB)"""
MAX_JSON_DEPTH = 32
"""the deepest JSON nesting accepted, in the HTTP body and in the message content"""
MAX_TOKENS_PER_CALL = 8_192
"""the most one call is charged, whatever the endpoint reports"""


class LlmUnavailable(RuntimeError):
    """The model did not answer in time, could not be reached, or answered an error."""

    code = "llm_unavailable"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.total_tokens + other.total_tokens)


class LlmBadOutput(ValueError):
    """The model answered, but not the JSON object the schema asks for."""

    code = "llm_bad_output"

    def __init__(self, message: str, usage: Usage | None = None, detail: str = "shape") -> None:
        super().__init__(message)
        self.usage = usage or Usage()
        self.detail = detail
        """which check failed (``not_json``, ``too_deep``, ``usage_invalid``...)"""


@dataclass(frozen=True)
class Completion:
    data: Mapping[str, Any]
    usage: Usage
    usage_clamped: bool = False
    """the endpoint reported more tokens than the call can have used"""


@dataclass(frozen=True)
class Bound:
    """The most a call may be charged: one token per byte each way, ``per_call`` in all."""

    sent: int
    received: int
    per_call: int = MAX_TOKENS_PER_CALL

    def charged_when_unknown(self) -> Usage:
        prompt = min(self.sent, self.per_call)
        completion = min(self.received, self.per_call - prompt)
        return Usage(prompt, completion, prompt + completion)


def _count(value: Any) -> float | None:
    """A token count as the endpoint wrote it: a finite number >= 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def clamp_usage(reported: Any, bound: Bound) -> tuple[Usage, bool] | None:
    """The usage to charge and whether it was clamped; None when ``reported`` is not a
    ``usage`` object with numeric ``prompt_tokens`` and ``completion_tokens``."""
    if not isinstance(reported, Mapping):
        return None
    prompt, completion = _count(reported.get("prompt_tokens")), _count(reported.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    capped_prompt = min(math.ceil(prompt), bound.sent, bound.per_call)
    capped_completion = min(math.ceil(completion), bound.received, bound.per_call - capped_prompt)
    clamped = (capped_prompt, capped_completion) != (prompt, completion)
    return Usage(capped_prompt, capped_completion, capped_prompt + capped_completion), clamped


def response_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": dict(schema)}}


def completion_of(body: bytes, bound: Bound, *, max_depth: int = MAX_JSON_DEPTH) -> Completion:
    """The message content of a Chat Completions answer as one JSON object, with the usage
    to charge; :class:`LlmBadOutput` for anything else."""
    unknown = bound.charged_when_unknown()
    try:
        answer = loads_bounded(body, max_depth)
    except TooDeep as error:
        raise LlmBadOutput(f"the model's answer is refused: {error}", unknown, "too_deep") from error
    except ValueError as error:
        raise LlmBadOutput(f"the model's answer is not JSON: {error}", unknown, "not_json") from error
    if not isinstance(answer, dict):
        raise LlmBadOutput("the model's answer is not a JSON object", unknown, "shape")
    usage = clamp_usage(answer.get("usage"), bound)
    if usage is None:
        raise LlmBadOutput("the model's answer has no numeric usage", unknown, "usage_invalid")
    charged, clamped = usage
    choices = answer.get("choices")
    if not isinstance(choices, list):
        raise LlmBadOutput("the model's answer has no list of choices", charged, "shape")
    if not choices:
        raise LlmBadOutput("the model answered no choice", charged, "no_choice")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise LlmBadOutput("the model's choice holds no message", charged, "shape")
    refusal = message.get("refusal")
    if refusal is not None and refusal != "":
        raise LlmBadOutput("the model refused to answer", charged, "refusal")
    if choice.get("finish_reason") in ("length", "content_filter"):
        reason = choice["finish_reason"]
        raise LlmBadOutput(f"the model's answer was cut short ({reason})", charged, "truncated")
    content = message.get("content")
    if not isinstance(content, str):
        raise LlmBadOutput("the model's message has no text content", charged, "shape")
    try:
        data = loads_bounded(content, max_depth)
    except TooDeep as error:
        raise LlmBadOutput(f"the model's output is refused: {error}", charged, "too_deep") from error
    except ValueError as error:
        raise LlmBadOutput("the model's output is not JSON", charged, "not_json") from error
    if not isinstance(data, dict):
        raise LlmBadOutput("the model's output is not a JSON object", charged, "shape")
    return Completion(data, charged, clamped)


class LlmClient:
    def __init__(self, settings: LlmSettings, *, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 max_json_depth: int = MAX_JSON_DEPTH,
                 max_tokens_per_call: int = MAX_TOKENS_PER_CALL) -> None:
        if not settings.base_url:
            raise ValueError("no LLM is configured (llm.base_url / GOVSEARCH_LLM_BASE_URL)")
        self.settings = settings
        self.max_json_depth = max_json_depth
        self.max_tokens_per_call = max_tokens_per_call
        transport = BoundedTransport(max_bytes=max_response_bytes, max_depth=max_json_depth,
                                     deadline_s=settings.timeout_s)
        self._http = httpx.Client(transport=transport, timeout=settings.timeout_s)
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout_s,
            max_retries=0,
            http_client=cast(Any, self._http),  # a legacy httpx client: every SDK major takes one
        )

    def close(self) -> None:
        self._client.close()
        self._http.close()

    def complete_json(self, messages: Sequence[Message], name: str, schema: Mapping[str, Any]) -> Completion:
        """One structured completion: the parsed JSON object and the (clamped) token usage.
        Raises :class:`LlmUnavailable` or :class:`LlmBadOutput`, nothing else."""
        sent_messages = [dict(m) for m in messages]
        fmt = response_format(name, schema)
        sent = len(json.dumps({"messages": sent_messages, "response_format": fmt}).encode())
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                model=self.settings.model,
                messages=cast(Any, sent_messages),
                response_format=cast(Any, fmt),
                temperature=0,
            )
            body = raw.content
        except openai.APITimeoutError as error:
            raise LlmUnavailable(f"the model did not answer within {self.settings.timeout_s} s") from error
        except openai.APIConnectionError as error:
            self._bad_answer(error.__cause__, sent)
            raise LlmUnavailable(f"the model could not be reached: {error}") from error
        except openai.APIStatusError as error:
            raise LlmUnavailable(f"the model answered HTTP {error.status_code}") from error
        except httpx.TimeoutException as error:
            raise LlmUnavailable(f"the model did not answer within {self.settings.timeout_s} s") from error
        except Exception as error:  # whatever else the SDK or the transport raises: never a 500
            self._bad_answer(error, sent)
            raise LlmUnavailable(f"the model call failed: {type(error).__name__}") from error
        return completion_of(body, Bound(sent, len(body), self.max_tokens_per_call),
                             max_depth=self.max_json_depth)

    def _bad_answer(self, cause: BaseException | None, sent: int) -> None:
        """Raise :class:`LlmBadOutput` when ``cause`` is the transport refusing a 2xx answer."""
        if isinstance(cause, RejectedResponse):
            usage = Bound(sent, cause.received, self.max_tokens_per_call).charged_when_unknown()
            raise LlmBadOutput(f"the model's answer was refused: {cause}", usage, cause.code) from cause

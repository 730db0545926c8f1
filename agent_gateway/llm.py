"""The one place that talks to the model: an OpenAI-compatible Chat Completions endpoint
(OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp) through the ``openai`` SDK.

Every call has the configured timeout and no retries, so a slow or unreachable model
fails within ``timeout_s``; every failure becomes :class:`LlmUnavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import openai

from control_plane.config import LlmSettings

Message = Mapping[str, str]


class LlmUnavailable(RuntimeError):
    """The model did not answer in time, could not be reached, or answered an error."""


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

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage or Usage()


@dataclass(frozen=True)
class Completion:
    data: Mapping[str, Any]
    usage: Usage


def response_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": dict(schema)}}


class LlmClient:
    def __init__(self, settings: LlmSettings) -> None:
        if not settings.base_url:
            raise ValueError("no LLM is configured (llm.base_url / GOVSEARCH_LLM_BASE_URL)")
        self.settings = settings
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout_s,
            max_retries=0,
        )

    def close(self) -> None:
        self._client.close()

    def complete_json(self, messages: Sequence[Message], name: str, schema: Mapping[str, Any]) -> Completion:
        """One structured completion; the parsed JSON object and the token usage."""
        try:
            completion = self._client.chat.completions.create(
                model=self.settings.model,
                messages=cast(Any, [dict(m) for m in messages]),
                response_format=cast(Any, response_format(name, schema)),
                temperature=0,
            )
        except openai.APITimeoutError as error:
            raise LlmUnavailable(f"the model did not answer within {self.settings.timeout_s} s") from error
        except openai.APIConnectionError as error:
            raise LlmUnavailable(f"the model could not be reached: {error}") from error
        except openai.APIStatusError as error:
            raise LlmUnavailable(f"the model answered HTTP {error.status_code}") from error
        except openai.OpenAIError as error:
            raise LlmUnavailable(f"the model call failed: {type(error).__name__}") from error
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(completion.usage.prompt_tokens or 0, completion.usage.completion_tokens or 0,
                          completion.usage.total_tokens or 0)
        if not completion.choices:
            raise LlmBadOutput("the model answered no choice", usage)
        content = completion.choices[0].message.content or ""
        try:
            data = json.loads(content)
        except ValueError as error:
            raise LlmBadOutput("the model's output is not JSON", usage) from error
        if not isinstance(data, dict):
            raise LlmBadOutput("the model's output is not a JSON object", usage)
        return Completion(data, usage)

"""The agent gateway's own settings. The LLM endpoint itself comes from ``Settings.llm``.

Environment overrides (``GOVSEARCH_AGENT_*``) win over the defaults, like the rest of the
configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GatewaySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    require_policy_match: bool | None = None
    """abstain when only guards matched; ``None`` follows ``search.require_policy_match``"""
    fallback_to_rules: bool = False
    """when the model is unreachable, slow or fails, extract with the rules instead of a 503"""
    llm_answer: bool = False
    """phrase the answer with the model (checked, with the deterministic answer as fallback)"""
    max_message_chars: int = Field(default=2000, ge=1)
    max_intent_chars: int = Field(default=120, ge=1, le=512)
    answer_products: int = Field(default=5, ge=1, le=20)
    history_turns: int = Field(default=6, ge=0, le=50)
    max_sessions: int = Field(default=1000, ge=1)
    requests_per_minute: int = Field(default=60, ge=1)
    tokens_per_day: int = Field(default=200_000, ge=1)


ENV_OVERRIDES: dict[str, str] = {
    "GOVSEARCH_AGENT_REQUIRE_POLICY_MATCH": "require_policy_match",
    "GOVSEARCH_AGENT_FALLBACK_TO_RULES": "fallback_to_rules",
    "GOVSEARCH_AGENT_LLM_ANSWER": "llm_answer",
    "GOVSEARCH_AGENT_REQUESTS_PER_MINUTE": "requests_per_minute",
    "GOVSEARCH_AGENT_TOKENS_PER_DAY": "tokens_per_day",
}


def gateway_settings(environ: Mapping[str, str] | None = None) -> GatewaySettings:
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {key: environ[var] for var, key in ENV_OVERRIDES.items() if environ.get(var)}
    return GatewaySettings.model_validate(data)

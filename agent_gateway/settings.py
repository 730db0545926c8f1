"""The agent gateway's own settings. The LLM endpoint itself comes from ``Settings.llm``.

Environment overrides (``GOVSEARCH_AGENT_*``) win over the defaults, like the rest of the
configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Abstain = Literal["no_policy", "broad_guards_only", "off"]


class GatewaySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    abstain: Abstain = "no_policy"
    """when a governed search is not an answer (``gateway.governed_search``): ``no_policy``
    abstains when no policy other than guards and ``always`` policies was applied;
    ``broad_guards_only`` only when the broad tier served with nothing but guards applied;
    ``off`` never (the storefront's behaviour)"""
    require_policy_match: bool | None = None
    """the older switch: ``true`` is ``abstain: no_policy``, ``false`` is ``abstain: off``;
    ``None`` follows ``search.require_policy_match`` when that is on, else ``abstain``"""
    fallback_to_rules: bool = False
    """when the model is unreachable, slow or fails, extract with the rules instead of a 503"""
    on_bad_output: Literal["abstain", "rules"] = "abstain"
    """when the model answers something unusable (``llm_bad_output``): abstain, or extract
    with the rules"""
    llm_answer: bool = False
    """phrase the answer with the model (checked, with the deterministic answer as fallback)"""
    max_message_chars: int = Field(default=2000, ge=1)
    max_intent_chars: int = Field(default=120, ge=1, le=512)
    answer_products: int = Field(default=5, ge=1, le=20)
    history_turns: int = Field(default=6, ge=0, le=50)
    max_sessions: int = Field(default=1000, ge=1)
    requests_per_minute: int = Field(default=60, ge=1)
    tokens_per_day: int = Field(default=200_000, ge=1)
    global_requests_per_minute: int = Field(default=1_200, ge=1)
    """all callers together"""
    global_tokens_per_day: int = Field(default=5_000_000, ge=1)
    """all callers together"""


ENV_OVERRIDES: dict[str, str] = {
    "GOVSEARCH_AGENT_ABSTAIN": "abstain",
    "GOVSEARCH_AGENT_REQUIRE_POLICY_MATCH": "require_policy_match",
    "GOVSEARCH_AGENT_FALLBACK_TO_RULES": "fallback_to_rules",
    "GOVSEARCH_AGENT_ON_BAD_OUTPUT": "on_bad_output",
    "GOVSEARCH_AGENT_LLM_ANSWER": "llm_answer",
    "GOVSEARCH_AGENT_REQUESTS_PER_MINUTE": "requests_per_minute",
    "GOVSEARCH_AGENT_TOKENS_PER_DAY": "tokens_per_day",
    "GOVSEARCH_AGENT_GLOBAL_REQUESTS_PER_MINUTE": "global_requests_per_minute",
    "GOVSEARCH_AGENT_GLOBAL_TOKENS_PER_DAY": "global_tokens_per_day",
}


def gateway_settings(environ: Mapping[str, str] | None = None) -> GatewaySettings:
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {key: environ[var] for var, key in ENV_OVERRIDES.items() if environ.get(var)}
    return GatewaySettings.model_validate(data)

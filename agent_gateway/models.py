"""Request and response models of ``POST /v1/agent/query`` (the OpenAPI schema is generated
from them)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control_plane.api.models import SearchResponse
from control_plane.service import IDENTIFIER, SearchRequest


class AgentQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str = Field(min_length=1, description="the user's message; at most 2,000 characters (else 413)")
    session_id: str | None = Field(default=None, pattern=IDENTIFIER)
    user_id: str | None = Field(default=None, pattern=IDENTIFIER)
    cohorts: tuple[Annotated[str, Field(pattern=IDENTIFIER)], ...] = Field(default=(), max_length=10)
    market: str | None = Field(default=None, pattern=r"^[a-z]{2}$")
    catalog: str | None = Field(
        default=None, max_length=64,
        description="the named catalog the query is for, as in POST /v1/search (another than the"
        " served one: 400 catalog_not_served)",
    )

    @field_validator("cohorts")
    @classmethod
    def _cohorts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return SearchRequest._cohorts(value)


class UsageOut(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ExtractionOut(BaseModel):
    method: Literal["llm", "rules"]
    flags: list[str]
    refusal_code: str | None = None
    usage: UsageOut = UsageOut()


class CitationOut(BaseModel):
    id: int
    product_id: str


class AnswerOut(BaseModel):
    text: str
    citations: list[CitationOut]
    method: Literal["deterministic", "llm"] = "deterministic"
    fallback_reason: str | None = None


class AgentResponse(BaseModel):
    request_id: str
    status: Literal["ok", "no_results", "abstained"]
    reason: str | None = None
    reason_code: str | None = None
    """why the gateway abstained, as a code: ``no_policy_applied``, ``broad_tier_guards_only``,
    ``llm_bad_output`` or the intent refusal's code (``empty``, ``instruction``...)"""
    intent: str | None
    extraction: ExtractionOut
    search: SearchResponse | None
    answer: AnswerOut
    usage: UsageOut = UsageOut()

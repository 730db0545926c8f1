"""Response models of the search API (the OpenAPI schema is generated from them)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, Field

from control_plane.service import SearchRequest


def _iso_only(value: Any) -> Any:
    if not isinstance(value, str | datetime):
        raise ValueError("expected an ISO 8601 time with a zone, e.g. 2026-12-10T12:00:00Z")
    return value


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the instant is outside the years 1 to 9999 once in UTC") from None


RequestInstant = Annotated[AwareDatetime, BeforeValidator(_iso_only), AfterValidator(_in_utc)]
"""An instant a request names: an ISO 8601 string with a zone (no bare numbers), held in UTC
(whatever offset it was written with, the engine is handed one it can read)."""


class SearchBody(SearchRequest):
    """``POST /v1/search`` and ``/v1/compile``: a search request, optionally previewed at
    another instant."""

    now: RequestInstant | None = Field(
        default=None,
        description=(
            "Preview: evaluate the policies (active windows, purchase ages) at this instant"
            " instead of the time of the request, e.g. 2026-12-10T12:00:00Z. Needs an API key"
            " with the author, approver or auditor role (403 preview_forbidden otherwise)."
        ),
    )


class HitOut(BaseModel):
    id: str
    title: str | None
    brand: str | None
    price: float | None
    score: float | None
    sponsored: bool
    policies: list[str]


class SearchResponse(BaseModel):
    request_id: str
    policy_set_version: str
    now: datetime = Field(description="the instant the policies were evaluated at")
    status: Literal["ok", "no_results"]
    tier: Literal["strict", "relaxed", "broad"] | None
    total: int
    hits: list[HitOut]
    facets: dict[str, list[dict[str, Any]]]
    reason: str | None = None
    explanation: dict[str, Any] | None = None


class CompileResponse(BaseModel):
    request_id: str
    policy_set_version: str
    now: datetime = Field(description="the instant the policies were evaluated at")
    plan: dict[str, Any]
    dsl: dict[str, Any]
    explanation: dict[str, Any]


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    checks: dict[str, str] = {}

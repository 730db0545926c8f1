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

    catalog: str | None = Field(
        default=None,
        max_length=64,
        description=(
            "The named catalog the request is for (the configuration's `catalogs`; `default`"
            " for its `catalog` section). A process serves one catalog (`govsearch serve"
            " --catalog NAME`): another name is refused with 400 catalog_not_served, so a"
            " request never searches another catalog's products. Omitted: the served one."
        ),
    )

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
    display: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "The catalog profile's `display` fields of the product, field name -> value as"
            " stored (e.g. currency, colour, image, url); a field the product lacks is absent"
        ),
    )


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

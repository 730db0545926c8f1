"""Response models of the search API (the OpenAPI schema is generated from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


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
    plan: dict[str, Any]
    dsl: dict[str, Any]
    explanation: dict[str, Any]


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    checks: dict[str, str] = {}

"""Test and review in the console: the candidate's suite, lint and behavioural diff, and
the workflow's decisions (approve, promote, roll back, disable), each refusal shown as
the workflow words it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from control_plane.console.rendering import (
    Outcome,
    SignedIn,
    attempt,
    environment,
    page,
    see_other,
    workflow_of,
)
from control_plane.console.session import checked_form
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.workflow import Refused
from control_plane.service import SearchRequest

router = APIRouter(prefix="/console", include_in_schema=False)
MAX_DIFF_QUERIES = 500
"""the API's bound on a diff's queries"""


# --- test and review ------------------------------------------------------------------


async def review_context(request: Request, who: Principal, version: str = "staging") -> dict[str, Any]:
    workflow = workflow_of(request)
    live, staging = await environment(request, "live"), await environment(request, "staging")
    target = staging or live
    state = lint = None
    cases: list[dict[str, Any]] = []
    if target is not None:
        try:
            state = await run_in_threadpool(workflow.version_state, target.version)
        except Refused:
            state = None
        lint = [f.as_json() for f in await run_in_threadpool(workflow.lint, target.version)]
        suite = await run_in_threadpool(workflow.suite_of, target.version)
        cases = [c.as_json() for c in suite.cases] if suite else []
    return {
        "nav": "review", "live": live, "staging": staging, "target": target, "state": state,
        "lint": lint or [], "cases": cases, "report": None, "diff": None, "refusal": None,
        "done": None, "queries": default_queries(request),
        "live_policies": [p for p in live.policy_set.policies if p.enabled] if live else [],
    }


def default_queries(request: Request) -> str:
    path = Path(request.app.state.service.settings.policies.dir) / "regression" / "queries.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


@router.get("/review")
async def review(
    request: Request, who: SignedIn, saved: str | None = None, done: str | None = None
) -> Response:
    context = await review_context(request, who)
    context["saved"], context["done"] = saved, done
    return page(request, "review.html.j2", **context)


async def review_answer(
    request: Request, who: Principal, outcome: Outcome, done: str, **extra: Any
) -> Response:
    if outcome.status == 200 and not extra:
        return see_other("/console/review", done=done)
    context = await review_context(request, who)
    context.update(refusal=outcome.refusal, problems=outcome.problems, **extra)
    if outcome.status == 200:
        context["done"] = done
    return page(request, "review.html.j2", status=outcome.status, **context)


@router.post("/review/test")
async def run_tests(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    outcome = await attempt(workflow_of(request).test, who, form.get("version") or None)
    report = outcome.value.as_json() if outcome.value is not None else None
    return await review_answer(request, who, outcome, "tested", report=report)


@router.get("/review/diff")
async def behaviour_diff(request: Request, who: SignedIn, queries: str = "") -> Response:
    workflow = workflow_of(request)
    problems: list[str] = []
    requests: list[SearchRequest] = []
    for number, line in enumerate(queries.splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            requests.append(SearchRequest(intent=text))
        except ValidationError as error:
            problems.append(f"line {number}: {error.errors()[0]['msg']}")
    context = await review_context(request, who)
    context["queries"] = queries
    if problems or not requests:
        context["diff_problems"] = problems or ["give at least one intent, one per line"]
        return page(request, "review.html.j2", status=400, **context)
    outcome = await attempt(workflow.behaviour_diff, "live", "staging", requests[:MAX_DIFF_QUERIES], None, 10)
    context.update(diff=outcome.value, refusal=outcome.refusal)
    return page(request, "review.html.j2", status=outcome.status, **context)


@router.post("/review/approve")
async def approve(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    outcome = await attempt(workflow_of(request).approve, who, form.get("version") or None,
                            form.get("comment") or None)
    return await review_answer(request, who, outcome, "approved")


@router.post("/review/promote")
async def promote(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    reenable = [p.strip() for p in form.get("reenable", "").split(",") if p.strip()]
    outcome = await attempt(workflow_of(request).promote, who, form.get("version") or None,
                            form.get("reason") or None, reenable)
    return await review_answer(request, who, outcome, "promoted")


@router.post("/review/rollback")
async def rollback(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    outcome = await attempt(workflow_of(request).rollback, who, form.get("to") or None,
                            form.get("reason") or None)
    return await review_answer(request, who, outcome, "rolled back")


@router.post("/review/disable")
async def disable(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    outcome = await attempt(
        workflow_of(request).disable, who, form.get("policy_id", ""), form.get("reason", "")
    )
    return await review_answer(request, who, outcome, "disabled")

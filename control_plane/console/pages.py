"""The console's pages: server-rendered HTML over the same workflow, service and audit the
API uses. Reading works without JavaScript; every form that changes something is a POST
with the session's CSRF token (:mod:`control_plane.console.session`), and every change is a
workflow call, so its refusals (roles, four eyes, untested, lint) are the workflow's own
code and sentence, shown on the page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from control_plane.api.errors import engine_message
from control_plane.audit import impact as impact_stage
from control_plane.console import views
from control_plane.console.rendering import (
    SignedIn,
    environment,
    page,
    see_other,
    workflow_of,
)
from control_plane.console.session import (
    ConsoleError,
    authenticate,
    checked_form,
    clear_session,
    form_of,
    new_sign_in_token,
    require_role,
    set_session,
    set_sign_in_token,
    sign_in_token_matches,
)
from control_plane.engine import EngineError
from control_plane.loader import dump_policy_yaml
from control_plane.policy import Policy
from control_plane.service import SearchRequest, SearchService
from control_plane.times import parse_time

router = APIRouter(prefix="/console", include_in_schema=False)
AUDITORS = ("auditor",)


# --- sign-in --------------------------------------------------------------------------


@router.get("")
@router.get("/")
async def home() -> Response:
    return see_other("/console/policies")


def sign_in_page(request: Request, status: int = 200, message: str | None = None) -> Response:
    token = new_sign_in_token()
    response = page(request, "sign_in.html.j2", status=status, message=message, sign_in_token=token)
    set_sign_in_token(response, request, token)
    return response


SIGN_IN_NOTES = {
    "signed_out": "You signed out.",
    "expired": "Your session's key is no longer valid (revoked or unknown): sign in again.",
}
"""what the sign-in page may say when redirected to (a fixed text: a link cannot make the page
say anything else)"""


@router.get("/sign-in")
async def sign_in_form(request: Request, note: str | None = None) -> Response:
    return sign_in_page(request, message=SIGN_IN_NOTES.get(note or ""))


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    form = await form_of(request)
    if not sign_in_token_matches(request, form.get("sign_in_token")):
        raise ConsoleError(
            403, "csrf_failed", "the sign-in form's token is missing or stale: open the sign-in page again"
        )
    api_key = form.get("api_key", "").strip()
    try:
        await authenticate(request, api_key or None)
    except ConsoleError as error:
        return sign_in_page(request, error.status, error.message)
    response = see_other("/console/policies")
    set_session(response, request, api_key)
    return response


@router.post("/sign-out")
async def sign_out(request: Request, who: SignedIn) -> Response:
    await checked_form(request)
    response = see_other("/console/sign-in", note="signed_out")
    clear_session(response, request)
    return response


# --- policies -------------------------------------------------------------------------


@router.get("/policies")
async def policies(request: Request, who: SignedIn, q: str = "", field: str = "any") -> Response:
    if field not in views.SEARCH_FIELDS:
        field = "any"
    live, staging = await environment(request, "live"), await environment(request, "staging")
    live_set = live.policy_set if live else None
    staging_set = staging.policy_set if staging else None
    return page(
        request, "policies.html.j2", nav="policies", q=q, field=field, fields=views.SEARCH_FIELDS,
        live=live, staging=staging,
        live_rows=views.policy_rows(live_set, staging_set, q, field),
        staging_rows=views.policy_rows(staging_set, live_set, q, field),
    )


@router.get("/policies/{policy_id}")
async def policy_page(request: Request, who: SignedIn, policy_id: str, env: str = "live") -> Response:
    workflow = workflow_of(request)
    if env not in ("live", "staging"):
        env = "live"
    found = await environment(request, env)
    item: Policy | None = None
    if found is not None:
        try:
            item = found.policy_set.policy(policy_id)
        except KeyError:
            item = None
    other = "staging" if env == "live" else "live"
    events = await run_in_threadpool(lambda: workflow.history(policy_id=policy_id, limit=50))
    history = [
        {**event.as_json(), "changes": views.field_changes(event.as_json(), policy_id)} for event in events
    ]
    if item is None and not history:
        raise ConsoleError(
            404, "policy_not_found", f"policy {policy_id!r} is not in {env} and has no history"
        )
    suite = await run_in_threadpool(workflow.suite_in, env) if found is not None else None
    recorder = request.app.state.recorder
    records = await run_in_threadpool(recorder.decision_records)
    impact = impact_stage.impact(policy_id, records, await run_in_threadpool(recorder.event_records))
    tiers: dict[str, int] = {}
    for record in records:
        if policy_id in record.get("applied_policies", []):
            tiers[str(record.get("tier"))] = tiers.get(str(record.get("tier")), 0) + 1
    return page(
        request, "policy.html.j2", nav="policies", policy_id=policy_id, env=env, other=other,
        version=found.version if found else None, policy=item,
        yaml_text=dump_policy_yaml(item) if item else None,
        cases=views.cases_of(suite, policy_id), history=history, impact=impact, tiers=tiers,
        may_author=who.has("author"),
        may_disable=bool(item and item.enabled and env == "live" and who.has("approver")),
    )


# --- history --------------------------------------------------------------------------


@router.get("/history")
async def history(request: Request, who: SignedIn, env: str = "") -> Response:
    """The environments' history, and beside it the moves no event names (in flight,
    dropped, withdrawn: ADR 0056), read with the history's roles (every console reader).
    The moves are listed even when the history cannot be read (settling failed: the
    history cannot be written), which is when they matter most."""
    workflow = workflow_of(request)
    where = env if env in ("live", "staging") else None
    moves = await run_in_threadpool(lambda: workflow.move_intents(env=where, limit=100))
    status, problem, events = 200, None, []
    try:
        events = await run_in_threadpool(lambda: workflow.history(env=where, limit=100))
    except EngineError as error:
        status, problem = 503, engine_message(error)
    return page(
        request, "history.html.j2", status=status, nav="history", env=where or "",
        moves=views.move_rows(entry.as_json() for entry in moves),
        events=[event.as_json() for event in events], problem=problem,
    )


# --- preview --------------------------------------------------------------------------


def preview_request(intent: str, cohorts: str, market: str, user: str) -> SearchRequest:
    return SearchRequest(
        intent=intent,
        cohorts=tuple(c.strip() for c in cohorts.split(",") if c.strip()),
        market=market.strip() or None,
        user_id=user.strip() or None,
    )


def preview_instant(request: Request, date: str) -> datetime:
    if not date.strip():
        moment: datetime = request.app.state.clock()
        return moment
    try:
        return parse_time(date.strip())
    except ValueError:
        raise ConsoleError(400, "invalid_time", f"date: not an ISO 8601 date or time: {date!r}") from None


def search_on(service: SearchService, body: SearchRequest, now: datetime) -> Any:
    return service.search(body, now)


@router.get("/preview")
async def preview(
    request: Request, who: SignedIn, intent: str = "", cohorts: str = "", market: str = "",
    user: str = "", date: str = "",
) -> Response:
    context: dict[str, Any] = {
        "nav": "preview", "intent": intent, "cohorts": cohorts, "market": market, "user": user,
        "date": date, "sides": [], "problem": None,
    }
    if intent.strip():
        try:
            body = preview_request(intent, cohorts, market, user)
        except ValidationError as error:
            context["problem"] = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in error.errors()
            )
            return page(request, "preview.html.j2", status=400, **context)
        now = preview_instant(request, date)
        context["now"] = now
        service: SearchService = request.app.state.service
        workflow = workflow_of(request)
        live = await run_in_threadpool(search_on, service, body, now)
        sides = [views.side_of("live", live, service.profile)]
        staging = await environment(request, "staging")
        if staging is not None:

            def on_staging() -> Any:
                with workflow.pinned_service(staging.version) as pinned:
                    return pinned.search(body, now)

            sides.append(views.side_of("staging", await run_in_threadpool(on_staging), service.profile))
        context["sides"] = sides
    return page(request, "preview.html.j2", **context)



# --- audit ----------------------------------------------------------------------------


@router.get("/audit")
async def audit(request: Request, who: SignedIn, request_id: str = "", policy_id: str = "") -> Response:
    require_role(who, "read the audit", *AUDITORS)
    recorder = request.app.state.recorder
    context: dict[str, Any] = {"nav": "audit", "request_id": request_id, "policy_id": policy_id,
                               "side": None, "decisions": None, "record": None}
    status = 200
    if request_id.strip():
        record = await run_in_threadpool(recorder.find, request_id.strip())
        if record is None:
            context["problem"] = f"no decision is recorded for request {request_id.strip()!r}"
            status = 404
        else:
            context["record"], context["side"] = record, views.side_of_record(record)
    if policy_id.strip():
        records = await run_in_threadpool(recorder.decision_records)
        fired = [r for r in records if policy_id.strip() in r.get("applied_policies", [])]
        context["decisions"] = list(reversed(fired))[:100]
        context["fired"] = len(fired)
    return page(request, "audit.html.j2", status=status, **context)

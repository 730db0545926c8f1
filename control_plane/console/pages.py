"""The console's pages: server-rendered HTML over the same workflow, service and audit the
API uses. Reading works without JavaScript; every form that changes something is a POST
with the session's CSRF token (:mod:`control_plane.console.session`), and every change is a
workflow call, so its refusals (roles, four eyes, untested, lint) are the workflow's own
code and sentence, shown on the page."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote, urlencode

import jinja2
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from control_plane.audit import impact as impact_stage
from control_plane.console import drafts, views
from control_plane.console.session import (
    CSRF_FIELD,
    READERS,
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
    signed_in,
)
from control_plane.errors import PolicyLoadError
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.suite import SuiteLoadError
from control_plane.lifecycle.workflow import Environment, Refused, Workflow
from control_plane.loader import dump_policy_yaml
from control_plane.policy import Policy
from control_plane.schema import policy_file_schema
from control_plane.service import SearchRequest, SearchService
from control_plane.times import parse_time

T = TypeVar("T")
TEMPLATES = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,  # always: the templates end in .j2, which select_autoescape would not escape
))
SignedIn = Annotated[Principal, Depends(signed_in)]
AUDITORS = ("auditor",)
MAX_DIFF_QUERIES = 500
"""the API's bound on a diff's queries"""
NEW_POLICY = """\
id: my-new-policy
title: What a shopper means by these words
owner: merch-team
priority: 50
trigger:
  phrase: [some words]
rules:
  - boost:
      brand: [Some brand]
      weight: 2
explain: Why this policy exists, for the next merchandiser.
"""

router = APIRouter(prefix="/console", include_in_schema=False)


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    principal = getattr(request.state, "principal", None)
    return TEMPLATES.TemplateResponse(
        request, template,
        {"principal": principal, "csrf": getattr(request.state, "csrf", ""), "csrf_field": CSRF_FIELD,
         **context},
        status_code=status,
    )


def workflow_of(request: Request) -> Workflow:
    workflow: Workflow = request.app.state.workflow
    return workflow


def see_other(path: str, **query: str) -> RedirectResponse:
    target = path + (("?" + urlencode(query)) if query else "")
    return RedirectResponse(target, status_code=303)


async def environment(request: Request, env: str) -> Environment | None:
    try:
        return await run_in_threadpool(workflow_of(request).environment, env)
    except Refused:
        return None


class Outcome:
    """A workflow call's result, or its refusal (code, status and sentence) for the page."""

    def __init__(self, value: Any = None, refusal: Refused | None = None, problems: list[Any] | None = None):
        self.value, self.refusal, self.problems = value, refusal, problems or []

    @property
    def status(self) -> int:
        if self.refusal is not None:
            return self.refusal.status
        return 422 if self.problems else 200


async def attempt(run: Callable[..., T], *args: Any) -> Outcome:
    try:
        return Outcome(await run_in_threadpool(run, *args))
    except Refused as refused:
        return Outcome(refusal=refused)
    except (PolicyLoadError, SuiteLoadError) as error:
        return Outcome(problems=list(error.errors))


# --- sign-in --------------------------------------------------------------------------


@router.get("")
async def home() -> Response:
    return see_other("/console/policies")


def sign_in_page(request: Request, status: int = 200, message: str | None = None) -> Response:
    token = new_sign_in_token()
    response = page(request, "sign_in.html.j2", status=status, message=message, sign_in_token=token)
    set_sign_in_token(response, request, token)
    return response


@router.get("/sign-in")
async def sign_in_form(request: Request, message: str | None = None) -> Response:
    return sign_in_page(request, message=message)


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
    response = see_other("/console/sign-in", message=f"{who.name} signed out")
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
        may_author="author" in who.roles or "admin" in who.roles,
        may_disable=bool(item and item.enabled and env == "live" and who.has("approver")),
    )


# --- author ---------------------------------------------------------------------------


def schema_keys() -> list[str]:
    """Every property name of the policy JSON Schema: the editor's completions."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.get("properties", {}).items():
                found.add(key)
                walk(value)
            for key, value in node.items():
                if key != "properties":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(policy_file_schema())
    return sorted(found)


def author_page(
    request: Request, text: str, policy_id: str | None, status: int = 200, problems: Any = (),
    refusal: Refused | None = None, reason: str = "",
) -> Response:
    return page(
        request, "author.html.j2", status=status, nav="author", text=text, policy_id=policy_id,
        problems=list(problems), refusal=refusal, reason=reason,
        error_lines=sorted({p.line for p in problems if getattr(p, "line", 0)}),
        schema_keys=json.dumps(schema_keys()),
    )


@router.get("/author")
async def author_form(request: Request, who: SignedIn, policy: str | None = None) -> Response:
    require_role(who, "draft", "author")
    text = NEW_POLICY
    if policy:
        base = await environment(request, "staging") or await environment(request, "live")
        if base is not None:
            try:
                text = dump_policy_yaml(base.policy_set.policy(policy))
            except KeyError:
                raise ConsoleError(404, "policy_not_found", f"policy {policy!r} is not in staging") from None
    return author_page(request, text, policy)


@router.post("/author")
async def save_draft(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    require_role(who, "draft", "author")
    text, reason = form.get("policy_yaml", ""), form.get("reason", "")
    read = await run_in_threadpool(drafts.read_policy, text)
    if read.data is None:
        return author_page(request, text, None, 422, read.errors, reason=reason)
    outcome = await attempt(workflow_of(request).put_policy, who, read.data, reason or None)
    if outcome.status != 200:
        return author_page(request, text, str(read.data.get("id")), outcome.status, outcome.problems,
                           outcome.refusal, reason)
    return see_other("/console/review", saved=str(read.data.get("id")))


def tests_page(
    request: Request, file: str, text: str, status: int = 200, problems: Any = (),
    refusal: Refused | None = None, files: Any = (),
) -> Response:
    return page(
        request, "tests.html.j2", status=status, nav="author", file=file, text=text,
        problems=list(problems), refusal=refusal, files=list(files),
        error_lines=sorted({p.line for p in problems if getattr(p, "line", 0)}),
    )


@router.get("/tests")
async def tests_form(request: Request, who: SignedIn, file: str = "") -> Response:
    require_role(who, "edit tests", "author")
    workflow = workflow_of(request)
    base = await environment(request, "staging") or await environment(request, "live")
    suite = await run_in_threadpool(workflow.suite_of, base.version) if base else None
    files = suite.files() if suite else {}
    text = drafts.tests_yaml(files.get(file, [])) if file else ""
    return tests_page(request, file, text, files=sorted(files))


@router.post("/tests")
async def save_tests(request: Request, who: SignedIn) -> Response:
    form = await checked_form(request)
    require_role(who, "edit tests", "author")
    file, text = form.get("file", "").strip(), form.get("tests_yaml", "")
    read = await run_in_threadpool(drafts.read_tests, file, text)
    if read.errors:
        return tests_page(request, file, text, 422, read.errors)
    outcome = await attempt(workflow_of(request).put_tests, who, file, read.cases, form.get("reason") or None)
    if outcome.status != 200:
        return tests_page(request, file, text, outcome.status, outcome.problems, outcome.refusal)
    return see_other("/console/review", saved=file)


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


def link(path: str, **query: str) -> str:
    return path + "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items())


TEMPLATES.env.globals["link"] = link
TEMPLATES.env.globals["READERS"] = READERS

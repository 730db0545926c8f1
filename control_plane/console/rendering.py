"""What every console page shares: the templates (always autoescaped), the signed-in
principal, and workflow calls whose refusals become part of the page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

import jinja2
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from control_plane.console.session import CSRF_FIELD, signed_in
from control_plane.errors import PolicyLoadError
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.suite import SuiteLoadError
from control_plane.lifecycle.workflow import Environment, Refused, Workflow

T = TypeVar("T")
SECURITY_HEADERS = {
    # everything the console loads is its own: no CDN, no inline script
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
"""on every page (not on the API: no middleware, so the search path pays nothing)"""
TEMPLATES = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,  # always: the templates end in .j2, which select_autoescape would not escape
))
SignedIn = Annotated[Principal, Depends(signed_in)]

def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    principal = getattr(request.state, "principal", None)
    return TEMPLATES.TemplateResponse(
        request, template,
        {"principal": principal, "csrf": getattr(request.state, "csrf", ""), "csrf_field": CSRF_FIELD,
         **context},
        status_code=status,
        headers=SECURITY_HEADERS,
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

"""Authoring in the console: a policy draft and a test file, each read by the loader itself
(:mod:`control_plane.console.drafts`) and staged by the workflow."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from control_plane.console import drafts
from control_plane.console.rendering import (
    SignedIn,
    attempt,
    environment,
    page,
    see_other,
    workflow_of,
)
from control_plane.console.session import (
    ConsoleError,
    checked_form,
    require_role,
)
from control_plane.lifecycle.workflow import Refused
from control_plane.loader import dump_policy_yaml
from control_plane.schema import policy_file_schema

router = APIRouter(prefix="/console", include_in_schema=False)
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


@router.post("/author/check")
async def check_draft(request: Request, who: SignedIn) -> Response:
    """The loader's verdict on a draft as the author types (the editor asks, debounced):
    ``{"errors": [{code, message, file, line, column}]}``; nothing is saved."""
    form = await checked_form(request)
    require_role(who, "draft", "author")
    read = await run_in_threadpool(drafts.read_policy, form.get("policy_yaml", ""))
    return JSONResponse({"errors": [error.to_dict() for error in read.errors]})


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

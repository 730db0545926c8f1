"""The workflow API (the backend of a merchandising UI): environments and their policies,
drafts in staging, tests, lint, behavioural diff, approval, promotion, rollback, the kill
switch, the history and the journal of moves. Every route needs an API key; the roles are in
``control_plane.lifecycle.keys``. Refusals answer with the workflow's code and reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from control_plane.api.auth import require
from control_plane.api.errors import ApiError
from control_plane.api.models import RequestInstant
from control_plane.errors import PolicyLoadError
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.suite import SuiteLoadError
from control_plane.lifecycle.workflow import Refused, Workflow
from control_plane.loader import dump_policy_yaml
from control_plane.service import SearchRequest

T = TypeVar("T")
READERS = ("author", "approver", "auditor")
Env = Literal["staging", "live"]

Reader = Annotated[Principal, Depends(require(*READERS))]
Author = Annotated[Principal, Depends(require("author"))]
Tester = Annotated[Principal, Depends(require("author", "approver"))]
Approver = Annotated[Principal, Depends(require("approver"))]

router = APIRouter(prefix="/v1/policies", tags=["policies"])


def workflow_of(request: Request) -> Workflow:
    workflow: Workflow = request.app.state.workflow
    return workflow


async def call(run: Callable[..., T], *args: Any) -> T:
    """Run a workflow call in the thread pool; refusals and invalid policies become 4xx."""
    try:
        return await run_in_threadpool(run, *args)
    except Refused as refused:
        raise ApiError(refused.status, refused.code, refused.message, refused.details) from refused
    except PolicyLoadError as error:
        raise ApiError(
            422, "invalid_policy", f"the policy set would be invalid: {len(error.errors)} problem(s)",
            [e.to_dict() for e in error.errors],
        ) from error
    except SuiteLoadError as error:
        raise ApiError(
            422, "invalid_tests", f"the test file is invalid: {len(error.errors)} problem(s)",
            [e.to_dict() for e in error.errors],
        ) from error


def _time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise ApiError(400, "invalid_time", f"{name}: not an ISO 8601 time: {value!r}") from error
    if moment.tzinfo is None:
        raise ApiError(400, "invalid_time", f"{name}: give a time zone (e.g. Z)")
    return moment


# --- reading ---------------------------------------------------------------------------


@router.get("/environments/{env}")
async def environment(
    env: Env, request: Request, _: Reader
) -> dict[str, Any]:
    """The version an environment serves, and a summary of its policies."""
    found = await call(workflow_of(request).environment, env)
    return found.as_json()


@router.get("/environments/{env}/policies/{policy_id}")
async def policy(
    env: Env, policy_id: str, request: Request, _: Reader
) -> dict[str, Any]:
    """One policy of an environment, as JSON and as the YAML an author would write."""
    found = await call(workflow_of(request).environment, env)
    try:
        item = found.policy_set.policy(policy_id)
    except KeyError:
        raise ApiError(404, "policy_not_found", f"policy {policy_id!r} is not in {env}") from None
    return {
        "env": env,
        "version": found.version,
        "policy": json.loads(item.model_dump_json(by_alias=True)),
        "yaml": dump_policy_yaml(item),
    }


@router.get("/versions/{version}")
async def version(
    version: str, request: Request, _: Reader
) -> dict[str, Any]:
    """A version's authors, suite, last test run, approvals and where it is served."""
    state = await call(workflow_of(request).version_state, version)
    return state.as_json()


@router.get("/versions/{version}/tests")
async def tests(
    version: str, request: Request, _: Reader
) -> dict[str, Any]:
    suite = await call(workflow_of(request).suite_of, version)
    return suite.as_json() if suite else {"cases": []}


@router.get("/versions/{version}/lint")
async def lint(
    version: str, request: Request, _: Reader
) -> dict[str, Any]:
    findings = await call(workflow_of(request).lint, version)
    return {
        "errors": sum(f.severity == "error" for f in findings),
        "findings": [f.as_json() for f in findings],
    }


@router.get("/history")
async def history(
    request: Request,
    _: Reader,
    env: Env | None = None,
    action: str | None = None,
    policy_id: str | None = None,
    version: str | None = None,
    actor: str | None = None,
    outcome: Literal["done", "refused"] | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    """Every change and refusal, newest first: who, when, why, and the policy diff."""
    events = await call(
        lambda: workflow_of(request).history(
            env=env, action=action, policy_id=policy_id, version=version, actor=actor,
            outcome=outcome, since=_time(since, "since"), until=_time(until, "until"), limit=limit,
        ),
    )
    return {"events": [e.as_json() for e in events]}


@router.get("/intents")
async def intents(
    request: Request,
    _: Reader,
    env: Env | None = None,
    state: Literal["open", "dropped", "withdrawn", "recorded"] | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    """The journal of environment moves (ADR 0053), newest first: by default the moves no
    history event names (in flight, dropped, withdrawn), each with the event it has or would
    have had, and why it was closed."""
    found = await call(
        lambda: workflow_of(request).move_intents(env=env, state=state, limit=limit)
    )
    return {"intents": [entry.as_json() for entry in found]}


# --- authoring -------------------------------------------------------------------------


class DraftBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: dict[str, Any] = Field(description="the policy, as its YAML would read, in JSON")
    reason: str | None = Field(default=None, max_length=500)


@router.put("/staging/policies/{policy_id}")
async def put_draft(
    policy_id: str, body: DraftBody, request: Request, who: Author
) -> dict[str, Any]:
    """Create or replace a policy in staging: a new staging version."""
    if body.policy.get("id", policy_id) != policy_id:
        raise ApiError(400, "id_mismatch", f"the body's id {body.policy.get('id')!r} is not {policy_id!r}")
    state = await call(
        workflow_of(request).put_policy, who, {**body.policy, "id": policy_id}, body.reason
    )
    return state.as_json()


@router.delete("/staging/policies/{policy_id}")
async def delete_draft(
    policy_id: str,
    request: Request,
    who: Author,
    reason: str | None = Query(default=None, max_length=500),
) -> dict[str, Any]:
    state = await call(workflow_of(request).delete_policy, who, policy_id, reason)
    return state.as_json()


class TestsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = Field(pattern=r"^[A-Za-z0-9_./-]{1,200}\.ya?ml$", description="e.g. food/tests/x.yaml")
    now: RequestInstant | None = Field(
        default=None, description="the file's instant: cases that set no 'now' of their own run at it"
    )
    cases: list[dict[str, Any]] = Field(max_length=500)
    reason: str | None = Field(default=None, max_length=500)


@router.put("/staging/tests")
async def put_tests(
    body: TestsBody, request: Request, who: Author
) -> dict[str, Any]:
    """Replace one test file of the staging suite (an empty list removes it)."""
    state = await call(workflow_of(request).put_tests, who, body.file, body.cases, body.reason, body.now)
    return state.as_json()


# --- testing and review ----------------------------------------------------------------


class TestRunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    now: RequestInstant | None = Field(
        default=None,
        description=(
            "run the cases that pin no 'now' at this instant (default: now); pinned cases keep theirs"
        ),
    )


@router.post("/versions/{version}/test")
async def run_tests(
    version: str, request: Request, who: Tester, body: TestRunBody | None = None
) -> dict[str, Any]:
    """Run the version's suite against its own index; the result (and the instant unpinned
    cases ran at) is recorded."""
    report = await call(workflow_of(request).test, who, version, body.now if body else None)
    return report.as_json()


class DiffBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_: str = Field(default="live", alias="from", description="a version, 'live' or 'staging'")
    to: str = Field(default="staging", description="a version, 'live' or 'staging'")
    queries: list[SearchRequest] = Field(min_length=1, max_length=500)
    now: str | None = None
    top: int = Field(default=10, ge=1, le=50)


@router.post("/diff")
async def behaviour_diff(
    body: DiffBody, request: Request, _: Reader
) -> dict[str, Any]:
    """Replay the queries on both versions: every intent whose plan or top results change."""
    workflow = workflow_of(request)
    now = _time(body.now, "now")
    result: dict[str, Any] = await call(
        workflow.behaviour_diff, body.from_, body.to, body.queries, now, body.top
    )
    return result


class ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: str | None = Field(default=None, max_length=500)


@router.post("/versions/{version}/approve")
async def approve(
    version: str, body: ApproveBody, request: Request, who: Approver
) -> dict[str, Any]:
    state = await call(workflow_of(request).approve, who, version, body.comment)
    return state.as_json()


class PromoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(default=None, description="default: the staging version")
    reason: str | None = Field(default=None, max_length=500)
    reenable: list[str] = Field(
        default=[], max_length=50, description="policies disabled on live by the kill switch to turn back on"
    )


@router.post("/promote")
async def promote(
    body: PromoteBody, request: Request, who: Approver
) -> dict[str, Any]:
    """Make a tested, approved, lint-clean version live (one atomic alias move)."""
    state = await call(workflow_of(request).promote, who, body.version, body.reason, body.reenable)
    return state.as_json()


class RollbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str | None = Field(default=None, description="default: the version live before this one")
    reason: str | None = Field(default=None, max_length=500)


@router.post("/rollback")
async def rollback(
    body: RollbackBody, request: Request, who: Approver
) -> dict[str, Any]:
    state = await call(workflow_of(request).rollback, who, body.to, body.reason)
    return state.as_json()


class DisableBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=500)


@router.post("/live/policies/{policy_id}/disable")
async def disable(
    policy_id: str, body: DisableBody, request: Request, who: Approver
) -> dict[str, Any]:
    """The kill switch: live without this policy, at once, recorded as a new version."""
    state = await call(workflow_of(request).disable, who, policy_id, body.reason)
    return state.as_json()


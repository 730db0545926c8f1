"""Run a policy test suite against a search service: the one runner behind pytest, the CLI
and the API.

:func:`run_suite` runs on a copy of the service pinned to one policies index (the one it
serves when the run starts, or the index it is already pinned to), so every case of a run
sees the same policy set and the report names that version. The copy has no plan cache:
cases fix their own ``now``, and a plan cached for one time must not answer another. A
service that is already so (pinned, no plan cache: :func:`without_plan_cache`) runs the
suite itself.

Time is an input: a case runs at its own ``now`` (the case's, or its test file's), else at
the run's ``now`` (``--now`` on the CLI, ``now`` on the API, else the caller's clock),
which the report names. A suite whose cases all pin ``now`` gives the same report on any
date (``govsearch policy lint`` warns, ``test_unpinned_window``, about cases that do not and
touch an active window).

For each case it compiles the request (and executes it when ``status``, ``tier`` or
``results`` are expected), renders the strict tier when DSL fragments are expected, reads
the hits' catalog documents back when ``every`` / ``none`` conditions need them, and hands
what it saw to :func:`.checks.check`.

An engine failure during a case fails that case with the engine's message; a service with
no policy set to serve raises before any case runs. An empty suite passes with 0 cases:
whether that is enough is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from control_plane.config import Settings
from control_plane.engine import EngineError
from control_plane.executor import Execution
from control_plane.lifecycle.checks import Observation, Served, check
from control_plane.lifecycle.suite import Suite, TestCase
from control_plane.service import SearchRequest, SearchService
from control_plane.times import iso


@dataclass(frozen=True)
class CaseResult:
    name: str
    file: str
    line: int
    passed: bool
    failures: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "passed": self.passed,
            "failures": list(self.failures),
        }


@dataclass(frozen=True)
class SuiteReport:
    """The outcome of one run: each case in file and line order, the policy-set version
    it ran against, the hash of the suite it ran and the instant cases without their own
    ``now`` ran at."""

    policy_set_version: str
    suite_sha256: str
    now: datetime
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(case.passed for case in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def failed(self) -> int:
        return sum(not case.passed for case in self.cases)

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": self.total,
            "failed": self.failed,
            "policy_set_version": self.policy_set_version,
            "suite_sha256": self.suite_sha256,
            "now": iso(self.now),
            "cases": [case.as_json() for case in self.cases],
        }

    def human(self) -> str:
        """One line per case, each failure indented under it, and a summary line."""
        lines = [
            f"policy set {self.policy_set_version[:12]}, suite {self.suite_sha256[:12]}:"
            f" {self.total} case{'s' if self.total != 1 else ''}; unpinned cases at {iso(self.now)}"
        ]
        for case in self.cases:
            lines.append(f"{'PASS' if case.passed else 'FAIL'}  {case.file}:{case.line}  {case.name}")
            lines += [f"      {failure}" for failure in case.failures]
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(f"{verdict}: {self.total - self.failed} passed, {self.failed} failed")
        return "\n".join(lines)


def run_suite(service: SearchService, suite: Suite, *, now: datetime) -> SuiteReport:
    """Run every case of ``suite`` against the policy set ``service`` serves when the run
    starts; a case without its own ``now`` runs at ``now``."""
    with _pinned(service) as pinned:
        live, _ = pinned.snapshot()
        results = [run_case(pinned, case, now) for case in suite.cases]
    ordered = sorted(results, key=lambda result: (result.file, result.line))
    return SuiteReport(
        policy_set_version=live.policy_set.version, suite_sha256=suite.sha256, now=now, cases=ordered
    )


def run_case(service: SearchService, case: TestCase, now: datetime) -> CaseResult:
    """One case against ``service`` (pin it first for a consistent version), at the case's
    own ``now``, else at ``now``."""
    try:
        request = request_of(case)
    except ValidationError as exc:
        failures = [f"request: expected a valid search request; actual {exc.errors()[0]['msg']}"]
        return CaseResult(case.name, case.file, case.line, False, failures)
    try:
        failures = check(case.expect, observe(service, case, request, case.now or now))
    except EngineError as exc:
        failures = [f"engine: expected an answer; actual error: {exc}"]
    return CaseResult(case.name, case.file, case.line, not failures, failures)


def request_of(case: TestCase) -> SearchRequest:
    results = case.expect.results
    return SearchRequest(
        intent=case.intent,
        user_id=case.user,
        cohorts=case.cohorts,
        market=case.market,
        size=results.size if results is not None else SearchRequest.model_fields["size"].default,
    )


def observe(service: SearchService, case: TestCase, request: SearchRequest, now: datetime) -> Observation:
    """What the pipeline does for the case's request at ``now``: as much as its
    expectations need."""
    expect = case.expect
    served: Served | None = None
    if expect.needs_search:
        outcome = service.search(request, now)
        compiled = outcome.compiled
        conditions = expect.results is not None and bool(expect.results.every or expect.results.none)
        served = _served(service, outcome.execution, documents=conditions)
    else:
        compiled = service.compile(request, now)
    _, by_id = service.snapshot()
    composition = compiled.composition
    return Observation(
        policy_set_version=compiled.policy_set_version,
        policy_ids=by_id.keys(),
        matched=tuple(match.policy_id for match in composition.explanation.matched),
        applied=composition.plan.applied,
        skipped={skip.policy_id: f"{skip.code}: {skip.reason}" for skip in composition.explanation.skipped},
        plan=composition.plan.model_dump(mode="json"),
        dsl=service.render(compiled, request, "strict") if expect.dsl_contains else {},
        served=served,
    )


def _served(service: SearchService, execution: Execution, *, documents: bool) -> Served:
    """The execution's summary; each hit with its catalog document when ``documents``
    (display ``_source`` fields are a subset: conditions may name any catalog field)."""
    found = _documents(service, [hit.id for hit in execution.hits]) if documents else {}
    return Served(
        status=execution.status,
        tier=execution.tier,
        total=execution.total,
        hits=tuple((hit.id, found.get(hit.id, hit.source)) for hit in execution.hits),
        runs=tuple((run.tier, run.total) for run in execution.runs),
        reason=execution.reason,
    )


def _documents(service: SearchService, ids: list[str]) -> dict[str, Mapping[str, Any]]:
    if not ids:
        return {}
    body = {"size": len(ids), "query": {"ids": {"values": ids}}}
    response = service.engine.search(service.profile.alias, body)
    return {str(hit["_id"]): hit.get("_source") or {} for hit in response["hits"]["hits"]}


def without_plan_cache(settings: Settings) -> Settings:
    """``settings`` with the plan cache off: what a service running a suite needs (cases fix
    their own ``now``; a plan cached for one time must not answer another)."""
    return settings.model_copy(update={"search": settings.search.model_copy(update={"plan_cache_size": 0})})


@contextmanager
def _pinned(service: SearchService) -> Iterator[SearchService]:
    """A service like ``service``, pinned to the policies index it serves now (or is pinned
    to) and without a plan cache: each case compiles afresh at its own ``now`` (a cached
    plan could come from another case's time). A service already pinned and without a plan
    cache (``policy test DIR``, the workflow's test) is used as it is: its loaded set serves
    the run, not read and validated a second time (8 s and more at 100,000 policies)."""
    live, _ = service.snapshot()
    if service.index == live.index and service.settings.search.plan_cache_size == 0:
        yield service
        return
    pinned = SearchService(
        without_plan_cache(service.settings),
        service.engine,
        service.profile,
        env=service.env,
        index=live.index,
    )
    try:
        yield pinned
    finally:
        pinned.close()

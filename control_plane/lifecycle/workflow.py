"""The workflow: Author -> Test -> Review -> Promote -> Disable / Rollback.

Every call names the :class:`Principal` acting; the rules below are checked here, once,
for the CLI and the HTTP API alike. A refusal raises :class:`Refused` (a stable code, an
HTTP status and a sentence saying why) and is recorded in the history too. An alias never
moves without its history event, and moves only from where the call's checks read it (a
compare-and-swap): a call that lost a race to another move is refused
``concurrent_change``, naming the version that won, and is the one refusal not recorded
(it changed nothing).

* **Author** (``author``): ``apply`` a policy directory, or ``put_policy`` /
  ``delete_policy`` / ``put_tests`` on the staging set. Each change writes an immutable
  index for the resulting version and moves the staging alias. The actor becomes one of
  the version's authors.
* **Test** (``author``, ``approver``): ``test`` runs the version's suite against that
  version's index and records the result for exactly (version, suite), with the instant
  its unpinned cases ran at.
* **Review** (``approver``): ``approve`` is refused to the version's authors and for a
  version with lint errors; an approval holds for the suite the version had then. The
  authors are everyone who authored a change between the version now live and the
  candidate (:mod:`control_plane.lifecycle.lineage`), drafts underneath included.
* **Promote** (``approver``): refused unless the version's suite has at least one case and
  its latest run, on that very suite, passed; unless a principal who is not an author
  approved it with that suite; unless lint finds no error; and for the live version. The
  live alias then moves in one atomic call, and live keeps that suite.
* **Rollback** (``approver``): to a version that was live before (default: the one live
  before the current one went live, rollbacks skipped, so rollbacks walk back).
* **Disable** (``approver``; ``admin`` for a guard): the kill switch. A new version, equal
  to live but with the policy disabled, goes live at once, without tests or approval, with
  its reason recorded. Staging is left alone.

Time is an input: every event's time, and the default instant of tests, diffs and lint,
is the workflow's ``clock`` (required; the edge that builds the workflow passes its own).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from control_plane import policy_store
from control_plane.catalog.profile import CatalogProfile
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError
from control_plane.errors import ERROR_CODES, PolicyError, PolicyLoadError
from control_plane.lifecycle import lineage, regression
from control_plane.lifecycle import lint as linting
from control_plane.lifecycle.changes import policy_diff, summary, touched_policies
from control_plane.lifecycle.intents import (
    APPLIED,
    OPEN,
    UNRECORDED,
    Entry,
    IntentGivenUp,
    Intents,
    Settled,
)
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.runner import SuiteReport, run_suite, without_plan_cache
from control_plane.lifecycle.store import Event, LifecycleStore
from control_plane.lifecycle.suite import Suite, load_suite, suite_from_json
from control_plane.loader import PYDANTIC_CODES, Progress, build_policy_set, load_policy_set
from control_plane.policy import Policy, PolicySet
from control_plane.service import SearchRequest, SearchService
from control_plane.shopper_language import field_types_of
from control_plane.times import Clock, iso

log = logging.getLogger("govsearch.lifecycle")

ENVIRONMENTS = ("staging", "live")
AUTHORING = ("bootstrap", "apply", "draft", "tests", "suggest")
"""actions that put a version (and its suite) in an environment by authoring it"""
LIVE_MOVES = ("bootstrap", "promote", "rollback", "disable")


class Refused(Exception):
    """The workflow said no: ``code`` (stable), ``status`` (HTTP) and why."""

    def __init__(self, code: str, message: str, status: int = 409, details: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.code, self.status, self.message, self.details = code, status, message, list(details)


@dataclass(frozen=True)
class Environment:
    env: str
    version: str
    index: str
    policy_set: PolicySet
    suite_sha256: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "version": self.version,
            "index": self.index,
            "suite_sha256": self.suite_sha256,
            "policies": [
                {"id": p.id, "title": p.title, "kind": p.kind, "priority": p.priority,
                 "enabled": p.enabled, "origin": p.origin}
                for p in self.policy_set.policies
            ],
        }


@dataclass(frozen=True)
class VersionState:
    version: str
    index: str
    parent: str | None
    created_at: str
    suite_sha256: str | None
    cases: int
    authors: tuple[str, ...]
    approvals: tuple[Mapping[str, Any], ...]
    last_test: Mapping[str, Any] | None
    environments: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "index": self.index,
            "parent": self.parent,
            "created_at": self.created_at,
            "suite_sha256": self.suite_sha256,
            "cases": self.cases,
            "authors": list(self.authors),
            "approvals": [dict(a) for a in self.approvals],
            "last_test": dict(self.last_test) if self.last_test else None,
            "environments": list(self.environments),
        }


class Workflow:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        profile: CatalogProfile,
        *,
        clock: Clock,
        on_move: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_move = on_move
        """called with the environment after each alias move this workflow made (and recorded):
        the app's search service reloads live at once instead of at its next alias check"""
        self.engine = engine
        self.profile = profile
        self.clock = clock
        """the instant of every event, and the default instant of tests, diffs and lint"""
        self.prefix = settings.policies.index_prefix
        self.store = LifecycleStore(engine, self.prefix)
        self.intents = Intents(
            engine, self.prefix, self.store, clock=clock, lease_s=settings.move_lease_s()
        )
        """every move is written down before it is made; a reader completes a move whose
        process died before its event (ADR 0053)"""
        self.store.before_read = self.intents.settle

    # --- reading --------------------------------------------------------------------

    def environment(self, env: str) -> Environment:
        if env not in ENVIRONMENTS:
            raise Refused("unknown_environment", f"environment must be one of {', '.join(ENVIRONMENTS)}", 404)
        live = policy_store.resolve(self.engine, self.prefix, env)
        if live is None:
            raise Refused("empty_environment", f"no policy set is published to '{env}'", 404)
        version = live.policy_set.version
        return Environment(env, version, live.index, live.policy_set, self._suite_sha(version, env))

    def policy_set(self, version: str) -> PolicySet:
        return policy_store.read_index(self.engine, self.index_of(version)).policy_set

    def resolve_version(self, version: str | None, env: str = "staging") -> str:
        """A full version from a version, a 12+ character prefix, an environment name or
        None (the environment ``env``)."""
        if version is None or version in ENVIRONMENTS:
            return self.environment(version or env).version
        if len(version) == 64 and self.store.version(version) is not None:
            return version
        found = self.store.find_version(version) if len(version) >= 12 else None
        if found is None:
            raise Refused("unknown_version", f"policy-set version {version!r} is not registered", 404)
        return found

    def version_state(self, version: str) -> VersionState:
        with self.store.one_call():
            return self._version_state(version)

    def _version_state(self, version: str) -> VersionState:
        version = self.resolve_version(version)
        entry = self.store.version(version)
        if entry is None:  # an environment published without the workflow (policy_store.publish)
            raise Refused("unknown_version", f"policy-set version {version[:12]} is not registered", 404)
        suite_sha = self._suite_sha(version)
        suite = self._suite(suite_sha)
        tests = self.store.events(action="test", version=version, limit=1)
        approvals = self.store.events(action="approve", version=version)
        envs = tuple(
            env for env in ENVIRONMENTS
            if (current := policy_store.resolve(self.engine, self.prefix, env)) is not None
            and current.policy_set.version == version
        )
        return VersionState(
            version=version,
            index=entry["index"],
            parent=entry.get("parent"),
            created_at=entry["created_at"],
            suite_sha256=suite_sha,
            cases=len(suite.cases) if suite else 0,
            authors=self._authors(version),
            approvals=tuple(
                {"principal": e.actor, "time": e.time, "comment": e.reason,
                 "current": e.suite_sha256 == suite_sha}
                for e in reversed(approvals)
            ),
            last_test={**(tests[0].details or {}), "time": tests[0].time, "actor": tests[0].actor}
            if tests else None,
            environments=envs,
        )

    def history(self, **filters: Any) -> list[Event]:
        return self.store.events(**filters)

    def move_intents(
        self, *, env: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[Entry]:
        """The journal of environment moves, newest first: by default the intents no history
        event names (in flight, dropped, withdrawn), else those in ``state``. Settled first,
        like a history read; when settling fails (the history cannot be written) they are
        listed as they stand (a move made and not recorded reads ``open``, marker
        ``applied``)."""
        self.settle_moves()
        return self.intents.journal(env=env, states=(state,) if state else UNRECORDED, limit=limit)

    def settle_moves(self) -> list[Settled]:
        """Complete the moves whose process died between the alias move and the history
        event (what any history read does first; a serving process does it as it starts).
        Never raises: a failure is logged, and the next read tries again."""
        try:
            done = self.intents.settle()
        except Exception as error:  # the engine is down: the next read settles
            log.warning("could not settle the environment moves of %s: %s", self.prefix, error)
            return []
        for settled in done:
            log.warning(
                "%s of %s by %s (%s): intent %s %s", settled.action, settled.env, settled.actor,
                (settled.version or "-")[:12], settled.intent_id, settled.state,
            )
        return done

    def files_of(self, version: str) -> dict[str, str]:
        """Policy id -> the file it was authored in, where known (for export)."""
        entry = self.store.version(self.resolve_version(version)) or {}
        return dict(entry.get("files") or {})

    def suite_of(self, version: str) -> Suite | None:
        """The suite a version is a candidate with (its latest authoring in staging)."""
        return self._suite(self._suite_sha(self.resolve_version(version)))

    def suite_in(self, env: str) -> Suite | None:
        """The suite an environment's version carries there (live keeps the suite it was
        promoted with, whatever staging's tests became since)."""
        return self._suite(self.environment(env).suite_sha256)

    # --- authoring ------------------------------------------------------------------

    def bootstrap(
        self,
        actor: str,
        policy_set: PolicySet,
        suite: Suite | None,
        env: str,
        files: Mapping[str, str] | None = None,
    ) -> str:
        """The operator's path (``govsearch policy publish``, the demo): straight to ``env``,
        without review, recorded as ``bootstrap``."""
        return self._stage(actor, "bootstrap", policy_set, suite, env, "operator publish", files)

    def apply_directory(
        self, principal: Principal, directory: Path | str, reason: str | None
    ) -> VersionState:
        with self._refusals(principal, "apply", None):
            self._require(principal, "apply", "author")
        policy_set, files = read_directory(directory, self.profile)
        suite = load_suite(directory)
        version = self._stage(
            principal.name, "apply", policy_set, suite, "staging", reason or str(directory), files
        )
        return self.version_state(version)

    def put_policy(self, principal: Principal, data: Mapping[str, Any], reason: str | None) -> VersionState:
        with self._refusals(principal, "draft", None, str(data.get("id", ""))):
            self._require(principal, "draft", "author")
        try:
            policy = Policy.model_validate(dict(data))
        except ValidationError as error:
            raise PolicyLoadError(_problems(error, f"policy:{data.get('id', '?')}")) from error
        base = self._draft_base()
        others = [p for p in base.policy_set.policies if p.id != policy.id]
        return self._redraft(
            principal, base, [*others, policy], reason or f"draft {policy.id}", written=(policy.id,)
        )

    def delete_policy(self, principal: Principal, policy_id: str, reason: str | None) -> VersionState:
        with self._refusals(principal, "draft", None, policy_id):
            self._require(principal, "draft", "author")
            base = self._draft_base()
            if all(p.id != policy_id for p in base.policy_set.policies):
                raise Refused("policy_not_found", f"policy {policy_id!r} is not in staging", 404)
        others = [p for p in base.policy_set.policies if p.id != policy_id]
        return self._redraft(principal, base, others, reason or f"delete {policy_id}")

    def put_tests(
        self, principal: Principal, name: str, cases: Sequence[Mapping[str, Any]], reason: str | None,
        now: datetime | None = None,
    ) -> VersionState:
        """Replace the staging suite's test file ``name`` (e.g. ``food/tests/nutella.yaml``);
        ``now``: the file's instant, for its cases that set none."""
        with self._refusals(principal, "tests", None):
            self._require(principal, "tests", "author")
        base = self._draft_base()
        current = self._suite(base.suite_sha256)
        suite = (current or suite_from_json({"cases": []})).with_file(name, cases, now)
        self._stage(
            principal.name, "tests", base.policy_set, suite, "staging", reason or f"tests {name}",
            self.files_of(base.version), base,
        )
        return self.version_state(base.version)

    def suggest(
        self, principal: Principal, policies: Sequence[Policy], reason: str
    ) -> VersionState | None:
        """Add suggested drafts to staging (their ids must be new); None when none are."""
        with self._refusals(principal, "suggest", None):
            self._require(principal, "suggest", "author")
        base = self._draft_base()
        known = {p.id for p in base.policy_set.policies}
        fresh = [p for p in policies if p.id not in known]
        if not fresh:
            return None
        policy_set = build_policy_set(
            [*base.policy_set.policies, *fresh], base.policy_set.vocabularies, base.policy_set.governance,
            self.profile, written=[p.id for p in fresh],
        )
        suite = self._suite(base.suite_sha256)
        version = self._stage(
            principal.name, "suggest", policy_set, suite, "staging", reason, self.files_of(base.version),
            base,
        )
        return self.version_state(version)

    # --- testing and review ---------------------------------------------------------

    def behaviour_diff(
        self,
        before: str,
        after: str,
        requests: Sequence[SearchRequest],
        now: datetime | None = None,
        top: int = 10,
    ) -> dict[str, Any]:
        """Replay ``requests`` on two versions (or environments): what changed, and why."""
        old, new = self.resolve_version(before, "live"), self.resolve_version(after)
        with self.pinned_service(old) as left, self.pinned_service(new) as right:
            result = regression.behaviour_diff(left, right, requests, now=now or self.clock(), top=top)
        return result.as_json()

    def test(self, principal: Principal, version: str | None, now: datetime | None = None) -> SuiteReport:
        """Run the version's suite; cases that pin no ``now`` run at ``now`` (default: the
        clock). The run, and the instant it used, are recorded."""
        with self._refusals(principal, "test", version) as subject:
            self._require(principal, "test", "author", "approver")
            version = subject["version"] = self.resolve_version(version)
        suite = self._suite(self._suite_sha(version)) or suite_from_json({"cases": []})
        at = self.clock()
        with self.pinned_service(version, plan_cache=False) as service:  # the run's own: set read once
            report = run_suite(service, suite, now=now or at)
        self.store.record(self.store.new_event(
            principal.name, "test", at, version=version, suite_sha256=suite.sha256,
            details={"passed": report.passed, "total": report.total, "failed": report.failed,
                     "now": iso(report.now)},
        ))
        return report

    def lint(
        self,
        version: str | None,
        *,
        now: datetime | None = None,
        horizon: timedelta = linting.DEFAULT_HORIZON,
    ) -> list[linting.Finding]:
        """Lint a version with its suite, windows seen from ``now`` (default: the clock)."""
        version = self.resolve_version(version)
        return self._lint(version, self._suite(self._suite_sha(version)), now=now, horizon=horizon)

    def _lint(
        self,
        version: str,
        suite: Suite | None,
        *,
        now: datetime | None = None,
        horizon: timedelta = linting.DEFAULT_HORIZON,
    ) -> list[linting.Finding]:
        """Lint a version with the suite the caller read."""
        return linting.lint(
            self.policy_set(version),
            mapping_fields=self.catalog_fields(),
            now=now or self.clock(),
            tested_policy_ids=suite.policy_ids() if suite else set(),
            profile=self.profile,
            cases=suite.cases if suite else (),
            horizon=horizon,
        )

    def approve(self, principal: Principal, version: str | None, comment: str | None) -> VersionState:
        """Approve a version with its current suite: changing its tests later needs a new
        approval. The approval is for the suite its checks read, read once before them: a
        test edit landing while they run does not inherit it."""
        with self._refusals(principal, "approve", version) as subject:
            self._require(principal, "approve", "approver")
            version = subject["version"] = self.resolve_version(version)
            suite_sha = self._suite_sha(version)
            changes = self.changes_since_live(version)
            own = [c for c in changes if c.actor == principal.name]
            if own:
                more = f"; and {len(own) - 5} more" if len(own) > 5 else ""
                raise Refused(
                    "self_approval",
                    f"{principal.name} authored changes between live and {version[:12]}: "
                    + "; ".join(change.describe() for change in own[:5]) + more
                    + f" (authors: {', '.join(lineage.authors(changes))}); another approver must approve it",
                    403,
                    details=[c.as_json() for c in own],
                )
            self._refuse_lint_errors(version, self._suite(suite_sha))
        self.store.record(self.store.new_event(
            principal.name, "approve", self.clock(), version=version, reason=comment,
            suite_sha256=suite_sha,
        ))
        return self.version_state(version)

    # --- promotion ------------------------------------------------------------------

    def promote(
        self,
        principal: Principal,
        version: str | None,
        reason: str | None,
        reenable: Sequence[str] = (),
    ) -> VersionState:
        """``reenable``: policies killed on live (``disable``) the version may turn back on."""
        with self._refusals(principal, "promote", version) as subject:
            self._require(principal, "promote", "approver")
            version = subject["version"] = self.resolve_version(version)
            live = self.environment("live")
            if live.version == version:
                raise Refused("already_live", f"version {version[:12]} is live already")
            self._refuse_revival(live, version, set(reenable))
            suite_sha = self._refuse_untested(version)
            authors = set(self._authors(version, live))
            approvers = [
                e.actor for e in self.store.events(action="approve", version=version)
                if e.suite_sha256 == suite_sha
            ]
            if not [a for a in approvers if a not in authors]:
                raise Refused(
                    "not_approved",
                    f"version {version[:12]} with its current tests has no approval by a principal"
                    f" other than its authors ({', '.join(sorted(authors)) or 'none'})",
                )
            self._refuse_lint_errors(version, self._suite(suite_sha))
        self._move_live(principal.name, "promote", version, reason, live, suite_sha=suite_sha)
        return self.version_state(version)

    def rollback(self, principal: Principal, to: str | None, reason: str | None) -> VersionState:
        with self._refusals(principal, "rollback", to):
            self._require(principal, "rollback", "approver")
            live = self.environment("live")
            current = live.version
            moves = self.store.events(env="live", action=("bootstrap", "promote", "disable"))
            ever_live = {e.version for e in self.store.events(env="live", action=LIVE_MOVES)}
            if to is None:
                # what was live before the current version first went live: successive
                # rollbacks walk back through the promotions
                previous = next(
                    (e.previous_version for e in moves
                     if e.version == current and e.previous_version not in (None, current)),
                    None,
                )
                if previous is None:
                    raise Refused("nothing_to_roll_back", "live has no earlier version to roll back to")
                target = previous
            else:
                target = self.resolve_version(to)
                if target not in ever_live:
                    raise Refused(
                        "never_live",
                        f"version {target[:12]} was never live; only a version that was live can be"
                        " restored by rollback (promote it instead)",
                    )
            if target == current:
                raise Refused("already_live", f"version {target[:12]} is live already")
        self._move_live(
            principal.name, "rollback", target, reason, live, suite_sha=self._suite_sha(target, "live")
        )
        return self.version_state(target)

    def disable(self, principal: Principal, policy_id: str, reason: str) -> VersionState:
        with self._refusals(principal, "disable", None, policy_id):
            self._require(principal, "disable", "approver")
            if not reason or not reason.strip():
                raise Refused("reason_required", "disabling a policy needs a reason", 400)
            live = self.environment("live")
            try:
                policy = live.policy_set.policy(policy_id)
            except KeyError:
                raise Refused("policy_not_found", f"policy {policy_id!r} is not live", 404) from None
            if not policy.enabled:
                raise Refused("already_disabled", f"policy {policy_id!r} is already disabled on live")
            if policy.kind == "guard" and not principal.has("admin"):
                raise Refused(
                    "forbidden_role", f"policy {policy_id!r} is a guard: only an admin may disable it", 403
                )
        policies = [p.model_copy(update={"enabled": False}) if p.id == policy_id else p
                    for p in live.policy_set.policies]
        policy_set = build_policy_set(
            policies, live.policy_set.vocabularies, live.policy_set.governance, self.profile
        )
        self._write(policy_set, live.version, self.files_of(live.version))
        self._move_live(
            principal.name, "disable", policy_set.version, reason, live, suite_sha=live.suite_sha256
        )
        return self.version_state(policy_set.version)

    # --- helpers --------------------------------------------------------------------

    def catalog_fields(self) -> dict[str, str] | None:
        targets = self.engine.alias_targets(self.profile.alias)
        if not targets:
            return None
        mapping = self.engine.request("GET", f"/{targets[0]}/_mapping")[targets[0]]
        return linting.mapping_fields_of(mapping)

    @contextmanager
    def pinned_service(self, version: str, *, plan_cache: bool = True) -> Iterator[SearchService]:
        settings = self.settings if plan_cache else without_plan_cache(self.settings)
        service = SearchService(settings, self.engine, self.profile, index=self.index_of(version))
        try:
            yield service
        finally:
            service.close()

    def index_of(self, version: str) -> str:
        entry = self.store.version(version)
        if entry is None or not self.engine.index_exists(entry["index"]):
            raise Refused("unknown_version", f"policy-set version {version[:12]} is not published", 404)
        return str(entry["index"])

    def _require(self, principal: Principal, action: str, *roles: str) -> None:
        if not principal.has(*roles):
            raise Refused(
                "forbidden_role",
                f"{principal.name} may not {action}: it needs the role {' or '.join(roles)}"
                f" (has: {', '.join(sorted(principal.roles)) or 'none'})",
                403,
            )

    @contextmanager
    def _refusals(
        self, principal: Principal, action: str, version: str | None, policy_id: str | None = None
    ) -> Iterator[dict[str, str | None]]:
        """Record a refusal in the history, then let it propagate. The block may set the
        yielded ``["version"]`` once it resolved the version it acts on."""
        subject: dict[str, str | None] = {"version": version}
        try:
            with self.store.one_call():  # the call's rules settle the moves once
                yield subject
        except Refused as refused:
            self.store.record(self.store.new_event(
                principal.name, action, self.clock(), outcome="refused", code=refused.code,
                version=subject["version"], reason=refused.message,
                policy_ids=(policy_id,) if policy_id else (),
            ))
            raise

    def _refuse_revival(self, live: Environment, version: str, allowed: set[str]) -> None:
        """A policy the kill switch disabled on live stays off unless the promoter says so."""
        candidate = self.policy_set(version)
        revived = []
        for policy in live.policy_set.policies:
            if policy.enabled or policy.id in allowed:
                continue
            if not any(p.id == policy.id and p.enabled for p in candidate.policies):
                continue
            killed = self.store.events(env="live", action=LIVE_MOVES, policy_id=policy.id, limit=1)
            if killed and killed[0].action == "disable":
                revived.append(f"{policy.id} (disabled by {killed[0].actor}: {killed[0].reason})")
            else:
                self._refuse_unrecorded_live(live)
        if revived:
            raise Refused(
                "reenables_disabled",
                f"version {version[:12]} turns back on what the kill switch disabled on live: "
                + "; ".join(revived) + ". Disable it in staging too, or promote with reenable",
            )

    def _refuse_unrecorded_live(self, live: Environment) -> None:
        """Refused while the history does not name the version live serves: a move of live
        is in flight (its process has not written its event yet, or died and its lease has
        not passed). The policies it turned off read as turned off by their authors until its
        event is there: a kill switch among them would be undone unnoticed (ADR 0053)."""
        newest = self.store.events(env="live", action=LIVE_MOVES, limit=1)
        if newest and newest[0].version == live.version:
            return
        raise Refused(
            "move_in_flight",
            f"live serves version {live.version[:12]}, which no history event names yet: a move"
            " of live is in flight (its event is not written yet; if its process died, the next"
            " read after its lease records it); nothing was changed: look at the history and"
            " the move journal, and try again",
            details=[{"env": "live", "version": live.version, "index": live.index}],
        )

    def _refuse_untested(self, version: str) -> str:
        """The version's suite sha256, when its last run on that suite passed."""
        suite_sha = self._suite_sha(version)
        suite = self._suite(suite_sha)
        if suite_sha is None or suite is None or not suite.cases:
            raise Refused("no_tests", f"version {version[:12]} has no test cases: write tests first")
        runs = self.store.events(action="test", version=version, limit=1)
        if not runs:
            raise Refused("untested_version", f"version {version[:12]} has not been tested: run its tests")
        run = runs[0]
        if run.suite_sha256 != suite_sha:
            raise Refused(
                "stale_tests",
                f"the last test run of {version[:12]} used another suite ({(run.suite_sha256 or '')[:12]});"
                " its tests changed since: run them again",
            )
        details = run.details or {}
        if not details.get("passed"):
            raise Refused(
                "tests_failed",
                f"the last test run of {version[:12]} failed {details.get('failed')} of"
                f" {details.get('total')} cases",
            )
        return suite_sha

    def _refuse_lint_errors(self, version: str, suite: Suite | None) -> None:
        """``suite``: the one the call's other checks read."""
        errors = [f for f in self._lint(version, suite) if f.severity == "error"]
        if errors:
            raise Refused(
                "lint_errors",
                f"version {version[:12]} has {len(errors)} lint error(s): "
                + "; ".join(f"{f.code} at {f.location}" for f in errors[:5]),
                details=[f.as_json() for f in errors],
            )

    def _suite_sha(self, version: str, env: str | None = None) -> str | None:
        """The suite ``version`` carries in ``env`` (the latest event that put it there), or,
        without ``env``, the suite it is a candidate with: its latest authoring."""
        if env is not None:
            events = self.store.events(env=env, action=AUTHORING + LIVE_MOVES, version=version, limit=1)
            return events[0].suite_sha256 if events else None
        events = self.store.events(action=AUTHORING, version=version, limit=1)
        if events:
            return events[0].suite_sha256
        moves = self.store.events(action=LIVE_MOVES, version=version, limit=1)
        return moves[0].suite_sha256 if moves else None

    def _suite(self, sha256: str | None) -> Suite | None:
        if sha256 is None:
            return None
        data = self.store.suite(sha256)
        return suite_from_json(data) if data is not None else None

    def changes_since_live(self, version: str, live: Environment | None = None) -> list[lineage.Change]:
        """Every authored change between the version now live (or ``live``) and ``version``
        (:mod:`control_plane.lifecycle.lineage`), newest first."""
        if live is None:
            try:
                live = self.environment("live")
            except Refused:
                live = None

        def parent_of(candidate: str) -> str | None:
            entry = self.store.version(candidate)
            return entry.get("parent") if entry else None

        return lineage.lineage_changes(
            version,
            live.version if live else None,
            live.suite_sha256 if live else None,
            parent_of,
            lambda versions: self.store.events(action=lineage.CHANGES, version=versions),
        )

    def _authors(self, version: str, live: Environment | None = None) -> tuple[str, ...]:
        """The candidate's authors: everyone who authored a change between live and it."""
        return lineage.authors(self.changes_since_live(version, live))

    def _draft_base(self) -> Environment:
        """Staging, or live when nothing is staged yet."""
        try:
            return self.environment("staging")
        except Refused:
            return self.environment("live")

    def _redraft(
        self, principal: Principal, base: Environment, policies: list[Policy], reason: str,
        written: tuple[str, ...] = (),
    ) -> VersionState:
        policy_set = build_policy_set(
            policies, base.policy_set.vocabularies, base.policy_set.governance, self.profile,
            written=written,
        )
        suite = self._suite(base.suite_sha256)
        version = self._stage(
            principal.name, "draft", policy_set, suite, "staging", reason, self.files_of(base.version),
            base,
        )
        return self.version_state(version)

    def _write(self, policy_set: PolicySet, parent: str | None, files: Mapping[str, str] | None) -> str:
        try:
            index = policy_store.write_index(
                self.engine, self.prefix, policy_set, analysis=self.profile.policy_analysis()
            )
        except policy_store.AnalysisChanged as changed:
            raise Refused(changed.code, str(changed)) from changed
        self.store.register_version(policy_set.version, index, parent, self.clock(), files)
        return index

    def _stage(
        self,
        actor: str,
        action: str,
        policy_set: PolicySet,
        suite: Suite | None,
        env: str,
        reason: str,
        files: Mapping[str, str] | None = None,
        base: Environment | None = None,
    ) -> str:
        """Write ``policy_set`` and point ``env`` at it, with its event. ``base``: what the
        change was made from (``env`` as the author read it, or live for a first draft), so
        the event's diff says what the author changed, and the alias moves only if ``env`` is
        still where the author read it (else ``concurrent_change``). Without ``base`` (an
        apply, the bootstrap), the move is from ``env`` as read here."""
        current: policy_store.LivePolicySet | None
        if base is not None:
            current = policy_store.LivePolicySet(base.index, base.policy_set) if base.env == env else None
        else:
            current = policy_store.resolve(self.engine, self.prefix, env)
        before = current.policy_set if current else None
        suite_sha = suite.sha256 if suite else None
        if (
            action == "bootstrap"
            and before is not None
            and before.version == policy_set.version
            and self._suite_sha(before.version, env) == suite_sha
            and current is not None
            and policy_store.index_analysis(self.engine, current.index)
            == self.profile.policy_analysis().fingerprint
        ):
            return policy_set.version  # the same set, tests and analysis again: nothing happened
        if suite is not None:
            self.store.save_suite(suite.sha256, suite.as_json())
        origin = base.policy_set if base is not None else before
        index = self._write(policy_set, origin.version if origin else None, files)
        diff = policy_diff(origin, policy_set)
        event = self.store.new_event(
            actor, action, self.clock(), env=env, version=policy_set.version,
            previous_version=before.version if before else None,
            suite_sha256=suite_sha, policy_ids=touched_policies(diff),
            reason=reason, diff=diff | {"summary": summary(diff)},
        )
        self._point_and_record(env, index, current.index if current else None, event)
        return policy_set.version

    def _point_and_record(self, env: str, index: str, previous: str | None, event: Event) -> None:
        """Move ``env``'s alias from ``previous`` (the index every check of this call read)
        to ``index``, then record the event: both, or (the alias moved back) neither. The
        move is a compare-and-swap: when another move won meanwhile, nothing is recorded and
        the call is refused with ``concurrent_change`` naming the version that won.

        The event is written down first, as the move's intent, and the move's own alias call
        marks the intent applied (:mod:`control_plane.lifecycle.intents`): if this process
        dies between the move and the event, whoever reads the history next completes it."""
        alias = policy_store.alias_name(self.prefix, env)
        intent = self.intents.open(env, alias, previous, index, event)
        try:
            policy_store.point_alias(
                self.engine, alias, index, expected=previous, also=self.intents.applies(intent)
            )
        except policy_store.AliasMoved as moved:
            where = ", ".join(moved.current) or "no index"
            self.intents.lost(intent, f"lost the compare-and-swap: {alias} is on {where}")
            raise self._concurrent_change(env, moved, event.version) from moved
        except Exception as error:
            # did the engine make the move (a timeout after it did), or not (and now never)?
            if self.intents.after_failure(intent) != APPLIED:
                if self.intents.marker(intent.intent_id, OPEN) in str(error):
                    raise IntentGivenUp(
                        f"the move of {env} to {(event.version or '')[:12]} outlived its lease"
                        f" ({self.intents.lease_s:g} s) and another process gave it"
                        " up: nothing was moved or recorded; try again",
                    ) from error
                raise
        try:
            self.store.record_once(event)
        except Exception as error:
            # withdrawn only when the engine refused the write (it answered: not written);
            # a write that timed out may still land, late: the move stays applied and a
            # reader records it (op_type=create: once, whichever write comes first)
            refused = _refused(error)
            with suppress(Exception):  # it stays applied: a reader records it after the lease
                if not refused:
                    self.intents.hand_over(intent)  # the next reader records it
                elif self._event_written(event) is False:
                    self.intents.withdraw(intent)
            raise
        self.intents.recorded(intent)
        if self.on_move is not None:
            self.on_move(env)

    def _event_written(self, event: Event) -> bool | None:
        """Whether the event is in the history (None: it could not be read)."""
        try:
            return self.store.has_event(event.event_id)
        except Exception:
            return None

    def _concurrent_change(self, env: str, moved: policy_store.AliasMoved, wanted: str | None) -> Refused:
        won: str | None = None
        if len(moved.current) == 1:
            with suppress(Exception):  # the message names the winner when it can be read
                won = policy_store.read_index(self.engine, moved.current[0]).policy_set.version
        now = f"version {won[:12]}" if won else (", ".join(moved.current) or "no index")
        return Refused(
            "concurrent_change",
            f"{env} changed while this call ran: it now serves {now}, not the version this call"
            f" checked against; nothing was changed or recorded for {(wanted or '')[:12]}:"
            " look at the history and try again",
            details=[{"env": env, "version": won, "indices": moved.current, "expected": moved.expected}],
        )

    def _move_live(
        self,
        actor: str,
        action: str,
        version: str,
        reason: str | None,
        live: Environment,
        suite_sha: str | None = None,
    ) -> None:
        """Move live from ``live`` (what the call's checks read) to ``version``."""
        before = live
        target = policy_store.read_index(self.engine, self.index_of(version))
        diff = policy_diff(before.policy_set, target.policy_set)
        event = self.store.new_event(
            actor, action, self.clock(), env="live", version=version,
            previous_version=before.version,
            suite_sha256=suite_sha, policy_ids=touched_policies(diff),
            reason=reason, diff=diff | {"summary": summary(diff)},
        )
        self._point_and_record("live", target.index, before.index, event)


def _refused(error: BaseException) -> bool:
    """The engine answered that it did not do it (a 4xx other than a request timeout): a
    timeout, a dropped connection or a 5xx leave it unknown (the request may still land)."""
    status = error.status if isinstance(error, EngineError) else None
    return status is not None and 400 <= status < 500 and status != 408


def _problems(error: ValidationError, name: str) -> list[PolicyError]:
    """A policy sent as JSON: each problem with its path inside the document."""
    problems = []
    for detail in error.errors():
        kind = detail["type"]
        code = PYDANTIC_CODES.get(kind) or (kind if kind in ERROR_CODES else "invalid_value")
        where = ".".join(str(part) for part in detail["loc"])
        message = f"{where}: {detail['msg']}" if where else detail["msg"]
        problems.append(PolicyError(code=code, message=message, file=name))
    return problems


def read_directory(
    directory: Path | str, profile: CatalogProfile, progress: Progress | None = None
) -> tuple[PolicySet, dict[str, str]]:
    """A policy directory's set and, from the same read, policy id -> the file (relative to
    ``directory``) that defines it (the version's history keeps it, for export)."""
    locations: dict[str, str] = {}
    policy_set = load_policy_set(
        directory, profile, field_types=field_types_of(profile), locations=locations, progress=progress
    )
    return policy_set, {policy_id: location.rsplit(":", 1)[0] for policy_id, location in locations.items()}

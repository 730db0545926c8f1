"""``/readyz``: is this instance able to serve governed answers right now?

Ready means all of: the catalog alias and the live policies alias each resolve to exactly
one index; the cluster health of those indices is at least yellow (every primary shard is
assigned: a red index fails every search with ``all shards failed``); the live policy set
and the catalog statistics can be read; the audit sink takes records. The whole check runs
under a short deadline (``READINESS_TIMEOUT_S``), so a paused or partitioned engine makes
it answer 503 quickly rather than hang.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from control_plane import deadline, policy_store
from control_plane.api.errors import engine_message
from control_plane.engine import EngineError
from control_plane.service import NoLivePolicySet, SearchService

log = logging.getLogger("govsearch.api")

if TYPE_CHECKING:
    from control_plane.audit.recorder import Recorder

READINESS_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str] = field(default_factory=dict)
    code: str | None = None
    """None when ready; else why not (an error code)"""
    message: str = ""

    @property
    def ready(self) -> bool:
        return self.code is None


class NotReady(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check(service: SearchService, recorder: Recorder, timeout_s: float = READINESS_TIMEOUT_S) -> Readiness:
    """Run every check in order; the first that fails names the reason."""
    checks: dict[str, str] = {}
    try:
        with deadline.bounded(timeout_s):
            _check(service, checks)
    except NotReady as error:
        return Readiness(checks, error.code, str(error))
    except deadline.DeadlineExceeded:
        return Readiness(checks, "engine_timeout", f"the engine did not answer within {timeout_s:g}s")
    except EngineError as error:  # the engine's own text to the log only, as for every 503
        log.warning("not ready (%s): %s", error.code, error)
        return Readiness(checks, error.code, engine_message(error))
    checks["audit"] = recorder.status()
    if checks["audit"] != "ok":  # records held by a failing sink, or the queue full
        message = f"the audit sink does not take records: {checks['audit']}"
        return Readiness(checks, "audit_unavailable", message)
    return Readiness(checks)


def _check(service: SearchService, checks: dict[str, str]) -> None:
    engine = service.engine
    catalog = _one(engine.alias_targets(service.profile.alias), "catalog", service.profile.alias)
    checks["catalog_index"] = catalog
    if service.index:
        policies = service.index
    else:
        alias = policy_store.alias_name(service.settings.policies.index_prefix, service.env)
        policies = _one(engine.alias_targets(alias), "policies", alias)
    checks["policies_index"] = policies
    health = engine.indices_health([catalog, policies], timeout_s=deadline.call_timeout(1.0))
    status = str(health.get("status", "red"))
    checks["engine"] = "ok"
    checks["cluster"] = status
    if status not in ("green", "yellow"):
        raise NotReady(
            "cluster_red",
            f"the catalog and policies indices are {status}: some primary shards are unassigned",
        )
    try:
        live, _ = service.snapshot()
    except NoLivePolicySet as error:
        raise NotReady("no_live_policy_set", str(error)) from error
    checks["policy_set"] = live.policy_set.version
    service.catalog.stats()
    checks["catalog"] = "ok"


def _one(targets: list[str], what: str, alias: str) -> str:
    if not targets:
        code = "no_live_policy_set" if what == "policies" else "catalog_missing"
        raise NotReady(code, f"the {what} alias {alias} points to no index")
    if len(targets) > 1:
        raise NotReady(
            f"{what}_alias_ambiguous",
            f"the {what} alias {alias} points to {len(targets)} indices ({', '.join(targets)}):"
            " nothing is served until it points to one",
        )
    return targets[0]

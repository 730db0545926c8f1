"""Bring an engine to a servable state: the catalog, a live policy set, the personas.

Used by ``govsearch demo``, ``govsearch load-catalog``, ``govsearch policy publish`` and
the test fixtures, so the demo and the tests set up the engine the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from control_plane import policy_store, yaml_aliases
from control_plane.catalog.profile import CatalogProfile, load_profile
from control_plane.catalog_loader import LoadReport, load_catalog, load_purchases
from control_plane.config import Settings, project_path
from control_plane.engine import Engine
from control_plane.loader import Progress, load_policy_set
from control_plane.service import PURCHASES_INDEX, SearchService
from control_plane.shopper_language import field_types_of
from control_plane.times import Clock

resolve = project_path


@dataclass(frozen=True)
class Ready:
    catalog: LoadReport
    policies_index: str
    policy_set_version: str
    purchases: int


def profile_of(settings: Settings) -> CatalogProfile:
    return load_profile(resolve(settings.catalog.profile))


def publish_policies(
    engine: Engine,
    settings: Settings,
    directory: str | Path,
    env: str = "live",
    *,
    clock: Clock,
    reading: Progress | None = None,
) -> tuple[str, str]:
    """Publish a policy directory straight to ``env`` (``live`` or ``staging``): the
    operator's bootstrap path, with no review, recorded in the history (at ``clock``'s
    time) with the directory's tests (so it can be exported and promoted from).
    ``reading``: told how many policy files are read (the CLI's bar)."""
    from control_plane.lifecycle.suite import load_suite
    from control_plane.lifecycle.workflow import Workflow, read_directory

    root = resolve(directory)
    profile = profile_of(settings)
    policy_set, files = read_directory(root, profile, reading)
    workflow = Workflow(settings, engine, profile, clock=clock)
    version = workflow.bootstrap("operator", policy_set, load_suite(root), env, files)
    return workflow.index_of(version), version


def directory_service(engine: Engine, settings: Settings, directory: str | Path) -> SearchService:
    """A search service over a policy directory as it is on disk: pinned to the directory's
    own version index (written if missing, immutable like any); no environment moves."""
    profile = profile_of(settings)
    policy_set = load_policy_set(resolve(directory), profile, field_types=field_types_of(profile))
    index = policy_store.write_index(
        engine, settings.policies.index_prefix, policy_set, analysis=profile.policy_analysis()
    )
    return SearchService(settings, engine, profile, index=index)


def read_personas(path: Path) -> list[dict[str, Any]]:
    document = yaml_aliases.safe_load(path.read_text(encoding="utf-8")) or {}
    rows: list[dict[str, Any]] = []
    personas = document.get("personas", document) if isinstance(document, dict) else document
    for persona in personas:
        for purchase in persona.get("purchases", []):
            last = purchase["last_purchased"]
            if isinstance(last, (date, datetime)):
                last = last.isoformat()
            rows.append(
                {
                    "user_id": persona["id"],
                    "product_id": str(purchase["product_id"]),
                    "count": int(purchase["count"]),
                    "last_purchased": last,
                }
            )
    return rows


def prepare(engine: Engine, settings: Settings, *, clock: Clock) -> Ready:
    profile = profile_of(settings)
    report = load_catalog(engine, profile, resolve(settings.catalog.file))
    index, version = publish_policies(engine, settings, settings.policies.dir, clock=clock)
    purchases = load_purchases(
        engine, PURCHASES_INDEX, read_personas(resolve("data/personas.yaml"))
    )
    return Ready(
        catalog=report, policies_index=index, policy_set_version=version, purchases=purchases
    )

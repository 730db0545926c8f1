"""Lifecycle fixtures: a policies prefix of its own (so promotions here never touch the
demo's live set), keys for a cast of principals, and an app over the real engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.bootstrap import Ready, profile_of, publish_policies
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.lifecycle.keys import KeyStore, Principal
from control_plane.lifecycle.workflow import Workflow
from control_plane.service import SearchService
from control_plane.times import Clock
from tests.e2e.conftest import ready, service, settings  # noqa: F401

CAST: dict[str, list[str]] = {
    "alice": ["author", "approver"],  # writes policies, and approves other people's
    "bob": ["approver"],
    "carol": ["auditor"],
    "dan": ["author"],
    "root": ["admin"],
    "shop": ["search"],
}


@dataclass
class Lifecycle:
    settings: Settings
    engine: Engine
    client: TestClient
    workflow: Workflow
    keys: dict[str, str]
    principals: dict[str, Principal]
    service: SearchService

    def as_(self, name: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[name]}"} if name else {}

    def call(self, method: str, path: str, who: str | None, **kwargs: Any) -> Any:
        return self.client.request(method, path, headers=self.as_(who), **kwargs)


def isolated_settings(base: Settings, prefix: str, tmp_path: Path) -> Settings:
    return base.model_copy(update={
        "policies": base.policies.model_copy(update={"index_prefix": prefix}),
        "auth": base.auth.model_copy(update={"keys_index": f"{prefix}-keys"}),
        "audit": base.audit.model_copy(update={"path": str(tmp_path / "decisions.jsonl")}),
    })


@pytest.fixture()
def lifecycle(
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
    index_prefix: str,
    tmp_path: Path,
    clock: Clock,
) -> Iterator[Lifecycle]:
    local = isolated_settings(settings, index_prefix, tmp_path)
    publish_policies(engine, local, "policies", "live", clock=clock)
    svc = SearchService(local, engine, profile_of(local))
    client = TestClient(create_app(svc, clock=clock), raise_server_exceptions=False)
    store = KeyStore(engine, local.auth.keys_index)
    now = clock()
    created = {name: store.create(name, roles, now) for name, roles in CAST.items()}
    yield Lifecycle(
        settings=local,
        engine=engine,
        client=client,
        workflow=Workflow(local, engine, profile_of(local), clock=clock, on_move=svc.alias_moved),
        keys={name: key for name, (key, _) in created.items()},
        principals={name: principal for name, (_, principal) in created.items()},
        service=svc,
    )
    client.close()
    svc.close()

"""Search services pinned to policy sets published under a test's own index prefix, and
the demo set they are compared with (fixtures, registered by this folder's conftest)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from control_plane import policy_store
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.policy import PolicySet
from control_plane.service import SearchService

Pin = Callable[[PolicySet], SearchService]


@pytest.fixture()
def demo_set(service: SearchService) -> PolicySet:
    """The demo policy set, as published live for the session."""
    return service.snapshot()[0].policy_set


@pytest.fixture()
def pin(engine: Engine, settings: Settings, service: SearchService, index_prefix: str) -> Iterator[Pin]:
    """Publish a policy set under the test's prefix and serve it from a pinned service."""
    made: list[SearchService] = []

    def pinned(policy_set: PolicySet) -> SearchService:
        index = policy_store.write_index(engine, index_prefix, policy_set)
        made.append(SearchService(settings, engine, service.profile, index=index))
        return made[-1]

    yield pinned
    for pinned_service in made:
        pinned_service.close()

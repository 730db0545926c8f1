"""A move intent's lease (ADR 0053) outlasts a move in flight: at least twice the engine
timeout, else the configuration is refused (a shorter lease let another process drop a move
its owner was still making, failing it with nothing wrong)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from control_plane.config import Settings, load_settings


def test_a_lease_shorter_than_two_engine_timeouts_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least twice engine.timeout_s"):
        Settings.model_validate({"engine": {"timeout_s": 5}, "policies": {"move_lease_s": 9.9}})
    assert Settings.model_validate({"engine": {"timeout_s": 5}, "policies": {"move_lease_s": 10}})
    assert Settings().policies.move_lease_s >= 2 * Settings().engine.timeout_s


def test_the_environment_is_checked_too() -> None:
    with pytest.raises(ValidationError, match="move_lease_s"):
        load_settings(None, environ={"GOVSEARCH_POLICIES_MOVE_LEASE": "0"})

"""A move intent's lease (ADR 0053) outlasts a move in flight: never less than twice the
engine timeout (a shorter one let another process drop a move its owner was still making,
failing it with nothing wrong). A shorter configured lease is raised, not refused: a
configuration with a long engine timeout stays valid."""

from __future__ import annotations

from control_plane.config import Settings, load_settings


def test_a_lease_shorter_than_two_engine_timeouts_is_raised_to_them() -> None:
    short = Settings.model_validate({"engine": {"timeout_s": 90}, "policies": {"move_lease_s": 60}})
    assert short.move_lease_s() == 180
    longer = Settings.model_validate({"engine": {"timeout_s": 5}, "policies": {"move_lease_s": 60}})
    assert longer.move_lease_s() == 60
    assert load_settings(None, environ={"GOVSEARCH_POLICIES_MOVE_LEASE": "0"}).move_lease_s() == 10


def test_the_workflow_holds_moves_for_the_raised_lease() -> None:
    from control_plane.bootstrap import profile_of
    from control_plane.engine.opensearch import OpenSearchEngine
    from control_plane.lifecycle.workflow import Workflow
    from control_plane.times import parse_time

    settings = Settings.model_validate({"engine": {"timeout_s": 90}, "policies": {"move_lease_s": 1}})
    engine = OpenSearchEngine("http://127.0.0.1:9", 1.0)  # never asked: building asks nothing
    workflow = Workflow(
        settings, engine, profile_of(settings), clock=lambda: parse_time("2026-12-01T00:00:00Z")
    )
    assert workflow.intents.lease_s == 180

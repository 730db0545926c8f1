"""``bench.answer_bytes`` (ADR 0041): both builders run on the same outcomes, give a CPU
figure each, and a builder that wrote other bytes ends the bench."""

from __future__ import annotations

from typing import Any

import pytest

import bench.answer_bytes as answer_bytes
from control_plane.service import SearchRequest
from tests.unit.test_search_answer import PROFILE, outcome

ANSWERED: list[tuple[SearchRequest, Any]] = [
    (SearchRequest(intent="chocolate"), outcome([{"name": "Dark", "cost": 3}])),
    (SearchRequest(intent="chocolate", explain=True), outcome([{"name": "Milk", "cost": 2.5}, {}])),
]


def test_each_builder_yields_a_cpu_figure_per_answer() -> None:
    figures = answer_bytes.measure(ANSWERED, PROFILE, rounds=2, calls=3)
    assert figures["search_answer_cpu_us"] > 0 and figures["search_response_cpu_us"] > 0
    assert figures["answers"] == 2 and figures["answer_bytes_median"] > 100


def test_different_bytes_end_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_bytes, "search_answer", lambda *args: b"{}")
    with pytest.raises(SystemExit, match="different bytes"):
        answer_bytes.measure(ANSWERED, PROFILE, rounds=1, calls=1)

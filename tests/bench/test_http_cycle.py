"""``bench.http_cycle`` (ADR 0045): each protocol answers every request on a kept-alive
connection and gives a CPU figure, uvicorn's with the access line writes one line per
request, and a protocol that answered less, closed the connection or wrote other access
lines ends the bench."""

from __future__ import annotations

from typing import Any

import pytest

import bench.http_cycle as http_cycle


def test_each_protocol_answers_every_request_and_yields_a_cpu_figure() -> None:
    figures = http_cycle.measure(rounds=1, requests=50)
    assert set(figures["cpu_us_per_request"]) == set(http_cycle.VARIANTS)
    assert all(value > 0 for value in figures["cpu_us_per_request"].values())
    assert figures["requests"] == 50


def test_an_answer_missing_ends_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    monkeypatch.setattr(http_cycle, "answering", silent)
    with pytest.raises(SystemExit, match="answers written"):
        http_cycle.measure(rounds=1, requests=5)


def test_a_closed_connection_ends_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    async def closing(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2700"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": http_cycle.ANSWER})

    monkeypatch.setattr(http_cycle, "answering", closing)
    with pytest.raises(SystemExit, match="closed a keep-alive connection"):
        http_cycle.measure(rounds=1, requests=5)


def test_access_lines_other_than_one_per_request_end_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_cycle, "_access_log", lambda stream: None)  # no line written
    with pytest.raises(SystemExit, match="access lines"):
        http_cycle.measure(rounds=1, requests=5)

"""The base of the wrappers around the real engine (tests/engines.py), without an engine: a
stand-in "real" engine notes what reaches it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control_plane.engine import Engine, EngineError
from tests.engines import DelegatingEngine, Noting


class Real(Engine):
    kind = "elasticsearch"

    def __init__(self) -> None:
        super().__init__("http://real:9200", 7.5)
        self.received: list[tuple[str, str, Any, Any, Any]] = []
        self.closed = False

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        self.received.append((method, path, body, params, timeout_s))
        if method == "HEAD":
            raise EngineError("no such index", status=404)
        return {"answered": path}

    def close(self) -> None:
        self.closed = True


def test_it_sends_every_request_on_unchanged_and_answers_what_the_real_one_answers() -> None:
    real = Real()
    wrapper = DelegatingEngine(real)
    assert (wrapper.url, wrapper.timeout_s, wrapper.kind, wrapper.real) == (real.url, 7.5, real.kind, real)
    answer = wrapper.request("POST", "/x/_search", {"size": 1}, {"routing": "a"}, 2.0)
    assert answer == {"answered": "/x/_search"}
    assert real.received == [("POST", "/x/_search", {"size": 1}, {"routing": "a"}, 2.0)]
    wrapper.close()
    assert not real.closed  # the fixture that made the real engine closes it


def test_the_engines_own_methods_go_through_a_subclass_override() -> None:
    real = Real()
    counting = Noting(real)
    assert counting.index_exists("gone") is False  # the real one's 404, through the wrapper
    assert counting.sent == [("HEAD", "/gone")] and [r[:2] for r in real.received] == [("HEAD", "/gone")]

"""``bench.http``'s throughput slices combined (each variant runs in every slice of its level,
early and late alike): the mean rate, and the CPU per request over every request of all the
slices; and a phase's clients, each of which sends at least one request however short the
phase."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from bench.http import _combined, _metered


def test_two_halves_make_one_phase() -> None:
    halves = [
        {"req_s": 100.0, "service_cpu_ms": 2.0, "engine_cpu_ms": 4.0},
        {"req_s": 300.0, "service_cpu_ms": 1.0, "engine_cpu_ms": 2.0},
    ]
    assert _combined(halves) == {"req_s": 200.0, "service_cpu_ms": 1.25, "engine_cpu_ms": 2.5}


def test_a_half_that_served_nothing_counts_in_the_rate_not_in_the_cpu() -> None:
    halves = [{"req_s": 0.0, "engine_cpu_ms": 9.0}, {"req_s": 50.0, "engine_cpu_ms": 3.0}]
    assert _combined(halves) == {"req_s": 25.0, "engine_cpu_ms": 3.0}


@pytest.fixture()
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server on a free port; the paths it was sent, in order."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_every_client_of_a_phase_over_before_it_started_still_sends_one_request(
    counting_server: tuple[str, list[str]],
) -> None:
    base, seen = counting_server

    def send(client: httpx.Client, intent: str) -> None:
        client.get(f"/{intent}").raise_for_status()

    figures = _metered(send, base, ["a", "b", "c"], 3, 0.0, {})
    assert sorted(seen) == ["/a", "/b", "/c"]  # one each, from its own place in the intents
    assert figures["req_s"] > 0

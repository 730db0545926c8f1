"""The engine client's connection pool (``engine.connections``) against the real engine:
concurrent calls up to the pool size reuse their connections; a pool of one (opensearch-py's
default) makes every concurrent call past the first open and drop a connection of its own."""

from __future__ import annotations

import logging
import threading

import pytest

from control_plane.config import EngineSettings
from control_plane.engine import connect

DISCARDED = "Connection pool is full, discarding connection"


def _concurrent_calls(url: str, connections: int, threads: int) -> None:
    """``threads`` threads calling the engine at once, five calls each."""
    engine = connect(EngineSettings(url=url, timeout_s=30, connections=connections))
    start = threading.Barrier(threads)

    def call() -> None:
        start.wait()
        for _ in range(5):
            engine.request("GET", "/_cluster/health")

    workers = [threading.Thread(target=call) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    engine.close()


@pytest.mark.parametrize(("connections", "discards"), [(8, False), (1, True)])
def test_the_pool_holds_the_concurrent_connections(
    engine_url: str, caplog: pytest.LogCaptureFixture, connections: int, discards: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
        _concurrent_calls(engine_url, connections, threads=8)
    discarded = [r for r in caplog.records if r.getMessage().startswith(DISCARDED)]
    assert bool(discarded) is discards, [r.getMessage() for r in discarded]

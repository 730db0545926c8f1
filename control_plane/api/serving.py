"""How ``govsearch serve`` runs uvicorn: its logging (a plain, cheap access line) and the
API thread pool's size.

The access line keeps uvicorn's text (``INFO:     127.0.0.1:5555 - "GET /healthz HTTP/1.1"
200``) through a plain :class:`logging.Formatter`: uvicorn's own access formatter colours
and looks up the status phrase on every request, about twice the cost on this machine
(bench/RESULTS.md). ``api.access_log: false`` writes none.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio.to_thread
from uvicorn.config import LOGGING_CONFIG

ACCESS_FORMAT = "%(levelname)s:     %(message)s"


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with the plain access formatter."""
    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"] = {"format": ACCESS_FORMAT}
    return config


def size_thread_pool(threads: int) -> None:
    """Size the thread pool the API's synchronous work runs in (anyio's default limiter;
    called in the event loop, at start)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads

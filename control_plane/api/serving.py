"""How ``govsearch serve`` runs uvicorn: its logging (a plain, cheap access line), the
API thread pool's size, and the listening socket of ``--workers N``.

The access line keeps uvicorn's text (``INFO:     127.0.0.1:5555 - "GET /healthz HTTP/1.1"
200``) through a plain :class:`logging.Formatter`: uvicorn's own access formatter colours
and looks up the status phrase on every request, about twice the cost on this machine
(bench/RESULTS.md). ``api.access_log: false`` writes none.

With ``--workers N`` (N > 1) uvicorn's supervisor binds the socket the workers share with
``socket.socket(family)``, leaving its protocol number at 0; asyncio turns ``TCP_NODELAY``
on for an accepted connection only when the socket says ``IPPROTO_TCP``, so every response
after a connection's first waited for the client's delayed ACK (Nagle), about 40 ms on
Linux (uvicorn issue 3149, open). :func:`run_workers` binds the socket itself, as a TCP
socket, and hands it to the same supervisor.
"""

from __future__ import annotations

import copy
import logging
import socket
from typing import Any

import anyio.to_thread
from uvicorn.config import LOGGING_CONFIG, Config
from uvicorn.supervisors import Multiprocess

ACCESS_FORMAT = "%(levelname)s:     %(message)s"


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with the plain access formatter."""
    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"] = {"format": ACCESS_FORMAT}
    return config


def lean_log_records() -> None:
    """Log records without the caller's file and line, thread, process or multiprocessing
    names (the ``logging`` module's documented switches, ``logging._srcfile = None`` among
    them): no format of :func:`log_config` shows them, and the access line is written once
    per request (about a third of its cost was finding the calling frame and naming the
    thread and process). Called by ``govsearch serve`` in the process that serves."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def size_thread_pool(threads: int) -> None:
    """Size the thread pool the API's synchronous work runs in (anyio's default limiter;
    called in the event loop, at start)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A TCP socket bound to ``host:port`` whose protocol is ``IPPROTO_TCP`` (so the event
    loop sets ``TCP_NODELAY`` on every connection it accepts), inheritable by the workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_workers(app: str, *, workers: int, host: str, port: int, **options: Any) -> None:
    """``uvicorn.run(app, workers=workers, ...)`` over :func:`listening_socket`: uvicorn's
    supervisor starts the workers, restarts the ones that die and stops them on a signal."""
    config = Config(app, factory=True, workers=workers, host=host, port=port, **options)
    sock = listening_socket(host, port, config.backlog)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()

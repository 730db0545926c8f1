"""Wrappers around the real engine, for tests and drills that must see or change what is sent
to it (count requests, refuse the Nth bulk, ...): subclass :class:`DelegatingEngine`,
override :meth:`~DelegatingEngine.request` for the requests that matter and hand the rest to
``super().request(...)``. Everything else of :class:`~control_plane.engine.Engine` (search,
aliases, indices) is built on ``request``, so it goes through the override too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control_plane.engine import Engine


class DelegatingEngine(Engine):
    """An :class:`Engine` sending every request on to ``real``, with its URL, timeout and
    kind. Closing it leaves ``real`` open: the fixture that made ``real`` closes it."""

    def __init__(self, real: Engine) -> None:
        super().__init__(real.url, real.timeout_s)
        self.kind = real.kind
        self.real = real

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        return self.real.request(method, path, body, params, timeout_s)

    def close(self) -> None:
        pass


class Noting(DelegatingEngine):
    """The real engine, the method and path of every request it is sent noted in ``sent``,
    in order."""

    def __init__(self, real: Engine) -> None:
        super().__init__(real)
        self.sent: list[tuple[str, str]] = []

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        self.sent.append((method, path))
        return super().request(method, path, body, params, timeout_s)

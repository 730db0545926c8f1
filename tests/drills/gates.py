"""Forcing a race at the exact step: the real engine, with gates.

:class:`GatedEngine` wraps the real engine client. Every request goes to the engine as it
would, except one that a :class:`Gate` picks (by its method, path and body, whichever thread
sends it): that request stops at the gate, before it reaches the engine or after the engine
answered it, until the test opens the gate. A drill makes a race certain this way: it lets
both sides reach the step they race at (both read live, both are about to move the alias),
checks that they did, then lets them through in the order it chose. Nothing is mocked: the
engine answers every request, the compare-and-swap is the engine's.

:func:`gated_api` puts the app's workflow (the one the HTTP API calls) on such an engine;
:func:`send` makes an HTTP call from another thread, so a test can hold one side and act
with the other."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from control_plane import policy_store
from control_plane.engine import Engine
from control_plane.lifecycle.intents import is_marker
from control_plane.lifecycle.workflow import Workflow
from tests.engines import DelegatingEngine
from tests.lifecycle.conftest import Lifecycle

BOUND_S = 60.0
"""the longest a drill waits for a request to reach a gate, or a held request for its gate"""

Picks = Callable[[str, str, Any], bool]
"""(method, path, body) -> whether the gate holds this request"""


@dataclass
class Held:
    """One request stopped at a gate."""

    method: str
    path: str
    body: Any
    opened: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    """set once the request went through (answered or failed) and its caller resumed"""
    error: BaseException | None = None

    def _actions(self) -> list[Mapping[str, Any]]:
        """The call's alias actions but its move intent's marker step (ADR 0053)."""
        actions = self.body.get("actions", []) if isinstance(self.body, Mapping) else []
        return [a for a in actions if not any(is_marker(str(v.get("alias", ""))) for v in a.values())]

    def adds(self) -> list[str]:
        """The indices an ``_aliases`` call adds its alias to."""
        return [a["add"]["index"] for a in self._actions() if "add" in a]

    def expects(self) -> list[str]:
        """What an ``_aliases`` call moves its alias from: the index it names in a
        ``remove`` (not ``*``), or the placeholder a first move consumes (``remove_index``)."""
        actions = self._actions()
        named = [a["remove"]["index"] for a in actions if a.get("remove", {}).get("index", "*") != "*"]
        return named + [a["remove_index"]["index"] for a in actions if "remove_index" in a]

    def open(self) -> None:
        self.opened.set()

    def through(self, timeout_s: float = BOUND_S) -> None:
        """Open the gate for this request and wait until it went through."""
        self.open()
        assert self.done.wait(timeout_s), f"{self.method} {self.path} did not go through"


class Gate:
    """Holds the first ``limit`` requests it picks (``after``: once the engine answered
    them); later ones pass."""

    def __init__(self, picks: Picks, *, after: bool = False, limit: int = 1) -> None:
        self.picks, self.after, self.limit = picks, after, limit
        self.arrived: list[Held] = []
        self._changed = threading.Condition()

    def takes(self, method: str, path: str, body: Any) -> Held | None:
        with self._changed:
            if len(self.arrived) >= self.limit or not self.picks(method, path, body):
                return None
            held = Held(method, path, body)
            self.arrived.append(held)
            self._changed.notify_all()
            return held

    def reached(self, count: int | None = None, timeout_s: float = BOUND_S) -> list[Held]:
        """Wait until ``count`` (default: ``limit``) requests are held here; them, in the
        order they arrived. Fails the drill if they do not come: the race did not happen."""
        count = self.limit if count is None else count
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.arrived) >= count, timeout_s):
                raise AssertionError(f"{len(self.arrived)} of {count} requests reached the gate")
            return list(self.arrived[:count])

    def open_all(self) -> None:
        with self._changed:
            self.limit = len(self.arrived)  # nothing more is held
            for held in self.arrived:
                held.open()


class GatedEngine(DelegatingEngine):
    """The real engine, with gates (see the module)."""

    def __init__(self, real: Engine) -> None:
        super().__init__(real)
        self.gates: list[Gate] = []

    def gate(self, picks: Picks, *, after: bool = False, limit: int = 1) -> Gate:
        gate = Gate(picks, after=after, limit=limit)
        self.gates.append(gate)
        return gate

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        held, gate = None, None
        for gate in self.gates:
            held = gate.takes(method, path, body)
            if held is not None:
                break
        if held is None or gate is None:
            return super().request(method, path, body, params, timeout_s)
        try:
            if not gate.after:
                _wait(held)
            answer = super().request(method, path, body, params, timeout_s)
            if gate.after:
                _wait(held)
            return answer
        except BaseException as error:
            held.error = error
            raise
        finally:
            held.done.set()


def _wait(held: Held) -> None:
    if not held.opened.wait(BOUND_S):
        raise AssertionError(f"{held.method} {held.path} was held and never let through")


# --- what a gate picks ----------------------------------------------------------------


def alias_move(prefix: str, env: str) -> Picks:
    """The ``_aliases`` call that moves ``env``'s alias (the compare-and-swap)."""
    alias = policy_store.alias_name(prefix, env)

    def picks(method: str, path: str, body: Any) -> bool:
        if (method, path) != ("POST", "/_aliases") or not isinstance(body, Mapping):
            return False
        return any(a.get("add", {}).get("alias") == alias for a in body.get("actions", []))

    return picks


def history_write(workflow: Workflow, **fields: Any) -> Picks:
    """The write of a history event whose fields have these values."""
    where = f"/{workflow.store.history}/_doc/"

    def picks(method: str, path: str, body: Any) -> bool:
        if method != "PUT" or not path.startswith(where) or not isinstance(body, Mapping):
            return False
        return all(body.get(name) == value for name, value in fields.items())

    return picks


def catalog_mapping_read(workflow: Workflow) -> Picks:
    """The read of the catalog index's mapping: in an approval, lint's, after the checks
    resolved the version and read its suite, before the approval is recorded."""
    (catalog,) = workflow.engine.alias_targets(workflow.profile.alias)
    wanted = ("GET", f"/{catalog}/_mapping")

    def picks(method: str, path: str, body: Any) -> bool:
        return (method, path) == wanted

    return picks


# --- the API on a gated engine ------------------------------------------------------------


def gated_api(lc: Lifecycle) -> tuple[GatedEngine, Workflow]:
    """Put the HTTP API's workflow on a gated engine (the same settings, profile, clock and
    reload-on-move as the app's own); the engine and the workflow."""
    app = lc.client.app
    current: Workflow = app.state.workflow  # type: ignore[attr-defined]
    gated = GatedEngine(lc.engine)
    workflow = Workflow(
        current.settings, gated, current.profile, clock=current.clock, on_move=current.on_move
    )
    app.state.workflow = workflow  # type: ignore[attr-defined]
    return gated, workflow


_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="drill-call")


def send(lc: Lifecycle, method: str, path: str, who: str, **kwargs: Any) -> Future[Any]:
    """An HTTP call made from another thread: its response, later."""
    return _POOL.submit(lc.call, method, path, who, **kwargs)


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The error in the one error shape, with that status and code."""
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "request_id", "details"}, error
    assert error["code"] == code, error
    return error

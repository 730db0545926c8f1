"""What the drills share: free ports, ``govsearch serve`` subprocesses (running this
checkout's code, :mod:`tests.checkout`), a bounded search load that sorts every answer
(governed, a clean refusal, or a violation) and a readiness poller. Everything runs against
real processes; nothing is mocked."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.checkout import ROOT, checkout_env

GOVSEARCH = str(Path(sys.executable).parent / "govsearch")
INTENTS = ["cheap chocolate", "chocolat sans arachide", "oranges", "chocolate", "orange juice", "creamer"]
GUARDS = {"in-stock-only", "visible-only"}
"""guard policies every served hit must carry: an answer without them is ungoverned"""
CLEAN_REFUSALS = {503, 504}


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_engine_port(nodes: int) -> int:
    """A first HTTP port for ``engine start --nodes N``: it and the next N-1, and the
    transport ports 100 above them, all free (picked at random in the ephemeral range)."""
    for _ in range(200):
        base = random.randrange(20_000, 30_000)
        wanted = [base + i for i in range(nodes)] + [base + 100 + i for i in range(nodes)]
        if all(_bindable(port) for port in wanted):
            return base
    raise RuntimeError("no free port range for the engine")


@dataclass
class Served:
    """One ``govsearch serve`` process."""

    url: str
    process: subprocess.Popen[bytes]
    audit_path: Path
    log: Path
    env: dict[str, str]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self) -> int:
        """End the server and its workers (its process group: it leads one of its own)."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(timeout=10)
        return int(self.process.returncode)

    def _signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, number)


def serve(engine_url: str, workdir: Path, name: str, *, workers: int = 1, **env: str) -> Served:
    """Start ``govsearch serve --workers N`` on a free port against ``engine_url``, in a
    session of its own (so :meth:`Served.stop` ends its workers too), its audit log under
    ``workdir/name``; wait until it answers ``/healthz``."""
    directory = workdir / name
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    audit = directory / "decisions.jsonl"
    environ = {
        **checkout_env(),
        "GOVSEARCH_ENGINE_URL": engine_url,
        "GOVSEARCH_AUDIT_PATH": str(audit),
        "GOVSEARCH_AUDIT_SINK": "jsonl",
        **env,
    }
    log = directory / "serve.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [GOVSEARCH, "serve", "--workers", str(workers), "--port", str(port)],
            cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    served = Served(f"http://127.0.0.1:{port}", process, audit, log, environ)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"govsearch serve exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(served.url + "/healthz", timeout=1).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    served.stop()
    raise RuntimeError(f"govsearch serve did not answer within 60 s: {log.read_text()[-2000:]}")


def wait_until(predicate: Any, bound_s: float, every_s: float = 0.25) -> float | None:
    """Seconds until ``predicate()`` held, or None if it did not within ``bound_s``."""
    started = time.monotonic()
    while time.monotonic() - started < bound_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(every_s)
    return None


def readyz(url: str) -> int:
    try:
        return httpx.get(url + "/readyz", timeout=10).status_code
    except httpx.HTTPError:
        return 0


@dataclass(frozen=True)
class Answer:
    started: float
    """``time.monotonic()`` when the request was sent"""
    latency_s: float
    instance: str
    status: int
    kind: str
    """governed | refused | violation"""
    code: str | None = None
    version: str | None = None
    detail: str = ""


def classify(response: httpx.Response, versions: set[str] | None) -> tuple[str, str | None, str | None, str]:
    """(kind, error code, policy-set version, why a violation is one)."""
    try:
        body = response.json()
    except ValueError:
        return "violation", None, None, f"{response.status_code}: not JSON"
    if response.status_code == 200:
        version = body.get("policy_set_version")
        if not version or (versions is not None and version not in versions):
            return "violation", None, version, f"unknown policy set version {version!r}"
        for hit in body.get("hits", []):
            if not set(hit.get("policies", [])) >= GUARDS:
                return "violation", None, version, f"hit {hit.get('id')} lacks the guard policies"
        return "governed", None, version, ""
    error = body.get("error") if isinstance(body, dict) else None
    shaped = isinstance(error, dict) and {"code", "message", "request_id", "details"} <= set(error)
    if response.status_code in CLEAN_REFUSALS and shaped:
        return "refused", error["code"], None, ""
    return "violation", error.get("code") if isinstance(error, dict) else None, None, (
        f"{response.status_code}: {response.text[:200]}"
    )


@dataclass
class Load:
    """``threads`` clients per instance, searching in a loop until :meth:`stop`."""

    instances: dict[str, str]
    threads: int = 2
    versions: set[str] | None = None
    """the policy-set versions an answer may name (None: any non-empty one)"""
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Load:
        for name, url in self.instances.items():
            for offset in range(self.threads):
                worker = threading.Thread(target=self._run, args=(name, url, offset), daemon=True)
                worker.start()
                self._workers.append(worker)
        return self

    def _run(self, name: str, url: str, offset: int) -> None:
        with httpx.Client(timeout=60) as client:
            i = offset
            while not self._stop.is_set():
                intent = INTENTS[i % len(INTENTS)]
                i += 1
                started = time.monotonic()
                try:
                    response = client.post(url + "/v1/search", json={"intent": intent, "size": 5})
                except httpx.HTTPError as error:
                    self.answers.append(Answer(started, time.monotonic() - started, name, 0, "violation",
                                               detail=f"transport: {error}"))
                    continue
                kind, code, version, detail = classify(response, self.versions)
                self.answers.append(
                    Answer(started, time.monotonic() - started, name, response.status_code, kind, code,
                           version, detail)
                )
                time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=90)

    def since(self, moment: float) -> list[Answer]:
        return [a for a in self.answers if a.started >= moment]

    def figures(self) -> dict[str, Any]:
        statuses = Counter(str(a.status) for a in self.answers)
        codes = Counter(a.code for a in self.answers if a.code)
        kinds = Counter(a.kind for a in self.answers)
        return {
            "requests": len(self.answers),
            "statuses": dict(sorted(statuses.items())),
            "refusal_codes": dict(sorted(codes.items())),
            "governed": kinds["governed"],
            "refused": kinds["refused"],
            "violations": kinds["violation"],
            "max_latency_s": round(max((a.latency_s for a in self.answers), default=0.0), 3),
            "per_instance": {
                name: dict(Counter(str(a.status) for a in self.answers if a.instance == name))
                for name in self.instances
            },
        }

    def violations(self) -> list[Answer]:
        return [a for a in self.answers if a.kind == "violation"]


@dataclass
class ReadinessWatch:
    """Polls ``/readyz`` until stopped: (monotonic time, status) pairs."""

    url: str
    seen: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ReadinessWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.append((time.monotonic(), readyz(self.url)))
            time.sleep(0.25)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def first(self, status: int, after: float) -> float | None:
        return next((t for t, s in self.seen if s == status and t >= after), None)


def audit_records(path: Path) -> list[dict[str, Any]]:
    """The decision records of a JSONL audit log written by processes that stopped cleanly."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def audit_verify(served: Served) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GOVSEARCH, "audit", "verify", "--sink", str(served.audit_path)],
        cwd=ROOT, env=served.env, capture_output=True, text=True, timeout=120, check=False,
    )

"""Agent-gateway fixtures: the real engine fixtures of the e2e suite, and a local
OpenAI-compatible server that records every request and answers scripted completions --
including every malformed answer a hostile or broken endpoint may give (``tests/hostile``):
a raw HTTP body, another content type, a compressed or unsized body, a body dripped out
slowly, a ``usage`` given verbatim or left out, a refusal, a finish reason."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ready, service, settings  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


OMIT = object()
"""``Reply(usage_json=OMIT)``: the answer has no ``usage`` at all"""


@dataclass
class Reply:
    """One scripted answer: a JSON object as the message content (or raw text), after a delay."""

    content: Any = None
    raw: str | None = None
    delay_s: float = 0.0
    status: int = 200
    usage: tuple[int, int] = (40, 6)
    usage_json: Any = None
    """the ``usage`` value verbatim (``OMIT``: none), instead of ``usage``"""
    body: bytes | None = None
    """the whole HTTP body verbatim, instead of a completion"""
    content_type: str = "application/json"
    refusal: str | None = None
    finish_reason: str = "stop"
    gzip: bool = False
    unsized: bool = False
    """sent without ``Content-Length``: the body runs until the connection closes"""
    drip_s: float = 0.0
    """after the headers, one byte of body every ``drip_s`` seconds"""


@dataclass
class FakeLlm:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    default: Reply = field(default_factory=lambda: Reply({"intent": "cheap chocolate"}))

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self) -> Reply:
        return self.replies.pop(0) if self.replies else self.default


def _handler(fake: FakeLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
            reply = fake.next_reply()
            if reply.delay_s:
                time.sleep(reply.delay_s)
            data = _body(reply, body)
            try:
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                if reply.gzip:
                    data = gzip.compress(data)
                    self.send_header("content-encoding", "gzip")
                if not reply.unsized:
                    self.send_header("content-length", str(len(data)))
                self.end_headers()
                self._write(reply, data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _write(self, reply: Reply, data: bytes) -> None:
            if reply.drip_s:
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(reply.drip_s)
            else:
                for start in range(0, len(data), 65_536):
                    self.wfile.write(data[start : start + 65_536])

    return Handler


def _body(reply: Reply, request: dict[str, Any]) -> bytes:
    if reply.body is not None:
        return reply.body
    if reply.status != 200:
        return b'{"error": {"message": "boom"}}'
    content = reply.raw if reply.raw is not None else json.dumps(reply.content)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.refusal is not None:
        message = {"role": "assistant", "content": None, "refusal": reply.refusal}
    payload: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "test"),
        "choices": [{"index": 0, "finish_reason": reply.finish_reason, "message": message}],
        "usage": {
            "prompt_tokens": reply.usage[0],
            "completion_tokens": reply.usage[1],
            "total_tokens": sum(reply.usage),
        },
    }
    if reply.usage_json is OMIT:
        del payload["usage"]
    elif reply.usage_json is not None:
        payload["usage"] = reply.usage_json
    return json.dumps(payload).encode()


@pytest.fixture()
def fake_llm() -> Iterator[FakeLlm]:
    fake = FakeLlm(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture()
def closed_port_url() -> str:
    """A URL on which nothing listens (the port was bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"

"""Agent-gateway fixtures: the real engine fixtures of the e2e suite, and a local
OpenAI-compatible server that records every request and answers scripted completions."""

from __future__ import annotations

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


@dataclass
class Reply:
    """One scripted answer: a JSON object as the message content (or raw text), after a delay."""

    content: Any = None
    raw: str | None = None
    delay_s: float = 0.0
    status: int = 200
    usage: tuple[int, int] = (40, 6)


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
            fake.requests.append({"path": self.path, "body": body})
            reply = fake.next_reply()
            if reply.delay_s:
                time.sleep(reply.delay_s)
            content = reply.raw if reply.raw is not None else json.dumps(reply.content)
            payload = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "test"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": reply.usage[0],
                    "completion_tokens": reply.usage[1],
                    "total_tokens": sum(reply.usage),
                },
            }
            data = json.dumps(payload).encode() if reply.status == 200 else b'{"error": {"message": "boom"}}'
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


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

"""A model endpoint that may answer anything: each malformed answer, through the real
``openai`` client, against the local stub server, behind the real HTTP server (uvicorn).

For each shape: the documented answer (503 ``llm_unavailable``, or an abstention coded
``llm_bad_output``, or the clamped usage), exactly one decision record for the request,
and the next request on the same keep-alive connection to govsearch is served (not reset).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from agent_gateway.gateway import AgentGateway
from agent_gateway.llm import LlmClient
from agent_gateway.settings import GatewaySettings
from control_plane.api.app import create_app
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import LlmSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.agent.conftest import OMIT, FakeLlm, Reply, fake_llm  # noqa: F401
from tests.clocks import FIXED_CLOCK
from tests.e2e.conftest import ready, settings  # noqa: F401

TIMEOUT_S = 1.0
GOOD = Reply({"intent": "cheap chocolate"})
DEEP = 30_000
"""deep enough to break a recursive parser, small enough (60 KB) to pass the size bound"""


def completion(content: Any, **extra: Any) -> bytes:
    """A well-formed completion envelope around ``content``, with ``extra`` keys replaced."""
    payload: dict[str, Any] = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    payload.update(extra)
    return json.dumps(payload).encode()


@dataclass
class Live:
    """govsearch served by uvicorn on an ephemeral port, its records in a JSONL file."""

    url: str
    path: Path
    gateway: AgentGateway

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for _, line in JsonlSink(self.path).lines()]

    def records_of(self, request_id: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["request_id"] == request_id]


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=30))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        thread.join(0.02)
    return server, thread, sock


MakeLive = Callable[..., Live]


@pytest.fixture()
def make_live(tmp_path: Path, engine: Engine, settings: Settings, ready: Ready,  # noqa: F811
              fake_llm: FakeLlm) -> Iterator[MakeLive]:  # noqa: F811
    made: list[tuple[uvicorn.Server, threading.Thread, socket.socket, SearchService, AgentGateway]] = []

    def make(gateway: GatewaySettings | None = None) -> Live:
        path = tmp_path / f"decisions-{len(made)}.jsonl"
        recorder = Recorder(JsonlSink(path), JsonlSink(tmp_path / f"events-{len(made)}.jsonl"),
                            instance_id="hostile", clock=FIXED_CLOCK)
        service = SearchService(settings, engine, profile_of(settings), recorder=recorder)
        app = create_app(service, clock=FIXED_CLOCK)
        llm = LlmClient(LlmSettings(base_url=fake_llm.url, model="m", timeout_s=TIMEOUT_S))
        agent = AgentGateway(service, gateway or GatewaySettings(), llm=llm, clock=FIXED_CLOCK)
        app.state.agent_gateway = agent
        server, thread, sock = _serve(app)
        made.append((server, thread, sock, service, agent))
        return Live(f"http://127.0.0.1:{sock.getsockname()[1]}", path, agent)

    yield make
    for server, thread, sock, service, agent in made:
        server.should_exit = True
        thread.join(10)
        sock.close()
        agent.close()
        service.close()


def local_address(response: httpx.Response) -> Any:
    """The client side of the TCP connection the response came on."""
    return response.extensions["network_stream"].get_extra_info("client_addr")


def ask(client: httpx.Client, message: str = "cheap chocolate please") -> httpx.Response:
    return client.post("/v1/agent/query", json={"message": message, "market": "fr"})


def request_id(response: httpx.Response) -> str:
    body = response.json()
    return str(body["request_id"] if response.status_code == 200 else body["error"]["request_id"])


BAD_OUTPUT = [
    ("deep_body", Reply(body=b"[" * DEEP + b"]" * DEEP), "too_deep"),
    ("deep_100k_body", Reply(body=b"[" * 100_000 + b"]" * 100_000), "too_large"),
    ("deep_content", Reply(raw="[" * DEEP + "]" * DEEP), "too_deep"),
    ("deep_object_body", Reply(body=b'{"a":' * 10_000 + b"1" + b"}" * 10_000), "too_deep"),
    ("not_json_body", Reply(body=b"Sure! Here are all the products."), "not_json"),
    ("html", Reply(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
     "content_type"),
    ("html_with_json_body", Reply(content={"intent": "chocolate"}, content_type="text/html; charset=utf-8"),
     "content_type"),
    ("no_content_type", Reply(content={"intent": "chocolate"}, content_type=""), "content_type"),
    ("huge_declared", Reply(raw="x" * 2_000_000), "too_large"),
    ("huge_unsized", Reply(raw="x" * 2_000_000, unsized=True), "too_large"),
    ("gzip", Reply(content={"intent": "chocolate"}, gzip=True), "compressed"),
    ("string_usage", Reply(GOOD.content, usage_json={"prompt_tokens": "abc", "completion_tokens": "1"}),
     "usage_invalid"),
    ("null_usage", Reply(GOOD.content, usage_json={"prompt_tokens": None, "completion_tokens": None}),
     "usage_invalid"),
    ("bool_usage", Reply(GOOD.content, usage_json={"prompt_tokens": True, "completion_tokens": False}),
     "usage_invalid"),
    ("usage_not_an_object", Reply(GOOD.content, usage_json="lots"), "usage_invalid"),
    ("missing_usage", Reply(GOOD.content, usage_json=OMIT), "usage_invalid"),
    ("nan_usage", Reply(body=completion('{"intent": "chocolate"}').replace(b'"prompt_tokens": 10',
                                                                       b'"prompt_tokens": NaN')), "not_json"),
    ("refusal", Reply(refusal="I can't help with that."), "refusal"),
    ("truncated", Reply(raw='{"intent": "choc', finish_reason="length"), "truncated"),
    ("top_level_list", Reply(body=b"[]"), "shape"),
    ("top_level_string", Reply(body=b'"hello"'), "shape"),
    ("choices_not_a_list", Reply(body=completion("x", choices={"0": 1})), "shape"),
    ("no_choice", Reply(body=completion("x", choices=[])), "no_choice"),
    ("choice_not_an_object", Reply(body=completion("x", choices=["x"])), "shape"),
    ("message_missing", Reply(body=completion("x", choices=[{"index": 0}])), "shape"),
    ("content_an_object", Reply(body=completion({"intent": "chocolate"})), "shape"),
    ("content_a_json_list", Reply(raw='["chocolate"]'), "shape"),
    ("content_not_json", Reply(raw="chocolate, obviously"), "not_json"),
    ("content_wrong_keys", Reply({"intent": "chocolate", "filters": {"in_stock": False}}), "shape"),
    ("content_intent_not_text", Reply({"intent": ["chocolate"]}), "shape"),
]


@pytest.mark.parametrize(("name", "reply", "detail"), BAD_OUTPUT, ids=[c[0] for c in BAD_OUTPUT])
def test_bad_output_abstains_with_one_record_and_the_connection_lives(
    make_live: MakeLive, fake_llm: FakeLlm, name: str, reply: Reply, detail: str,  # noqa: F811
) -> None:
    live = make_live()
    fake_llm.script(reply)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = ask(client)
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["status"], body["reason_code"], body["search"]) == ("abstained", "llm_bad_output", None)
        assert body["extraction"]["refusal_code"] == "llm_bad_output" and f"({detail})" in body["reason"]
        (record,) = live.records_of(request_id(response))
        assert (record["status"], record["reason_code"], record["endpoint"]) == (
            "abstained", "llm_bad_output", "agent")
        assert record["extraction"]["refusal_code"] == "llm_bad_output" and record["error"] is None
        assert record["usage"]["total_tokens"] == body["usage"]["total_tokens"] <= 8_192
        follow = ask(client)  # the same keep-alive connection, a good answer this time
        assert follow.status_code == 200 and follow.json()["status"] == "ok", follow.text
        assert local_address(follow) == local_address(response)
    assert len(live.records()) == 2
    assert all(r["headers"]["user-agent"].startswith("OpenAI/Python") for r in fake_llm.requests)


UNAVAILABLE = [
    ("http_500", Reply(status=500)),
    ("http_500_html", Reply(status=500, body=b"<h1>oops</h1>", content_type="text/html")),
    ("http_503_deep", Reply(status=503, body=b"[" * DEEP + b"]" * DEEP)),
    ("http_429_huge", Reply(status=429, body=b"x" * 2_000_000)),
    ("slow", Reply(GOOD.content, delay_s=TIMEOUT_S * 2)),
    ("drip", Reply(GOOD.content, drip_s=0.02)),  # ~300 bytes over ~6 s: past the whole-answer bound
]


@pytest.mark.parametrize(("name", "reply"), UNAVAILABLE, ids=[c[0] for c in UNAVAILABLE])
def test_unavailable_is_a_503_with_one_record_and_the_connection_lives(
    make_live: MakeLive, fake_llm: FakeLlm, name: str, reply: Reply,  # noqa: F811
) -> None:
    live = make_live()
    fake_llm.script(reply)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = ask(client)
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "llm_unavailable"
        (record,) = live.records_of(request_id(response))
        assert record["status"] == "error" and record["error"]["code"] == "llm_unavailable"
        assert record["error"]["status"] == 503
        follow = ask(client)
        assert follow.status_code == 200 and follow.json()["status"] == "ok", follow.text
        assert local_address(follow) == local_address(response)
    assert len(live.records()) == 2


def test_unavailable_falls_back_to_rules_when_configured(make_live: MakeLive, fake_llm: FakeLlm) -> None:  # noqa: F811
    live = make_live(GatewaySettings(fallback_to_rules=True))
    fake_llm.script(Reply(status=500))
    with httpx.Client(base_url=live.url, timeout=30) as client:
        body = ask(client, "Hi! I'm looking for some cheap chocolate please").json()
    assert body["status"] == "ok" and body["intent"] == "cheap chocolate"
    assert body["extraction"]["method"] == "rules" and "llm_fallback" in body["extraction"]["flags"]


def test_bad_output_falls_back_to_rules_when_configured(make_live: MakeLive, fake_llm: FakeLlm) -> None:  # noqa: F811
    live = make_live(GatewaySettings(on_bad_output="rules"))
    fake_llm.script(Reply(body=b"[" * DEEP + b"]" * DEEP),
                    Reply(GOOD.content, usage_json={"prompt_tokens": "x"}))
    with httpx.Client(base_url=live.url, timeout=30) as client:
        for _ in range(2):
            response = ask(client, "Hi! I'm looking for some cheap chocolate please")
            body = response.json()
            assert body["status"] == "ok" and body["intent"] == "cheap chocolate"
            assert body["extraction"]["method"] == "rules" and "llm_bad_output" in body["extraction"]["flags"]
            assert body["usage"]["total_tokens"] > 0  # the unusable call is still charged its bound
            (record,) = live.records_of(request_id(response))
            assert "llm_bad_output" in record["extraction"]["flags"] and record["status"] == "ok"


def test_absurd_usage_is_clamped_and_locks_no_one_out(make_live: MakeLive, fake_llm: FakeLlm) -> None:  # noqa: F811
    live = make_live(GatewaySettings(tokens_per_day=50_000))
    absurd = {"prompt_tokens": 2e15, "completion_tokens": 2e15, "total_tokens": 4e15}
    fake_llm.script(*[Reply(GOOD.content, usage_json=absurd) for _ in range(3)])
    with httpx.Client(base_url=live.url, timeout=30) as client:
        for _ in range(3):
            response = ask(client)
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["status"] == "ok" and "llm_usage_clamped" in body["extraction"]["flags"]
            charged = body["usage"]["total_tokens"]
            sent = len(json.dumps(fake_llm.requests[-1]["body"]).encode())
            assert 0 < charged <= 8_192 and body["usage"]["prompt_tokens"] <= sent
            (record,) = live.records_of(request_id(response))
            assert record["usage"] == body["usage"]
    assert live.gateway.budgets.tokens_used("address:127.0.0.1") < 50_000


def test_a_record_that_cannot_be_built_leaves_a_minimal_one(
    make_live: MakeLive, fake_llm: FakeLlm, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    from control_plane.audit import recorder as recorder_module

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("a stage returned something the record cannot hold")

    live = make_live()
    monkeypatch.setattr(recorder_module, "_outcome_fields", broken)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = ask(client)
        assert response.status_code == 200 and response.json()["status"] == "ok"
        (record,) = live.records_of(request_id(response))
        assert record["error"]["code"] == "record_incomplete" and "RuntimeError" in record["error"]["message"]
        assert (record["endpoint"], record["status"], record["client"]) == ("agent", "ok", "anonymous")
        monkeypatch.undo()
        follow = ask(client)
        assert follow.status_code == 200 and local_address(follow) == local_address(response)
    assert len(live.records()) == 2


def test_an_intent_the_search_refuses_abstains(make_live: MakeLive, fake_llm: FakeLlm) -> None:  # noqa: F811
    live = make_live()
    fake_llm.script(Reply({"intent": "\ue000\ue001"}))  # private-use only: empty once cleaned
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = ask(client)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "abstained" and body["reason_code"] in ("invalid_intent", "empty")
        (record,) = live.records_of(request_id(response))
        assert record["status"] == "abstained" and record["reason_code"] == body["reason_code"]
        assert ask(client).status_code == 200

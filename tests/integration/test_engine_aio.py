"""The event loop's engine client (``control_plane.engine.aio``, ADR 0030): the real engine's
answers, its failures mapped as the synchronous adapters map them, and the connection
drills (a peer that never answers, one that closes a kept-alive connection while it is
idle, one that closes mid-answer, one that is not there) on real sockets."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from control_plane import deadline
from control_plane.engine import Engine, EngineError, EngineTimeout, EngineUnavailable, counted_requests
from control_plane.engine.aio import AsyncEngine
from tests.drills.harness import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _searches(index: str) -> list[tuple[str, Any]]:
    return [
        (index, {"size": 3, "query": {"match_all": {}}, "sort": [{"_id": "asc"}]}),
        (index, json.dumps({"size": 0, "query": {"match": {"title": "chocolat é"}}}, ensure_ascii=False)),
    ]


def _timeless(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "took"}


def test_msearch_answers_what_the_synchronous_adapter_answers(engine: Engine, engine_url: str) -> None:
    index = "govsearch-aio-test"
    engine.ensure_index(index, {"mappings": {"properties": {"title": {"type": "text"}}}})
    for n in range(5):
        engine.index_document(index, str(n), {"title": f"chocolat é {n}", "big": 2**53 + n})
    engine.refresh(index)
    searches = _searches(index)
    expected = engine.msearch(searches)

    async def run() -> tuple[list[dict[str, Any]], int]:
        client = AsyncEngine(engine_url, 10.0)
        try:
            with counted_requests() as requests:
                first = await client.msearch(searches)
                again = await client.msearch(searches)  # on the kept-alive connection
            assert [_timeless(a) for a in first] == [_timeless(a) for a in again]
            return first, requests[0]
        finally:
            client.close()

    answers, requests = asyncio.run(run())
    assert requests == 2
    assert [_timeless(a) for a in answers] == [_timeless(a) for a in expected]
    assert answers[0]["hits"]["hits"][0]["_source"]["big"] == 2**53  # integers beyond a double's
    engine.delete_index(index)


def test_a_failed_item_and_an_error_status_raise_engine_errors(engine_url: str) -> None:
    async def run() -> None:
        client = AsyncEngine(engine_url, 10.0)
        try:
            with pytest.raises(EngineError) as failed:
                await client.msearch([("govsearch-no-such-index-aio", {"query": {"match_all": {}}})])
            assert failed.value.status == 404 and "no such index" in str(failed.value)
            with pytest.raises(EngineError) as refused:
                await client.request("POST", "/_msearch", b"not json\n", "application/x-ndjson")
            assert refused.value.status == 400
            answer = await client.request("GET", "/")  # the connection is still usable
            assert "version" in answer
        finally:
            client.close()

    asyncio.run(run())


def _serve(handler: Handler, loop: str = "asyncio") -> Callable[[Callable[[str], Awaitable[None]]], None]:
    """Run ``scenario(url)`` against a local server answering with ``handler``, on
    asyncio's loop or uvloop's (what ``govsearch serve`` runs: its timers are coarser)."""

    def run(scenario: Callable[[str], Awaitable[None]]) -> None:
        async def main() -> None:
            server = await asyncio.start_server(handler, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            try:
                await scenario(f"http://127.0.0.1:{port}")
            finally:
                server.close()
                await server.wait_closed()

        if loop == "uvloop":
            uvloop.run(main())
        else:
            asyncio.run(main())

    return run


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head, await reader.readexactly(length)


def _answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body), body,
    )


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_peer_that_never_answers_times_out_and_the_deadline_cuts_it_shorter(loop: str) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(1 << 16)
            await asyncio.sleep(30)
        finally:
            writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 0.3)
        with pytest.raises(EngineTimeout) as timed_out:
            await client.request("GET", "/")
        assert not isinstance(timed_out.value, deadline.DeadlineExceeded)
        patient = AsyncEngine(url, 30.0)
        with deadline.bounded(0.3), pytest.raises(deadline.DeadlineExceeded):
            await patient.request("GET", "/")
        with deadline.bounded(0.0), pytest.raises(deadline.DeadlineExceeded):  # nothing left: no call
            await patient.request("GET", "/")
        client.close()
        patient.close()

    _serve(silent, loop)(scenario)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_kept_connection_that_stops_answering_times_out_and_is_not_kept(loop: str) -> None:
    """The answer's timer (ADR 0044) bounds a request on a kept-alive connection as the
    timeout scope did: the peer answers each connection's first request, then reads the
    next and says nothing. The timed-out connection is closed, never handed to the next
    request (which opens a new one); the request's deadline cuts the wait shorter."""
    connections = iter(range(1000))
    opened: list[int] = []

    async def first_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(next(connections))
        try:
            await _read_request(reader)
            writer.write(_answer(b'{"ok": true}'))
            await writer.drain()
            await _read_request(reader)
            await asyncio.sleep(30)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 0.3)
        assert await client.request("GET", "/") == {"ok": True}  # connection 0, kept
        with pytest.raises(EngineTimeout) as timed_out:  # (the peer would close in 30 s: unavailable)
            await client.request("GET", "/")  # on connection 0: no answer
        assert not isinstance(timed_out.value, deadline.DeadlineExceeded)
        assert await client.request("GET", "/") == {"ok": True}  # connection 1: 0 was not kept
        with deadline.bounded(0.2), pytest.raises(deadline.DeadlineExceeded):
            await client.request("GET", "/")  # on connection 1: no answer, the deadline first
        client.close()

    _serve(first_only, loop)(scenario)
    assert opened == [0, 1]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_request_cancelled_mid_answer_leaves_no_connection_behind_with_its_late_answer(loop: str) -> None:
    """The client gone while the engine is still answering (the request's task cancelled):
    the connection the request was sent on, whose late answer is still to come, is closed,
    never handed to the next request, which opens a new one and reads its own answer; the
    cancellation reaches the caller as a cancellation."""
    connections = iter(range(1000))
    served: list[tuple[int, bytes]] = []

    async def slow_then_fast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = next(connections)
        try:
            while True:
                head, _ = await _read_request(reader)
                path = head.split(b" ", 2)[1]
                served.append((number, path))
                if path == b"/slow":
                    await asyncio.sleep(0.5)
                    writer.write(_answer(b'{"late": true}'))  # on the same connection, too late
                else:
                    writer.write(_answer(b'{"path": "%s"}' % path))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 5.0)
        assert await client.request("POST", "/first", b"{}") == {"path": "/first"}  # connection 0, kept
        pending = asyncio.ensure_future(client.request("POST", "/slow", b"{}"))  # on connection 0
        await asyncio.sleep(0.1)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        assert await client.request("POST", "/after", b"{}") == {"path": "/after"}
        await asyncio.sleep(0.6)  # the late answer has been sent by now
        assert await client.request("POST", "/again", b"{}") == {"path": "/again"}
        client.close()

    _serve(slow_then_fast, loop)(scenario)
    assert served[:2] == [(0, b"/first"), (0, b"/slow")]
    assert [number for number, _ in served[2:]] == [1, 1]  # a new connection, then kept


def test_a_kept_connection_found_closed_is_replaced_once_and_a_cut_answer_is_not_sent_again() -> None:
    """The peer keeps each connection open after its first answer, then, on the next request
    it reads there, closes without answering (``/again``: nothing of the answer came: sent
    once more, on a new connection) or sends half an answer (``/half``: not sent again)."""
    received: list[tuple[int, bytes]] = []
    connections = iter(range(1000))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number, served = next(connections), 0
        try:
            while True:
                try:
                    head, _ = await _read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                path = head.split(b" ")[1]
                received.append((number, path))
                if served and path == b"/again":
                    return  # closed without a byte of the answer
                if served and path == b"/half":
                    writer.write(_answer(b'{"ok": true}')[:-5])
                    await writer.drain()
                    return
                writer.write(_answer(b'{"ok": true}'))
                await writer.drain()
                served += 1
        finally:
            writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 5.0)
        assert await client.request("GET", "/first") == {"ok": True}
        assert await client.request("GET", "/again") == {"ok": True}
        with pytest.raises(EngineUnavailable):
            await client.request("GET", "/half")
        client.close()

    _serve(handler)(scenario)
    assert received == [(0, b"/first"), (0, b"/again"), (1, b"/again"), (1, b"/half")]


def test_requests_in_flight_are_bounded_by_the_connections() -> None:
    open_now, most = [0], [0]

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_now[0] += 1
        most[0] = max(most[0], open_now[0])
        try:
            while True:
                try:
                    await _read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                await asyncio.sleep(0.05)
                writer.write(_answer(b"{}"))
                await writer.drain()
        finally:
            open_now[0] -= 1
            writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 5.0, connections=2)
        assert await asyncio.gather(*(client.request("POST", "/_msearch") for _ in range(8))) == [{}] * 8
        client.close()

    _serve(slow)(scenario)
    assert most[0] == 2


def test_an_answer_outside_2xx_is_an_engine_error_and_only_get_and_post_are_sent() -> None:
    async def moved(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url, 5.0)
        with pytest.raises(EngineError) as redirected:
            await client.request("POST", "/_msearch")
        assert redirected.value.status == 302
        with pytest.raises(ValueError):
            await client.request("HEAD", "/")
        client.close()

    _serve(moved)(scenario)


def test_credentials_in_the_url_are_sent_and_an_absent_engine_is_unavailable() -> None:
    heads: list[bytes] = []

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await _read_request(reader)
        heads.append(head)
        writer.write(_answer(b"{}"))
        await writer.drain()
        writer.close()

    async def scenario(url: str) -> None:
        client = AsyncEngine(url.replace("http://", "http://reader:s%40cret@"), 5.0)
        await client.request("POST", "/_msearch", b"{}\n{}\n", "application/x-ndjson")
        client.close()
        with pytest.raises(EngineUnavailable):
            await AsyncEngine(f"http://127.0.0.1:{free_port()}", 5.0).request("GET", "/")

    _serve(recording)(scenario)
    expected = base64.b64encode(b"reader:s@cret").decode()
    assert f"Authorization: Basic {expected}".encode() in heads[0]
    assert b"Content-Type: application/x-ndjson" in heads[0]

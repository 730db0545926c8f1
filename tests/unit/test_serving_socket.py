"""``govsearch serve --workers N`` binds its listening socket itself (control_plane.api.serving):
uvicorn's supervisor socket has protocol 0, so asyncio left Nagle on for every accepted
connection and each keep-alive response after the first waited for the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket

import pytest

from control_plane.api.serving import listening_socket


async def _accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of the connection an asyncio server accepts on ``listener``."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        host, port = listener.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        value = await asyncio.wait_for(accepted, 10)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


def test_the_workers_socket_is_tcp_and_its_connections_get_nodelay() -> None:
    listener = listening_socket("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP
    assert listener.get_inheritable()
    assert asyncio.run(_accepted_nodelay(listener)) != 0


def test_a_taken_port_is_refused_and_nothing_leaks() -> None:
    taken = listening_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    with pytest.raises(OSError):
        listening_socket("127.0.0.1", port)
    taken.close()

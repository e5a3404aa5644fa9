"""Read deadlines on a real socket: a slow body gets a 408, a half-sent head is cut."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from parrot_parents.bots.manager import BotManager
from parrot_parents.server.app import create_app
from parrot_parents.server.protocol import make_runner


@pytest.fixture
async def address(manager: BotManager) -> AsyncIterator[tuple[str, int]]:
    """A served app with a 1 s body timeout and a 1 s header timeout."""
    runner = make_runner(create_app(manager, body_timeout_s=1.0), header_timeout_s=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield host, port
    finally:
        await runner.cleanup()


async def _until_closed(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection (or the test gives up)."""
    async with asyncio.timeout(seconds):
        return await reader.read()


async def test_a_slow_body_gets_408_and_the_connection_closes(
    address: tuple[str, int],
) -> None:
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(
            b"POST /api/v1/bots/hr/context HTTP/1.1\r\nHost: test\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        await writer.drain()
        received = await _until_closed(reader, 6)
    finally:
        writer.close()
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert b"the body was not received within 1 seconds" in received


async def test_a_half_sent_head_is_closed(address: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(b"POST /api/v1/bots/hr/context HTTP/1.1\r\nHost: te")
        await writer.drain()
        received = await _until_closed(reader, 6)
    finally:
        writer.close()
    assert received == b""


async def test_a_prompt_request_is_unaffected(address: tuple[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        await writer.drain()
        received = await _until_closed(reader, 6)
    finally:
        writer.close()
    assert received.startswith(b"HTTP/1.1 200 ")
    assert received.endswith(b'{"status": "ok"}')

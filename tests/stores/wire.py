"""A pass-through proxy that counts round trips on the PostgreSQL wire protocol.

Every request a client makes ends with a message the server must answer before the
client goes on: ``Sync`` (``S``, end of an extended-protocol exchange: prepare, bind,
execute) or ``Query`` (``Q``, a simple query such as ``BEGIN``). Counting those frontend
messages counts round trips, whatever the driver does above the wire. Bytes are
forwarded unchanged in both directions.

It can also play a server that ends sessions: :meth:`cut_all` closes every open connection
(a restart, as clients see it), and :meth:`refuse_next` closes new connections as soon as
they arrive (a postmaster still ending its sessions after a backend crashed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from urllib.parse import parse_qs, urlparse

__all__ = ["RoundTripProxy"]


class RoundTripProxy:
    """Listens on 127.0.0.1 and forwards to the server of ``dsn``.

    Attributes:
        round_trips: ``Sync`` and ``Query`` messages seen since the last :meth:`reset`.
        kinds: the type bytes of those messages, in order.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.round_trips = 0
        self.kinds: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: set[asyncio.StreamWriter] = set()
        self._refuse = 0

    def reset(self) -> None:
        self.round_trips = 0
        self.kinds = []

    def cut_all(self) -> None:
        """Close every connection open now, without a word to the client."""
        for writer in list(self._clients):
            writer.close()

    def refuse_next(self, count: int) -> None:
        """Close the next ``count`` connections before the server sees them."""
        self._refuse = count

    async def start(self) -> str:
        """Start listening; returns the DSN that goes through the proxy."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        url = urlparse(self.dsn)
        user = url.username or "postgres"
        password = f":{url.password}" if url.password else ""
        database = url.path.lstrip("/") or "postgres"
        return f"postgresql://{user}{password}@127.0.0.1:{port}/{database}?ssl=disable"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        url = urlparse(self.dsn)
        host = parse_qs(url.query).get("host", [url.hostname or "localhost"])[0]
        port = url.port or 5432
        if host.startswith("/"):
            return await asyncio.open_unix_connection(os.path.join(host, f".s.PGSQL.{port}"))
        return await asyncio.open_connection(host, port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refuse > 0:
            self._refuse -= 1
            writer.close()
            return
        self._clients.add(writer)
        up_reader, up_writer = await self._open_upstream()
        down = asyncio.ensure_future(self._pipe(up_reader, writer))
        self._tasks.add(down)
        try:
            await self._client_to_server(reader, up_writer)
        finally:
            self._clients.discard(writer)
            up_writer.close()
            await down

    async def _client_to_server(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        # The startup packet has no type byte: int32 length, then the body.
        try:
            header = await reader.readexactly(4)
            (length,) = struct.unpack("!i", header)
            writer.write(header + await reader.readexactly(length - 4))
            while True:
                kind = await reader.readexactly(1)
                header = await reader.readexactly(4)
                (length,) = struct.unpack("!i", header)
                body = await reader.readexactly(length - 4)
                if kind in (b"S", b"Q"):
                    self.round_trips += 1
                    self.kinds.append(kind.decode())
                writer.write(kind + header + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

"""pgvector's binary format on asyncpg connections, and what a read connection needs.

Vectors travel in pgvector's binary format (pgvector-python's ``Vector`` encoding) rather
than an ~8 KB text literal per 384-d vector for the server to parse.
:func:`register_vector_codec` installs the codec on a connection (its encoder takes an
array, a list, a ``Vector`` or pgvector's text form); :func:`install` does it on an
engine's every new connection, :func:`ensure_codec` lazily; :class:`QueryVector` binds a
query vector as ``$1::VECTOR(d)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.types import UserDefinedType

__all__ = [
    "CODEC_KEY",
    "QueryVector",
    "encode_vector",
    "ensure_codec",
    "install",
    "register_vector_codec",
]

try:  # pgvector-python >= 0.4
    from pgvector import Vector
except ImportError:  # 0.3.x, which langchain-postgres pins
    from pgvector.utils import Vector  # type: ignore[no-redef,import-not-found,unused-ignore]  # 0.3.x only

# What each version's own asyncpg codec decodes to, so that its SQLAlchemy type reads it:
# 0.3.x returns a numpy array, later versions a ``Vector``.
_decode = getattr(Vector, "_from_db_binary", None) or Vector.from_binary

#: Key in a pooled connection's ``info``: True once the codec is registered on it.
CODEC_KEY = "parrot_parents.vector_codec"


def encode_vector(value: Any) -> bytes:
    """pgvector's binary form of a vector given as ndarray, list, ``Vector`` or text."""
    if isinstance(value, str):
        value = Vector.from_text(value)
    elif not isinstance(value, Vector):
        value = Vector(value if isinstance(value, list) else np.asarray(value, dtype=np.float32))
    binary: bytes = value.to_binary()
    return binary


async def register_vector_codec(driver_connection: Any) -> bool:
    """Register the binary ``vector`` codec on an asyncpg connection.

    Returns:
        False when the database has no ``vector`` type yet (the extension is created
        later); True otherwise.
    """
    schema = await driver_connection.fetchval(
        "SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
        " WHERE t.typname = 'vector' ORDER BY n.nspname = 'public' DESC LIMIT 1"
    )
    if schema is None:
        return False
    await driver_connection.set_type_codec(
        "vector",
        schema=schema,
        encoder=encode_vector,
        decoder=_decode,
        format="binary",
    )
    return True


def _on_connect(dbapi_connection: Any, record: Any) -> None:
    record.info[CODEC_KEY] = dbapi_connection.run_async(register_vector_codec)


def install(engine: AsyncEngine) -> None:
    """Register the codec on every connection ``engine`` opens from now on (idempotent)."""
    sync_engine = engine.sync_engine
    if sync_engine.dialect.driver == "asyncpg" and not event.contains(
        sync_engine, "connect", _on_connect
    ):
        event.listen(sync_engine, "connect", _on_connect)


async def ensure_codec(conn: AsyncConnection) -> None:
    """Register the codec on ``conn``'s connection unless it already has it."""
    if not conn.info.get(CODEC_KEY):
        raw = await conn.get_raw_connection()
        conn.info[CODEC_KEY] = await register_vector_codec(raw.driver_connection)


class QueryVector(UserDefinedType[Any]):
    """A vector bound in pgvector's binary format (needs :func:`ensure_codec`): an ndarray,
    a list or a ``Vector`` goes to the codec as it is, never formatted as text."""

    cache_ok = True
    render_bind_cast = True

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def get_col_spec(self, **kw: Any) -> str:
        return "VECTOR" if self.dim is None else f"VECTOR({int(self.dim)})"

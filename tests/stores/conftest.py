"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table


@pytest.fixture
async def sql_store(pg_dsn: str, embeddings: Any) -> AsyncIterator[PgVectorStore]:
    """A connected store on a fresh collection whose BM25 is computed in SQL (the
    ``sql`` backend, which every PostgreSQL has), dropped after the test."""
    s = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings, lexical_backend="sql")
    await s.connect()
    try:
        yield s
    finally:
        try:
            await s.drop()
        finally:
            await s.close()

"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import fresh_store


@pytest.fixture
async def sql_store(pg_dsn: str, embeddings: Any) -> AsyncIterator[PgVectorStore]:
    """A connected store on a fresh collection whose BM25 is computed in SQL (the ``sql``
    backend, which every PostgreSQL has), dropped after the test."""
    async with fresh_store(pg_dsn, embeddings, lexical_backend="sql") as s:
        yield s


@pytest.fixture
async def textsearch_store(pg_dsn: str, embeddings: Any) -> AsyncIterator[PgVectorStore]:
    """A connected store on a fresh collection ranked by pg_textsearch's ``bm25`` index
    (asked for by name: ``auto`` skips the embedded server's 1.0.0), dropped after."""
    async with fresh_store(pg_dsn, embeddings, lexical_backend="pg_textsearch") as s:
        yield s

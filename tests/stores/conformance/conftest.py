"""Backends under test: every conformance test runs once per backend.

A third backend joins by adding a name to ``BACKENDS``, a branch to ``_open`` and its
row to ``CLAIMS`` in ``test_protocols.py``: a store class (the :class:`AbstractStore`
interface plus the protocols of :mod:`parrot_parents.stores.protocols` it declares, at
least ``ReplaceDocument``, ``SourceLookup`` and ``RowCount``) and its parent searcher
(:func:`parrot_parents.stores.backends.parent_searcher_for`). Milvus runs on
Milvus Lite in a temporary file and is skipped when pymilvus is not installed.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from parrot_parents.stores.abstract import AbstractStore
from tests.conftest import unique_table

BACKENDS = ["postgres", "milvus"]
HAS_MILVUS = importlib.util.find_spec("pymilvus") is not None


@pytest.fixture(scope="session")
def milvus_uri() -> str:
    """One Milvus Lite file for the session; every test uses its own collections."""
    if not HAS_MILVUS:
        pytest.skip("pymilvus is not installed (pip install 'parrot-parents[milvus]')")
    return str(Path(tempfile.mkdtemp(prefix="parrot-parents-milvus-")) / "milvus.db")


StoreFactory = Callable[..., AbstractStore]


@pytest.fixture(params=BACKENDS)
async def make_store(
    request: pytest.FixtureRequest, pg_dsn: str, embeddings: Any
) -> AsyncIterator[StoreFactory]:
    """``make_store(**kwargs)``: a fresh collection on the backend, dropped after."""
    name = request.param
    made: list[Any] = []

    def _open(**kwargs: Any) -> AbstractStore:
        kwargs.setdefault("embedding", embeddings)
        if name == "postgres":
            from parrot_parents.stores.postgres import PgVectorStore

            store: Any = PgVectorStore(dsn=pg_dsn, table=unique_table("conf"), **kwargs)
        else:
            from parrot_parents.stores.milvus import MilvusStore

            uri = request.getfixturevalue("milvus_uri")
            store = MilvusStore(uri, unique_table("conf"), **kwargs)
        made.append(store)
        return store

    try:
        yield _open
    finally:
        for store in made:
            try:
                await store.drop()
            finally:
                await store.close()

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from langchain_core.documents import Document
from sqlalchemy import event

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.parents import AbstractParentSearcher, InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore


@contextmanager
def count_statements(store: PgVectorStore) -> Iterator[list[str]]:
    seen: list[str] = []

    def listener(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", listener)


async def _hierarchy(store: PgVectorStore) -> None:
    await store.add_documents(
        [
            Document(
                page_content="Whole doc A.",
                metadata={
                    "document_id": "a",
                    "is_full_document": True,
                    "start_index": 0,
                    "end_index": 12,
                },
            ),
            Document(
                page_content="Slice of B.",
                metadata={
                    "document_id": "b",
                    "document_type": "parent_chunk",
                    "start_index": 0,
                    "end_index": 11,
                },
            ),
            Document(
                page_content="Child of A.",
                metadata={
                    "document_id": "a",
                    "parent_document_id": "a#doc:0-12",
                    "start_index": 0,
                    "end_index": 11,
                },
            ),
        ]
    )


async def test_fetch_returns_parents_keyed_by_child_parent_ids(store: PgVectorStore) -> None:
    await _hierarchy(store)
    searcher = InTableParentSearcher(store=store)
    got = await searcher.fetch(["a#doc:0-12", "b#p:0-11", "a#doc:0-12"])
    assert set(got) == {"a#doc:0-12", "b#p:0-11"}
    assert got["a#doc:0-12"].page_content == "Whole doc A."
    assert got["b#p:0-11"].metadata["document_type"] == "parent_chunk"


async def test_fetch_is_one_statement(store: PgVectorStore) -> None:
    await _hierarchy(store)
    searcher = InTableParentSearcher(store=store)
    with count_statements(store) as seen:
        await searcher.fetch(["a#doc:0-12", "b#p:0-11", "missing"])
    assert len(seen) == 1
    assert "ANY" in seen[0].upper() or " IN " in seen[0].upper()


async def test_missing_ids_and_children_are_absent(store: PgVectorStore) -> None:
    await _hierarchy(store)
    got = await InTableParentSearcher(store=store).fetch(["nope", "a#c:0-11"])
    assert got == {}


async def test_empty_input_touches_nothing(store: PgVectorStore) -> None:
    searcher = InTableParentSearcher(store=store)
    with count_statements(store) as seen:
        assert await searcher.fetch([]) == {}
    assert seen == []


async def test_health_check(store: PgVectorStore) -> None:
    assert await InTableParentSearcher(store=store).health_check() is True


def test_needs_a_pgvector_store() -> None:
    with pytest.raises(ConfigurationError, match="needs a PgVectorStore"):
        InTableParentSearcher(store=object())  # type: ignore[arg-type]


async def test_default_health_check_of_the_interface() -> None:
    class Empty(AbstractParentSearcher):
        async def fetch(self, parent_ids):
            return {}

    assert await Empty().health_check() is True

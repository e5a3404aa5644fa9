"""A partitioned store never lets one document span two values of its partition key, on
any write path: a delete of one tenant's document would otherwise remove another's rows."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from tests.stores.test_partitions import _keyed, child_row


def _row(row: str, tenant: Any = None, document_id: str = "pay") -> Document:
    """Row ``row`` (a digit) of ``document_id``, of ``tenant`` (None: no value)."""
    given = {} if tenant is None else {"tenant": tenant}
    body = f"Salaries are paid on the 25th (row {row})."
    return child_row(document_id, body, start=100 * int(row), **given)


async def _tenants(store: PgVectorStore) -> list[Any]:
    rows = await store.similarity_search("salaries", limit=10, search_mode="lexical")
    return sorted((r.metadata.get("tenant", "none") for r in rows), key=repr)


async def test_every_write_path_refuses_moving_a_document_to_another_value(
    pg_dsn: str, embeddings: Any
) -> None:
    async with _keyed(pg_dsn, embeddings, "partmove") as store:
        await store.add_documents([_row("0", "globex")])
        moves = {
            "add a row": lambda: store.add_documents([_row("1", "acme")]),
            "overwrite its row": lambda: store.add_documents([_row("0", "acme")]),
            "replace": lambda: store.replace_document("pay", [_row("0", "acme")]),
            "replace, no value": lambda: store.replace_document("pay", [_row("0")]),
            "batch": lambda: store.replace_documents([("pay", [_row("2", 1)], None, None)]),
        }
        for how, move in moves.items():
            with pytest.raises(ConfigurationError, match="stored under tenant 'globex'"):
                await move()
            assert await _tenants(store) == ["globex"], how
        # One new document whose rows give it two values is refused as a whole.
        with pytest.raises(ConfigurationError, match="two values of tenant"):
            await store.add_documents([_row("0", "a", "new"), _row("1", "b", "new")])
        # What keeps the value passes: a row of the same tenant, a row without one, a
        # replace under the same tenant; and a document that had none may be given one.
        await store.add_documents([_row("1", "globex"), _row("2")])
        await store.replace_document("pay", [_row("0", "globex"), _row("1", "globex")])
        await store.add_documents([_row("0", None, "leave")])
        await store.replace_document("leave", [_row("0", "acme", "leave")])
        assert await _tenants(store) == ["acme", "globex", "globex"]
        # Deleting it first is how a document moves.
        await store.delete("pay")
        await store.add_documents([_row("0", "acme")])
        assert await _tenants(store) == ["acme", "acme"]

"""PgVectorStore.document_rows: one document's hierarchy for the inspector's document view."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.postgres import PgVectorStore

SECTION = "Pay is monthly. Overtime is paid with the next salary. Payslips are online. "


async def test_rows_of_a_three_level_document_in_order(store: PgVectorStore, tmp_path) -> None:
    (tmp_path / "long.md").write_text(SECTION * 60, encoding="utf-8")  # 4560 characters
    (tmp_path / "short.md").write_text("A short note about leave.", encoding="utf-8")
    loader = TextLoader(tmp_path, child_chunk_size=200, embedding=store.embedding)
    await loader.ingest(
        store,
        parent_chunk_threshold_tokens=1000,
        parent_chunk_size_tokens=1000,
        parent_chunk_overlap_tokens=100,
    )
    statements: list[str] = []

    def listener(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", listener)
    try:
        rows = await store.document_rows("long.md")
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", listener)
    assert len(statements) == 1 and "long.md" not in statements[0]  # a bound parameter

    kinds = [r.kind for r in rows]
    n_parents = kinds.count("parent_chunk")
    assert n_parents >= 5 and kinds == ["parent_chunk"] * n_parents + ["child"] * (
        len(rows) - n_parents
    )
    parents, children = rows[:n_parents], rows[n_parents:]
    assert [p.start_index for p in parents] == sorted(p.start_index for p in parents)
    assert [c.start_index for c in children] == sorted(c.start_index for c in children)
    parent_ids = {p.id for p in parents}
    for child in children:
        assert child.parent_document_id in parent_ids
        assert child.length == child.end_index - child.start_index
    assert sum(1 for _ in rows) == await _count(store, "long.md")
    # Another document's rows never leak in; an unknown document has none.
    short = await store.document_rows("short.md")
    assert [r.kind for r in short] == ["parent", "child"]
    assert await store.document_rows("missing.md") == []


async def _count(store: PgVectorStore, document_id: str) -> int:
    """The document's own rows: its parents and children, not the indexed rows of the
    ingestion strategy (no document view shows them)."""
    from sqlalchemy import text

    from parrot_parents.stores.records.markers import NOT_INDEXED_PREDICATE

    async with store.engine.connect() as conn:
        result = await conn.execute(
            text(
                f"SELECT count(*) FROM {store.table} WHERE cmetadata->>'document_id' = :d"
                f" AND {NOT_INDEXED_PREDICATE}"
            ),
            {"d": document_id},
        )
        return int(result.scalar_one())


async def test_document_id_must_be_a_string(store: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError):
        await store.document_rows("")
    with pytest.raises(ConfigurationError):
        await store.document_rows(3)  # type: ignore[arg-type]

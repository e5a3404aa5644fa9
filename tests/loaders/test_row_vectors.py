"""An indexed row built from its child (the default strategy's "Document / Section /
child") gets its vector at embedding time, from the same step as the child: its header
read alone plus the child read in its parent (late chunking), or the row read alone
without late chunking. The store embeds nothing at write time, and the model reads each
text once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table

GUIDE = (
    "# Payroll guide\n\n## Schedule\n\n"
    + "Salaries are paid on the last working day of each month by bank transfer. " * 4
    + "It reaches most accounts the same afternoon.\n\n## Questions\n\n"
    + "Ask the payroll office about a missing payment within five working days. " * 4
)
FINGERPRINT = "parrot-parents model fingerprint"
NOTES = "# Notes\n\n" + "The cafeteria opens at eight and closes at three on Fridays. " * 6


class CountingEmbeddings(SentenceTransformerEmbeddings):
    """The real model, counting the texts it embeds one by one (``encode``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str], *, batch_size: int | None = None) -> np.ndarray:
        self.calls.append(list(texts))
        return super().encode(texts, batch_size=batch_size)


async def _rows(store: PgVectorStore) -> list[tuple[str, str, np.ndarray]]:
    """``(indexed child id, row text, stored vector)`` of every indexed row."""
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        found = await conn.execute(
            text(
                f"SELECT cmetadata->>'indexes', document, embedding::text "
                f"FROM {store.qualified_name} WHERE cmetadata->>'document_type' = 'indexed'"
            )
        )
        return [(r[0], r[1], np.array(json.loads(r[2]), dtype=np.float32)) for r in found]


async def _children(store: PgVectorStore) -> dict[str, tuple[str, dict[str, Any]]]:
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        found = await conn.execute(
            text(
                f"SELECT id, document, cmetadata FROM {store.qualified_name} "
                "WHERE (cmetadata->>'is_chunk')::boolean"
            )
        )
        return {r[0]: (r[1], r[2]) for r in found}


@pytest.fixture
async def counted(pg_dsn: str) -> Any:
    loader_model, store_model = CountingEmbeddings(), CountingEmbeddings()
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("rv"), embedding=store_model)
    await store.connect()
    try:
        yield loader_model, store_model, store
    finally:
        await store.drop()
        await store.close()


async def _ingest(tmp_path: Path, loader_model: Any, store: Any, **kw: Any) -> None:
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    (tmp_path / "notes.md").write_text(NOTES, encoding="utf-8")
    await TextLoader(tmp_path, embedding=loader_model, **kw).ingest(store)


async def test_row_vector_is_its_header_plus_its_child_in_context(
    counted: Any, tmp_path: Path
) -> None:
    loader_model, _, store = counted
    await _ingest(tmp_path, loader_model, store)
    rows = await _rows(store)
    children = await _children(store)
    assert rows and len(rows) == len(children)
    late = LateChunkingEmbedder(loader_model)
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        found = await conn.execute(
            text(f"SELECT id, document, cmetadata->>'start_index' FROM {store.qualified_name}")
        )
        parents = {r[0]: (r[1], int(r[2] or 0)) for r in found}
    for child_id, row_text, stored in rows:
        child_text, meta = children[child_id]
        assert row_text.endswith(child_text)  # the lexical side keeps the row's text
        alone = loader_model.model.encode([row_text], normalize_embeddings=True)[0]
        header = row_text[: -len(child_text)].strip()
        head = loader_model.model.encode([header], normalize_embeddings=True)[0]
        parent, parent_start = parents[meta["parent_document_id"]]
        start = meta["start_index"] - parent_start
        in_context = late.embed_spans([(parent, [(start, start + len(child_text))])])[0][0]
        expected = head + in_context
        expected /= np.linalg.norm(expected)
        assert float(stored @ expected) >= 0.999
        assert float(stored @ alone) < 0.995  # not the row embedded alone


@pytest.mark.parametrize("late_chunking", [True, False])
async def test_store_embeds_nothing_and_each_row_is_read_once(
    counted: Any, tmp_path: Path, late_chunking: bool
) -> None:
    loader_model, store_model, store = counted
    await _ingest(tmp_path, loader_model, store, late_chunking=late_chunking)
    rows = await _rows(store)
    assert store_model.calls == []  # every vector came with the rows written
    # The model contract's fingerprint text aside, the texts embedded one by one.
    calls = [c for c in loader_model.calls if not c[0].startswith(FINGERPRINT)]
    embedded = [t for call in calls for t in call]
    if late_chunking:
        # Each distinct header once; the children are read in their parents.
        children = await _children(store)
        headers = {text[: -len(children[c][0])].strip() for c, text, _ in rows}
        assert sorted(embedded) == sorted(headers)
    else:
        assert sorted(embedded) == sorted(r[1] for r in rows)  # each row once, nothing else
    assert len(calls) == 1  # both documents: one batch, one call

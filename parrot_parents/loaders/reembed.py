"""``reindex --model NAME``: re-embed a whole collection with another model, resumably.

The one way to change a collection's model
(:mod:`parrot_parents.stores.postgres.collections.model_contract`). The pass first records
the new model as "being re-embedded from" the old one, so every embedding search and other
write is refused until it ends; then it rebuilds the documents from their stored text in id
order, ``batch_size`` at a time (one transaction per batch), moving the record's cursor.
A killed pass resumes after the cursor; a failing document stops the pass before it. It
refuses to start while documents lack a documents row, or for another dimension.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Unpack

from sqlalchemy import exists, select

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.abstract import AbstractLoader, ParentSizes
from parrot_parents.loaders.reindex import rebuild
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.model_contract import fingerprint
from parrot_parents.stores.postgres.collections.schema import meta_field
from parrot_parents.stores.postgres.connections.engine import store_errors

__all__ = ["ReembedReport", "reembed"]


@dataclass
class ReembedReport:
    """What a ``reindex --model`` pass did."""

    #: The new model, described (name, fingerprint, dimension).
    model: str = ""
    #: The model it replaces (None when the collection was that model already).
    previous: str | None = None
    reembedded: int = 0
    batches: int = 0
    finished: bool = False
    #: The last document id re-embedded (the pass resumes after it).
    last_id: str | None = None
    failed: dict[str, str] = field(default_factory=dict)


async def reembed(
    loader: AbstractLoader,
    store: PgVectorStore,
    *,
    batch_size: int = 16,
    max_batches: int | None = None,
    on_batch: Callable[[ReembedReport], None] | None = None,
    **sizes: Unpack[ParentSizes],
) -> ReembedReport:
    """Rebuild every document of ``store`` with ``loader``'s model and settings (parent
    sizes in characters, see :class:`~.abstract.ParentSizes`), and record that model as the
    collection's (see the module docstring).

    ``max_batches`` stops after that many batches (the collection stays refused until a
    later run finishes). ``report.finished`` says whether the pass is complete.

    Raises:
        ConfigurationError: ``batch_size`` below 1, or documents without a documents row.
        SchemaMismatchError: the new model has another dimension than the collection.
        StoreError: the database is unavailable.
    """
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
    engine, _ = await store.ready()
    target = await asyncio.to_thread(fingerprint, loader.processor.embedding)
    contract = store.model_contract
    record = await contract.record(engine, fresh=True)
    report = ReembedReport(model=target.describe())
    if record is not None and record.model.same_model(target) and not record.reembedding:
        report.finished = True  # already this model's vectors: nothing to rewrite
        return report
    await _refuse_unrebuildable(store)
    record = await contract.begin_reembed(engine, target)
    assert record is not None and record.reembed_from is not None
    report.previous = record.reembed_from.describe()
    cursor = record.cursor
    while max_batches is None or report.batches < max_batches:
        records = await store.stale_documents([], after=cursor, limit=batch_size)
        if not records:
            await contract.advance_reembed(engine, cursor, done=True)
            contract.reembedding = False
            report.finished = True
            break
        failed = await rebuild(loader, store, records, **sizes)
        report.batches += 1
        for r in records:
            # A failed document is reported under its source, else its id (the loader's name).
            if (r.source or r.document_id) in failed:
                report.failed.update(failed)
                break
            report.reembedded += 1
            cursor = r.document_id
        await contract.advance_reembed(engine, cursor, done=False)
        report.last_id = cursor
        if on_batch is not None:
            on_batch(report)
        if report.failed:
            break
    return report


async def _refuse_unrebuildable(store: PgVectorStore) -> None:
    """Refuse a pass that could not rewrite every vector: rows with a vector whose
    document has no documents row (nothing to rebuild it from)."""
    engine, table = await store.ready()
    docs = store.documents.table
    orphan = (
        select(meta_field(table, "document_id"))
        .where(table.c.embedding.is_not(None))
        .where(~exists().where(docs.c.document_id == meta_field(table, "document_id")))
        .limit(1)
    )
    async with store_errors(f"reading {store.qualified_name}"), engine.connect() as conn:
        found = (await conn.execute(orphan)).scalar_one_or_none()
    if found is not None:
        raise ConfigurationError(
            f"document {found!r} of collection {store.table!r} has no row in its documents "
            "table, so its vectors cannot be rebuilt with another model",
            hint=f"run `parrot-parents migrate --collection {store.table}` first, or delete "
            "such documents",
        )

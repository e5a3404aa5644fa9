"""``reindex --stale``: re-chunk the documents stored under another chunk policy.

Documents come from the collection's documents table
(:mod:`parrot_parents.stores.postgres.collections.documents`),
never from the files: the stored text, the reader that produced it, and for HTML and PDF
the structure found then (Markdown is parsed again from the text). They are taken in id
order, ``batch_size`` at a time; each document is replaced in one transaction, together
with its documents row, which then carries the new policy version. So an interrupted run
loses nothing and the next run resumes with the documents still stale. A document that
fails is reported and left stale (the run goes on past it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Unpack

from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.abstract import AbstractLoader, ParentSizes
from parrot_parents.loaders.structure.reading import STRUCTURE_KEY, reader_for, structure_of
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.postgres.collections.documents import DocumentRecord
from parrot_parents.stores.protocols import DocumentTable

__all__ = [
    "READERS",
    "ReindexReport",
    "rebuild",
    "reindex_stale",
    "stored_document",
]

READERS = ("text", "markdown", "html", "pdf")


@dataclass
class ReindexReport:
    """What a ``reindex --stale`` pass did."""

    policy: str = ""
    reindexed: int = 0
    batches: int = 0
    finished: bool = False
    last_id: str | None = None
    failed: dict[str, str] = field(default_factory=dict)


def stored_document(record: DocumentRecord) -> Document:
    """The ``Document`` a loader rebuilds a stored document's rows from."""
    meta: dict[str, Any] = dict(record.metadata.get("row_metadata") or {})
    meta["document_id"] = record.document_id
    if record.source is not None:
        meta["source"] = record.source
    # A backfilled document has no recorded reader: its file name tells.
    reader = str(record.metadata.get("reader") or reader_for(record.source or ""))
    if reader in ("html", "pdf") and isinstance(record.metadata.get(STRUCTURE_KEY), dict):
        meta[STRUCTURE_KEY] = record.metadata[STRUCTURE_KEY]
    elif reader == "markdown":
        meta[STRUCTURE_KEY] = structure_of(record.source_text, "markdown")
    return Document(page_content=record.source_text, metadata=meta)


async def rebuild(
    loader: AbstractLoader,
    store: AbstractStore,
    records: list[DocumentRecord],
    **sizes: Unpack[ParentSizes],
) -> dict[str, str]:
    """Rebuild stored documents from their text with ``loader`` (even when unchanged),
    replacing their rows.

    Returns:
        ``{name: reason}`` of the documents of ``records`` that failed (the loader's
        report names a document by its source, else its id).
    """
    failed_before = set(loader.report.failed)
    await loader.chunk_documents(
        [stored_document(r) for r in records], vector_store=store, skip_unchanged=False, **sizes
    )
    return {k: v for k, v in loader.report.failed.items() if k not in failed_before}


async def reindex_stale(
    loader: AbstractLoader,
    store: AbstractStore,
    *,
    batch_size: int = 16,
    max_batches: int | None = None,
    on_batch: Callable[[ReindexReport], None] | None = None,
    **sizes: Unpack[ParentSizes],
) -> ReindexReport:
    """Re-chunk, with ``loader``'s settings and these parent sizes (characters, see
    :class:`~.abstract.ParentSizes`), every document of ``store`` whose policy version is
    not the one they give.

    Raises:
        ConfigurationError: ``batch_size`` below 1, or a store without a documents table
            (:class:`~parrot_parents.stores.protocols.DocumentTable`).
        StoreError: the database is unavailable.
    """
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
    if not isinstance(store, DocumentTable):
        raise ConfigurationError(
            f"{type(store).__name__} keeps no documents table", hint="use the postgres store"
        )
    policy = loader.policy(vector_store=store, **sizes)
    report = ReindexReport(policy=policy.version())
    versions = [policy.version(r) for r in READERS]
    while max_batches is None or report.batches < max_batches:
        records = await store.stale_documents(versions, after=report.last_id, limit=batch_size)
        if not records:
            report.finished = True
            break
        failed = await rebuild(loader, store, records, **sizes)
        report.failed.update(failed)
        report.reindexed += len(records) - len(failed)
        report.batches += 1
        report.last_id = records[-1].document_id
        if on_batch is not None:
            on_batch(report)
    return report

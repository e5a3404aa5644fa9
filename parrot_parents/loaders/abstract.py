"""Base class of the loaders: read sources, build the hierarchy, write it to a store."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import shlex
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Unpack

import numpy as np
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError, ModelLoadError, StoreError
from parrot_parents.loaders import defaults
from parrot_parents.loaders.bulk import bulk_writes, wants_bulk_load
from parrot_parents.loaders.extractive import ExtractiveIndexer
from parrot_parents.loaders.hierarchy import (
    HIERARCHY_OWNED,
    DocumentHierarchy,
    LateChunkingProcessor,
    ProcessorOptions,
    validate_parent_sizes,
)
from parrot_parents.loaders.indexing import RowIndexer, mark_row_prefixes, row_vectors
from parrot_parents.loaders.pipeline import DEFAULT_QUEUE_SIZE, pipelined
from parrot_parents.loaders.policy import ChunkPolicy
from parrot_parents.loaders.progress import (
    EMBEDDING,
    LOADING_MODEL,
    IngestProgress,
    as_progress,
)
from parrot_parents.loaders.report import IngestReport, LoaderOptions, ParentSizes
from parrot_parents.loaders.structure.reading import (
    STRUCTURE_KEY,
    reader_for,
    split_structure,
    structure_of,
)
from parrot_parents.loaders.structure.tree import Structure
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.partition_keys import keep_value, same_value
from parrot_parents.stores.postgres.collections.documents import DocumentRecord, DocumentState
from parrot_parents.stores.protocols import (
    ContentLookup,
    DocumentTable,
    IndexedRows,
    ModelChecked,
    Partitioned,
    ReplaceDocument,
    SourceLookup,
)
from parrot_parents.stores.records.ids import content_sha256, document_identity, named_by_content
from parrot_parents.stores.records.values import check_document_id, clean_text, normalize_metadata

__all__ = [
    "DEFAULT_INDEXER",
    "AbstractLoader",
    "IngestReport",
    "LoaderOptions",
    "ParentSizes",
    "wants_bulk_load",
]

logger = logging.getLogger(__name__)

#: ``indexer=DEFAULT_INDEXER``: the package's default strategy
#: (:data:`~parrot_parents.loaders.defaults.DEFAULT_STRATEGY`) on a store that can search
#: indexed rows, none on one that cannot; what ``parrot-parents ingest`` does.
DEFAULT_INDEXER: Literal["default"] = "default"

#: Batches embedded at once during an ingest. One forward pass at a time leaves the cores
#: idle between its operations: on 2 CPU cores, two late-chunking passes in two threads
#: ran 1.3-1.4x the tokens per second of one (docs/performance.md, "Ingest").
EMBED_WORKERS = 2


#: A batch out of the model's stage: documents kept, documents finished, rows by document id.
_Batch = tuple[list[DocumentHierarchy], int, Mapping[str, Sequence[Document]]]


@dataclass
class _Run:
    """One :meth:`AbstractLoader.chunk_documents` call, as its stages share it."""

    store: AbstractStore | None
    indexer: RowIndexer | None
    events: IngestProgress | None
    sizes: ParentSizes
    policy: ChunkPolicy
    states: Mapping[str, DocumentState]
    skip_unchanged: bool = False
    partition_key: str | None = None
    #: The row metadata of the stored documents (with a partition key only).
    stored_metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    #: Documents (as the report names them) that failed in this call.
    failed: set[str] = field(default_factory=set)
    records: dict[str, DocumentRecord] = field(default_factory=dict)
    hierarchies: list[DocumentHierarchy] = field(default_factory=list)
    out: list[Document] = field(default_factory=list)


class AbstractLoader(ABC):
    """Loads documents and turns them into the parent/child hierarchy.

    Args:
        child_chunk_size, child_chunk_overlap, late_chunking, embedding, section_parents,
        preamble, document_layer: how documents are cut and embedded, as
            :class:`~parrot_parents.loaders.hierarchy.LateChunkingProcessor` takes them
            (sizes in characters); the defaults are :mod:`parrot_parents.loaders.defaults`:
            children of 400 characters without overlap, late chunking, section parents
            and preambles on, no document layer, all-MiniLM-L6-v2.
        indexer: an ingestion strategy's :class:`~parrot_parents.loaders.indexing.RowIndexer`
            adding indexed rows to each document's write (it needs a store with
            :class:`~parrot_parents.stores.protocols.IndexedRows`); None writes the
            hierarchy alone (``plain``). The default, :data:`DEFAULT_INDEXER`, is the
            package's default strategy
            (:class:`~parrot_parents.loaders.extractive.ExtractiveIndexer`) on a store
            that can search indexed rows, none on one that cannot, as
            ``parrot-parents ingest`` does.
    """

    def __init__(
        self,
        *,
        indexer: RowIndexer | Literal["default"] | None = DEFAULT_INDEXER,
        **options: Unpack[ProcessorOptions],
    ) -> None:
        if isinstance(indexer, str) and indexer != DEFAULT_INDEXER:
            raise ConfigurationError(
                f"indexer must be a RowIndexer, None or {DEFAULT_INDEXER!r}, got {indexer!r}"
            )
        self.indexer = ExtractiveIndexer() if isinstance(indexer, str) else indexer
        self._default_indexer = isinstance(indexer, str)
        self.report = IngestReport()
        # The document each entry of the report's ``failed`` and ``unchanged`` is about
        # (None: unknown), since a name (a source, a position) may be another document's
        # in a later call.
        self._failed_ids: dict[str, str | None] = {}
        self._unchanged_ids: dict[str, str] = {}
        self.processor = LateChunkingProcessor(**options)

    @abstractmethod
    def load(self) -> list[Document]:
        """Read the sources; one ``Document`` per source with ``metadata["document_id"]``."""

    async def chunk_documents(
        self,
        documents: Sequence[Document],
        vector_store: AbstractStore | None = None,
        parent_chunk_threshold_tokens: int = defaults.DEFAULT_THRESHOLD,
        parent_chunk_size_tokens: int = defaults.DEFAULT_PARENT_SIZE,
        parent_chunk_overlap_tokens: int = defaults.DEFAULT_PARENT_OVERLAP,
        *,
        progress: IngestProgress | Callable[[int], object] | None = None,
        batch_documents: int = 8,
        skip_unchanged: bool = False,
        bulk_load: bool = False,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> list[Document]:
        """Build the 2- or 3-level hierarchy of ``documents`` (sizes in characters).

        Args:
            documents: source documents; ``metadata["document_id"]``, else
                ``Document.id``, else ``metadata["source"]`` names each one (so an edited
                text with the same source replaces its earlier version); a hash of the
                text otherwise, with a warning in ``self.report.warnings`` that an edited
                text will be stored as a new document
                (:func:`~parrot_parents.stores.records.ids.document_identity`).
            vector_store: when given, children are embedded and every document's rows
                replace its previous rows in one transaction each.
            parent_chunk_threshold_tokens: documents longer than this many characters get
                3 levels (default 16000).
            parent_chunk_size_tokens: parent_chunk length in characters (default 4000).
            parent_chunk_overlap_tokens: overlap of neighbouring parent_chunks in
                characters (default 200); must be smaller than the size.
            progress: an :class:`~parrot_parents.loaders.progress.IngestProgress`, told
                when the model starts and ends loading, each document's embedding as it
                goes (per document, or per step of at most 2,000 characters of its
                children, whichever is finer) and each batch stored; or a plain callable,
                called with the number of documents finished after each batch.
            batch_documents: documents embedded together, and written in one transaction
                when the store has a documents table
                (:class:`~parrot_parents.stores.protocols.DocumentTable`; a batch the
                database refuses is written again document by document, so only the
                faulty one fails).
            skip_unchanged: with a store that keeps a documents table, leave out (and list
                in ``self.report.unchanged``) the documents whose text, source, metadata
                and chunk policy version are those stored; default False (``ingest`` turns
                it on).
            bulk_load: defer the store's vector index for this load and build it once at
                the end (:class:`~parrot_parents.stores.protocols.BulkLoad`, PostgreSQL;
                ignored by other stores); for a new or empty collection. The build time
                is ``self.report.index_build_seconds``. Default False.
            queue_size: embedded batches waiting for the writer (default 2); the model
                embeds the next batch while the database writes one.

        Returns:
            Parents and children of all documents as ``Document``s (parents first per
            document); children carry ``is_chunk`` and ``parent_document_id``.

        Every document is checked at the boundary, before any model or SQL work: text
        with NUL, control characters or lone surrogates is cleaned (same length, so offsets
        stay exact) and reported in ``self.report.warnings``; metadata must be JSON-able
        (datetimes become ISO 8601); ids are at most 1024 bytes. A document that fails a
        check, the model or the write is listed in ``self.report.failed`` with the reason,
        and every other document of the call is still stored. In a collection with a
        partition key, so is a document stored under one value of the key that this call
        gives another value or none (a stored document without a value may be given one).

        Raises:
            ConfigurationError (``ValueError``): bad sizes, e.g. overlap >= size.
            ModelMismatchError: the store's collection holds another model's vectors
                than this loader's (nothing is written).
            StoreError: the database is unavailable (``unavailable=True``).
        """
        sizes: ParentSizes = {
            "parent_chunk_threshold_tokens": parent_chunk_threshold_tokens,
            "parent_chunk_size_tokens": parent_chunk_size_tokens,
            "parent_chunk_overlap_tokens": parent_chunk_overlap_tokens,
        }
        validate_parent_sizes(
            parent_chunk_threshold_tokens, parent_chunk_size_tokens, parent_chunk_overlap_tokens
        )
        indexer = self.indexer_for(vector_store)
        if indexer is not None and _without_indexed_rows(vector_store):
            raise ConfigurationError(
                f"{type(vector_store).__name__} cannot search indexed rows, which this "
                "ingestion strategy writes",
                hint="use the PostgreSQL store, or a free strategy (plain, parent-document, "
                "sentence-window, hierarchical)",
            )
        policy = self.policy(**sizes, vector_store=vector_store)
        if vector_store is not None:
            # A writer opens the store as one (creating the collection when missing), so
            # that the reads before its first write find the collection.
            await vector_store.connect()
        key = (
            vector_store.collection_partition_key()
            if isinstance(vector_store, Partitioned)
            else None
        )
        ids = [_document_id(d) for d in documents if isinstance(d, Document)]
        states: Mapping[str, DocumentState] = {}
        if skip_unchanged and isinstance(vector_store, DocumentTable):
            states = await vector_store.document_states(ids)
        kept: Mapping[str, Mapping[str, Any]] = {}
        if key is not None and isinstance(vector_store, Partitioned):
            kept = await vector_store.stored_row_metadata(ids)
        run = _Run(
            vector_store,
            indexer,
            as_progress(progress),
            sizes,
            policy,
            states,
            skip_unchanged=skip_unchanged,
            partition_key=key,
            stored_metadata=kept,
        )
        for i, doc in enumerate(documents):
            self._build(run, doc, _name(doc, i))
        skipped = len(documents) - len(run.hierarchies)
        if run.events is not None and skipped:
            # refused or unchanged: finished, not stored
            run.events.advance(skipped)
            run.events.stored(skipped)
        async with bulk_writes(vector_store, bulk_load, self.report):
            # The model embeds batch k+1 while batch k is written (a bounded queue).
            await pipelined(
                self._embedded(run, batch_documents),
                functools.partial(self._store, run),
                maxsize=queue_size,
            )
        self.report.windowed_children += self.processor.windowed_children
        self.processor.windowed_children = 0
        if run.indexer is not None:
            self.report.strategy = run.indexer.report()
        return run.out

    #: The spec's (FEAT-128) name for :meth:`chunk_documents`.
    _chunk_with_late_chunking = chunk_documents

    def _fail(self, run: _Run, name: str, reason: str, document_id: str | None) -> None:
        self.report.failed[name] = reason
        self._failed_ids[name] = document_id
        run.failed.add(name)

    def _settle(self, run: _Run, name: str, document_id: str, *, unchanged: bool) -> None:
        """Report document ``document_id`` (named ``name``) as stored as given: written, or
        ``unchanged``. A loader's report adds up its calls, so an earlier call's failure of
        this document leaves ``failed`` (a failure in this call, of another version of it,
        stays), and a written document leaves ``unchanged``."""
        if name not in run.failed and self._failed_ids.get(name) == document_id:
            self.report.failed.pop(name, None)
            del self._failed_ids[name]
        if unchanged:
            if self._unchanged_ids.get(name) != document_id or name not in self.report.unchanged:
                self.report.unchanged.append(name)
            self._unchanged_ids[name] = document_id
        elif self._unchanged_ids.get(name) == document_id:
            del self._unchanged_ids[name]
            if name in self.report.unchanged:  # absent when the caller replaced the report
                self.report.unchanged.remove(name)

    def _build(self, run: _Run, doc: Document, name: str) -> None:
        """Check and split one document into ``run``; a document refused or unchanged from
        its stored state is reported instead."""
        known: str | None = None
        try:
            if not isinstance(doc, Document):
                raise ConfigurationError(f"expected a langchain Document, got {type(doc).__name__}")
            text, warnings = clean_text(doc.page_content)
            metadata, structure = split_structure(doc.metadata)
            document_id = known = check_document_id(_document_id(doc))
            if structure is None and _named_markdown(metadata, document_id):
                # The text of a Markdown file given as a Document is read as ingest reads
                # the file: its headings make its sections, so both store the same rows.
                structure = structure_of(text, "markdown")
            metadata = normalize_metadata(metadata)
            record = _record(document_id, text, metadata, structure, run.policy)
            stored = run.states.get(document_id)
            if run.partition_key is not None:
                given = run.records.get(document_id)
                for earlier in (
                    run.stored_metadata.get(document_id),
                    None if given is None else given.row_metadata,
                ):
                    if earlier is not None:
                        keep_value(run.partition_key, document_id, earlier, metadata)
            if run.skip_unchanged and record.same_as(stored):
                self._settle(run, name, document_id, unchanged=True)
                return
            hierarchy = self.processor.build_hierarchy(
                text, document_id, metadata, structure=structure, **run.sizes
            )
        except ConfigurationError as exc:
            self._fail(run, name, str(exc), known)
            return
        except Exception as exc:  # a splitter or metadata surprise fails this one only
            self._fail(run, name, f"{type(exc).__name__}: {exc}", known)
            return
        # document_id names the document; the others are the hierarchy's own.
        owned = sorted(k for k in metadata if k in HIERARCHY_OWNED and k != "document_id")
        if owned:
            warnings.append(
                f"metadata {', '.join(map(repr, owned))}: keys the hierarchy writes "
                "itself; the values given were not stored (rename them to keep them)"
            )
        if named_by_content(doc.metadata or {}, doc.id):
            warnings.append(
                f"no document_id or source: stored as {document_id!r}, named by its "
                "content, so an edited text will be stored as a new document beside this "
                'one (give metadata["source"] or metadata["document_id"] to name it)'
            )
        if warnings:
            self.report.warnings.setdefault(name, []).extend(warnings)
        run.names[document_id] = name
        run.records[document_id] = record
        run.hierarchies.append(hierarchy)

    async def _embedded(self, run: _Run, batch_documents: int) -> AsyncIterator[_Batch]:
        """The model's stage: each batch embedded (and indexed), in a worker thread."""
        if run.hierarchies and run.store is not None:
            # The load can take longer than the rest of a small ingest: say so first.
            if run.events is not None:
                run.events.stage(LOADING_MODEL)
            await asyncio.to_thread(self.processor.warm_up)
            if run.events is not None:
                run.events.stage(EMBEDDING)
        if run.hierarchies and isinstance(run.store, ModelChecked):
            # After every input is checked, before any vector is made: the collection
            # must hold this model's vectors (or none yet).
            await run.store.check_model(self.processor.embedding, writing=True)
        # EMBED_WORKERS batches are embedded at once, yielded in order: one forward
        # pass at a time leaves CPU cores idle between its operations.
        running: collections.deque[asyncio.Task[_Batch]] = collections.deque()
        try:
            for start in range(0, len(run.hierarchies), batch_documents):
                batch = run.hierarchies[start : start + batch_documents]
                running.append(asyncio.create_task(self._prepare(run, batch)))
                if len(running) >= EMBED_WORKERS:
                    yield await running.popleft()
            while running:
                yield await running.popleft()
        finally:
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _prepare(self, run: _Run, batch: list[DocumentHierarchy]) -> _Batch:
        """One batch indexed and embedded."""
        done = len(batch)
        if run.store is None:
            if run.events is not None:
                run.events.advance(done)  # nothing to embed without a store
            return batch, done, {}
        await self._warn_on_replaced_sources(run, batch)
        # Rows first: a row built from its child (header + child) gets its vector in the
        # child's embedding step, so the store embeds nothing and each text is read once
        # alone (see embed_hierarchies).
        extra = await run.indexer.index_rows(batch) if run.indexer else {}
        for h in batch:
            mark_row_prefixes(h, extra.get(h.document_id, ()))
        return await self._embed_isolated(run, batch), done, extra

    async def _store(self, run: _Run, item: _Batch) -> None:
        """The database's stage: the batch written, one transaction per batch."""
        batch, done, _ = item
        if run.store is not None:
            batch = await self._write_batch(run, run.store, item)
        for h in batch:
            rows = h.documents()
            run.out.extend(rows)
            self._settle(run, run.names[h.document_id], h.document_id, unchanged=False)
            self.report.documents += 1
            children = sum(1 for row in rows if row.metadata.get("is_chunk"))
            self.report.children += children
            self.report.parents += len(rows) - children
        if run.events is not None:
            run.events.stored(done)

    async def _write_batch(
        self, run: _Run, store: AbstractStore, item: _Batch
    ) -> list[DocumentHierarchy]:
        """Write a batch in one transaction when the store can; the documents written.

        When the batch's transaction fails (nothing of it is kept), its documents are
        written one by one, so a faulty document fails alone and is reported.
        """
        batch, _, extra = item
        if isinstance(store, DocumentTable) and len(batch) > 1:
            try:
                await store.replace_documents([_item(run, h, extra) for h in batch])
            except (ConfigurationError, StoreError) as exc:
                if isinstance(exc, StoreError) and exc.unavailable:
                    raise  # an outage: the next documents would fail the same way
                logger.info("writing a batch failed; writing its documents one by one")
            else:
                self.report.indexed += sum(len(extra.get(h.document_id, ())) for h in batch)
                return batch
        written = []
        for h in batch:
            try:
                await _write(store, _item(run, h, extra))
            except (ConfigurationError, StoreError) as exc:
                if isinstance(exc, StoreError) and exc.unavailable:
                    raise
                self._fail(run, run.names[h.document_id], str(exc), h.document_id)
                continue
            written.append(h)
            self.report.indexed += len(extra.get(h.document_id, ()))
        return written

    def indexer_for(self, vector_store: AbstractStore | None) -> RowIndexer | None:
        """The indexer that writes into ``vector_store``: :attr:`indexer`, but the default
        one only on a store that can search indexed rows (elsewhere: none)."""
        if self._default_indexer and _without_indexed_rows(vector_store):
            return None
        return self.indexer

    def policy(
        self,
        parent_chunk_threshold_tokens: int = defaults.DEFAULT_THRESHOLD,
        parent_chunk_size_tokens: int = defaults.DEFAULT_PARENT_SIZE,
        parent_chunk_overlap_tokens: int = defaults.DEFAULT_PARENT_OVERLAP,
        *,
        vector_store: AbstractStore | None = None,
    ) -> ChunkPolicy:
        """The chunk policy of this loader with these parent sizes (characters), writing
        into ``vector_store`` (whose kind decides the default strategy; see
        :meth:`indexer_for`)."""
        p = self.processor
        indexer = self.indexer_for(vector_store)
        return ChunkPolicy(
            child_size=p.child_chunk_size,
            child_overlap=p.child_chunk_overlap,
            parent_threshold=parent_chunk_threshold_tokens,
            parent_size=parent_chunk_size_tokens,
            parent_overlap=parent_chunk_overlap_tokens,
            late_chunking=p.late_chunking,
            section_parents=p.section_parents,
            preamble=p.preamble,
            document_layer=p.document_layer,
            model=str(getattr(p.embedding, "model_name", type(p.embedding).__name__)),
            # Indexed rows are part of what a document's rows are.
            strategy=str(indexer.report().get("strategy", "plain"))
            if indexer is not None
            else "plain",
        )

    async def _embed_isolated(
        self, run: _Run, batch: list[DocumentHierarchy]
    ) -> list[DocumentHierarchy]:
        """Embed the batch together; when that fails, embed each document alone, so that a
        document the model cannot take fails alone (it is reported) and the others stay.

        ``run.events`` is told each step's advance; on a retry, only what the first attempt
        did not report, so the batch advances by ``len(batch)`` in all."""
        reported = 0.0

        def advance(fraction: float) -> None:
            nonlocal reported
            reported += fraction
            if run.events is not None:
                run.events.advance(fraction)

        try:
            await self.processor.embed_hierarchies(batch, advance)
            return batch
        except ModelLoadError:
            raise  # no document can be embedded: not a per-document failure
        except Exception:
            if len(batch) > 1:
                logger.info("embedding a batch failed; embedding its documents one by one")
        kept = []
        for h in batch:
            try:
                await self.processor.embed_hierarchies([h])
            except ModelLoadError:
                raise
            except Exception as exc:  # one document's failure must not lose the others
                self._fail(
                    run,
                    run.names[h.document_id],
                    f"embedding failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    if str(exc)
                    else f"embedding failed: {type(exc).__name__}",
                    h.document_id,
                )
                continue
            kept.append(h)
        if run.events is not None and len(batch) > reported:
            run.events.advance(len(batch) - reported)
        return kept

    async def _warn_on_replaced_sources(self, run: _Run, batch: list[DocumentHierarchy]) -> None:
        """Record a warning when a document id stored from another file is replaced, or
        when the same content is stored under another id."""
        if not isinstance(run.store, SourceLookup):
            return
        records = {h.document_id: run.records[h.document_id] for h in batch}
        stored = await run.store.document_sources(list(records))
        for document_id, record in records.items():
            old = stored.get(document_id, set()) - {record.source}
            if record.source is not None and old:
                self.report.warnings.setdefault(record.source, []).append(
                    f"replaced document {document_id!r} previously ingested from "
                    f"{', '.join(sorted(old))}"
                )
        if not isinstance(run.store, ContentLookup):
            return
        digests = {h.document_id: records[h.document_id].content_sha256 for h in batch if h.parents}
        found = await run.store.documents_with_content(list(digests.values()))
        key = run.partition_key
        values: Mapping[str, DocumentState] = {}
        if key is not None and isinstance(run.store, DocumentTable):
            ids = sorted({o for digest in digests.values() for o in found.get(digest, set())})
            values = await run.store.document_states(ids)
        for document_id, digest in digests.items():
            others = found.get(digest, set()) - {document_id}
            if key is not None:
                # Another value's copy is that tenant's own document, not a duplicate
                # (and its id is not this tenant's to see).
                mine = records[document_id].row_metadata
                others = {o for o in others if o in values and _same_value(key, values[o], mine)}
            if others:
                name = records[document_id].source or document_id
                self.report.warnings.setdefault(name, []).append(
                    f"the same content is already stored as document(s) "
                    f"{', '.join(repr(o) for o in sorted(others))}; give stable ids with "
                    "root= / id_prefix= (CLI: --root / --id-prefix), or delete the old copy "
                    "(Python: store.delete(document_id); CLI: parrot-parents delete "
                    f"COLLECTION {' '.join(shlex.quote(o) for o in sorted(others))})"
                )


def _same_value(key: str, stored: DocumentState, given: Mapping[str, Any] | None) -> bool:
    """Whether a stored document and a document's row metadata ``given`` hold the same
    value of the partition key ``key``, or both none
    (:func:`~parrot_parents.stores.partition_keys.same_value`)."""
    theirs = stored.row_metadata
    if theirs is None or given is None:
        return False
    return same_value(key, theirs, given)


def _without_indexed_rows(store: AbstractStore | None) -> bool:
    return store is not None and not isinstance(store, IndexedRows)


def _name(doc: Document, index: int) -> str:
    """How a document is named in the report: its source, its id, or its position."""
    meta = doc.metadata if isinstance(getattr(doc, "metadata", None), dict) else {}
    for candidate in (meta.get("source"), meta.get("document_id"), getattr(doc, "id", None)):
        if isinstance(candidate, str) and candidate:
            return candidate.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"documents[{index}]"


def _document_id(doc: Document) -> str:
    return document_identity(doc.metadata or {}, doc.id, doc.page_content)


def _named_markdown(metadata: dict[str, Any], document_id: str) -> bool:
    """Whether a document's ``source`` (else its id) names a Markdown file (``.md``,
    ``.markdown``), as the path of a file ingest reads as Markdown would."""
    source = metadata.get("source")
    name = source if isinstance(source, str) and source else document_id
    return reader_for(name) == "markdown"


def _record(
    document_id: str,
    text: str,
    metadata: dict[str, Any],
    structure: Structure | None,
    policy: ChunkPolicy,
) -> DocumentRecord:
    """The documents-table row of a document about to be chunked."""
    reader = structure.reader if structure is not None else "text"
    # The caller's metadata (it is on every row), so that reindex rebuilds the same rows.
    meta: dict[str, Any] = {"reader": reader, "row_metadata": metadata}
    if structure is not None and reader in ("html", "pdf"):
        # Their text is extracted: keep the tree, reindex cannot parse it again.
        meta[STRUCTURE_KEY] = structure.to_dict()
    source = metadata.get("source")
    return DocumentRecord(
        document_id=document_id,
        content_sha256=content_sha256(text),
        policy_version=policy.version(reader),
        source_text=text,
        source=source if isinstance(source, str) else None,
        metadata=meta,
    )


def _item(
    run: _Run, h: DocumentHierarchy, extra: Mapping[str, Sequence[Document]]
) -> tuple[str, list[Document], list[np.ndarray | None], DocumentRecord | None]:
    """``(document_id, rows, vectors, record)`` of one document: parents without a vector,
    children with their float32 one, indexed rows with their child's when it is theirs
    (:func:`~.indexing.row_vectors`), else none (the store embeds them)."""
    indexed = extra.get(h.document_id, ())
    docs = [*h.documents(), *indexed]
    vectors: list[np.ndarray | None] = [None] * len(h.parents)
    vectors += [c.embedding for c in h.children]
    vectors += row_vectors(h, indexed)
    return h.document_id, docs, vectors, run.records.get(h.document_id)


async def _write(
    store: AbstractStore,
    item: tuple[str, list[Document], list[np.ndarray | None], DocumentRecord | None],
) -> None:
    document_id, docs, vectors, record = item
    if isinstance(store, DocumentTable) and record is not None:
        await store.replace_document(document_id, docs, embeddings=vectors, record=record)
    elif isinstance(store, ReplaceDocument):
        await store.replace_document(document_id, docs, embeddings=vectors)
    else:
        await store.add_documents(docs, embeddings=vectors)

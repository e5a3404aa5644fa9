"""Milvus store: children in one collection (dense + BM25 search), parents in another.

The same code talks to Milvus Lite (``uri="./milvus.db"``) and to a cluster
(``uri="http://host:19530"``, ``token="user:password"``). Needs the extra ``[milvus]``.
An ingestion strategy's one ``context`` row per child is folded into the child's
``search_text`` (a hit returns the child, ``via`` naming the row); strategies that write
several rows per child, or rows for parents, are refused. Layout: docs/scale-out.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.documents import Document

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError, StoreError
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.identifiers import validate_identifier
from parrot_parents.stores.milvus.filters import (
    document_filter,
    in_list,
    literal,
    partition_clause,
    translate_filter,
)
from parrot_parents.stores.milvus.records import (
    QUERY_WINDOW,
    first_row_metadata,
    ingestion_records,
)
from parrot_parents.stores.milvus.rows import FOLDED_KIND, entities, fold, milvus_rows
from parrot_parents.stores.milvus.schema import (
    CHILD_FIELDS,
    PARENT_FIELDS,
    PARENTS_SUFFIX,
    SEARCH_TEXT,
    VIA,
    ensure_collections,
)
from parrot_parents.stores.partition_keys import validate_partition_key
from parrot_parents.stores.protocols import (
    IndexedRows,
    Partitioned,
    ReplaceDocument,
    RowCount,
    ScopeCheck,
    SourceLookup,
    Vectors,
)
from parrot_parents.stores.questions import check_question
from parrot_parents.stores.records.markers import is_parent
from parrot_parents.stores.records.rows import check_document_rows, embed_missing
from parrot_parents.stores.results import SearchResult
from parrot_parents.stores.search_options import Fusion, SearchMode, check_search_mode

__all__ = ["MilvusStore"]

logger = logging.getLogger(__name__)

_MAX_LIMIT = 10_000
#: The metric of each searched field: cosine over the embedding, BM25 over the text.
_METRICS = {"embedding": "COSINE", "sparse": "BM25"}

T = TypeVar("T")


class MilvusStore(
    AbstractStore, ReplaceDocument, SourceLookup, RowCount, IndexedRows, Partitioned, ScopeCheck
):
    """A collection kept in Milvus: children (with vectors) and parents (without).

    Args:
        uri: Milvus Lite file (``./milvus.db``) or server URI (``http://host:19530``).
        collection: collection name (default ``"documents"``); the parents live in
            ``<collection>__parents``. A validated identifier.
        token: ``"user:password"`` or an API key for a cluster; None for Milvus Lite.
        embedding: the embedding model; default all-MiniLM-L6-v2 (384 dimensions).
        dimension: embedding length; read from the model when None.
        embed_batch_size: children embedded per model call.
        create: create the collections when missing (default True); False makes
            :meth:`connect` fail with :class:`StoreError` instead.
        table: alias of ``collection``.
        partition_key: a metadata key (say ``"tenant"``) that a new children collection is
            partitioned by, with Milvus's own partition key (a field holding each child's
            value as JSON text; :mod:`parrot_parents.stores.partition_keys`): a search whose
            filter fixes the key to one value reads only that value's partition. Recorded
            with the collection; None (default) opens any collection with the key it has.
            Milvus cannot add a partition key to a collection: asking an existing one for
            a key it lacks is a :class:`ConfigurationError` at connect.

    Nothing connects at construction. Milvus has no multi-row transactions: see
    :meth:`replace_document` for what readers may see while a document is rewritten.

    Raises:
        ConfigurationError: a bad name or parameter, or pymilvus is not installed.
        SchemaMismatchError: the collection exists with another embedding dimension.
        StoreError: Milvus cannot be reached or refused an operation.
    """

    def __init__(
        self,
        uri: str = "./milvus.db",
        collection: str | None = None,
        *,
        token: str | None = None,
        embedding: SentenceTransformerEmbeddings | None = None,
        dimension: int | None = None,
        embed_batch_size: int = 64,
        create: bool = True,
        table: str | None = None,
        partition_key: str | None = None,
    ) -> None:
        if table is not None and collection is not None and table != collection:
            raise ConfigurationError(f"table={table!r} and collection={collection!r} differ")
        chosen = collection if collection is not None else table
        self.collection = validate_identifier(chosen or "documents", "collection")
        self.parents_collection = self.collection + PARENTS_SUFFIX
        if not isinstance(uri, str) or not uri:
            raise ConfigurationError(f"uri must be a non-empty string, got {uri!r}")
        if embed_batch_size < 1:
            raise ConfigurationError(f"embed_batch_size must be >= 1, got {embed_batch_size!r}")
        self.uri = uri
        self._token = token
        self.embedding = embedding or SentenceTransformerEmbeddings()
        self._dimension = dimension
        self.embed_batch_size = embed_batch_size
        self.create = create
        self._wanted_key = validate_partition_key(partition_key)
        #: The children collection's partition key (None: it has none); set on connect.
        self.partition_key: str | None = None
        self._client: Any = None
        self._connect_lock = asyncio.Lock()
        # Whether the children collection has ``search_text``/``via`` (read on connect).
        self._search_text = True
        self._warned_legacy = False

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def table(self) -> str:
        """Alias of :attr:`collection` (the name the CLI and eval print)."""
        return self.collection

    def collection_partition_key(self) -> str | None:
        """:attr:`partition_key` (None until connected, or when the collection has none)."""
        return self.partition_key

    @property
    def dimension(self) -> int:
        """Embedding length (loads the model when it was not given)."""
        if self._dimension is None:
            self._dimension = self.embedding.dimension
        return self._dimension

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking pymilvus call in a worker thread; errors become StoreError."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ConfigurationError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("pymilvus"):
                raise StoreError(f"Milvus {self.collection!r}: {exc}") from exc
            raise

    async def connect(self) -> MilvusStore:
        """Open the client, create the two collections when missing, check the dimension."""
        async with self._connect_lock:
            if self._client is not None:
                return self
            try:
                from pymilvus import MilvusClient
            except ImportError as exc:
                raise ConfigurationError(
                    "the Milvus store needs pymilvus",
                    hint="pip install 'parrot-parents[milvus]'",
                ) from exc
            dimension = await asyncio.to_thread(lambda: self.dimension)
            kwargs = {} if self._token is None else {"token": self._token}
            try:
                client = await asyncio.to_thread(MilvusClient, self.uri, **kwargs)
            except Exception as exc:
                raise StoreError(f"cannot open Milvus at {self.uri!r}: {exc}") from exc
            try:
                self._search_text, self.partition_key = await asyncio.to_thread(
                    ensure_collections,
                    client,
                    (self.collection, self.parents_collection),
                    dimension,
                    self.create,
                    self.uri,
                    self._wanted_key,
                )
            except BaseException:
                await asyncio.to_thread(client.close)
                raise
            self._client = client
        return self

    @property
    def client(self) -> Any:
        """The ``MilvusClient``; only after :meth:`connect`."""
        if self._client is None:
            raise StoreError("the store is not connected", hint="await store.connect() first")
        return self._client

    async def ready(self) -> Any:
        """The client, connecting first when needed (for parent searchers)."""
        if self._client is None:
            await self.connect()
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    # -- writes ------------------------------------------------------------------------

    async def _upsert(self, rows: list[dict[str, Any]]) -> list[str]:
        """Fold, embed and write ``rows`` (parents first: a child is never visible before
        the parent it points to); the ids of the rows written."""
        kept = fold(rows)
        if not self._search_text and len(kept) < len(rows) and not self._warned_legacy:
            self._warned_legacy = True
            logger.warning(
                "Milvus collection %r predates search_text: its BM25 index sees each child's "
                "own text, only the embedding sees the indexed rows; ingest into a new "
                "collection to search both",
                self.collection,
            )
        # Every child needs a vector here, of its searched text.
        await embed_missing(
            kept,
            self.embedding,
            self.embed_batch_size,
            wanted=lambda meta: not is_parent(meta),
            text=lambda row: str(row.get(SEARCH_TEXT, row["document"])),
        )
        client = await self.ready()
        children, parents = entities(kept, self._search_text, self.partition_key)
        if parents:
            await self._call(client.upsert, self.parents_collection, data=parents)
        if children:
            await self._call(client.upsert, self.collection, data=children)
        return [r["id"] for r in kept]

    async def add_documents(
        self,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
    ) -> list[str]:
        """Insert or update rows (upsert by the deterministic id).

        Markers are normalised and ids derived as in
        :meth:`~parrot_parents.stores.postgres.PgVectorStore.add_documents`; children
        without a given vector are embedded in batches; parents go to the parents
        collection. Adding the same rows twice leaves one copy.

        Returns:
            The row ids, in input order.

        Raises:
            ConfigurationError: a non-Document, a vector of the wrong length, or a text
                or id over Milvus's VARCHAR limit (checked before anything is written).
            StoreError: Milvus refused the write.
        """
        rows = milvus_rows(documents, embeddings, self.dimension)
        await self._upsert(rows)
        return [r["id"] for r in rows]

    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
    ) -> list[str]:
        """Replace every row of ``document_id`` by ``documents`` (used by the loaders).

        Milvus has no multi-row transactions, so this upserts the new rows first, then
        deletes the document's rows whose ids are not among them. A reader never finds the
        document missing; while it runs, a search may see old rows next to new ones. If
        the upsert fails, the previous version is untouched; if the stale-row delete
        fails, running the same ingest again removes them.

        Raises:
            ConfigurationError: a row of another document, or as :meth:`add_documents`.
            StoreError: Milvus refused the write.
        """
        rows = check_document_rows(document_id, milvus_rows(documents, embeddings, self.dimension))
        written = await self._upsert(rows)
        await self._delete_where(document_filter(document_id, written))
        return [r["id"] for r in rows]

    async def _delete_where(self, expr: str) -> int:
        client = await self.ready()
        deleted = 0
        # Children first: a parent never disappears while a child still points to it.
        for name in (self.collection, self.parents_collection):
            result = await self._call(client.delete, name, filter=expr)
            deleted += _deleted_count(result)
        return deleted

    async def delete(self, document_id: str) -> int:
        return await self._delete_where(document_filter(document_id))

    async def drop(self) -> None:
        """Drop both collections (tests and ``eval`` use throwaway collections).

        The store disconnects; a later call connects again and, with ``create``, makes
        empty collections."""

        client = await self.ready()
        for name in (self.collection, self.parents_collection):
            if await self._call(client.has_collection, name):
                await self._call(client.drop_collection, name)
        await self.close()

    # -- reads -------------------------------------------------------------------------

    async def similarity_search(
        self,
        query: str,
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
        *,
        search_mode: SearchMode = "dense",
        fusion: Fusion | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` children best matching ``query``, best first.

        ``limit``: 1..10000, default 10; when at least ``limit`` children match ``filter``
        (:mod:`parrot_parents.stores.milvus.filters`), exactly ``limit`` come back.
        ``include_parents`` is accepted for the interface: parents have no vector here.
        ``search_mode``: ``"dense"`` (cosine similarity), ``"lexical"`` (the engine's BM25
        over the searched text) or ``"hybrid"`` (both, fused by the engine's reciprocal
        rank fusion with k = ``fusion.rrf_k``, default 60, Cormack et al. 2009). The engine
        weighs both branches equally and takes no weighted query terms, so unequal
        ``fusion`` weights, and ``fusion.prf`` outside ``dense``, are refused.

        Returns :class:`SearchResult` rows; ``score``: cosine similarity (dense), BM25
        score (lexical) or RRF score (hybrid), higher is better; ``distance``: the cosine
        distance (dense), else None.

        Raises:
            ConfigurationError: a bad ``query`` (:mod:`parrot_parents.stores.questions`),
                ``limit``, ``filter``, ``search_mode`` or ``fusion``; before the model loads.
            StoreError: Milvus refused the search.
        """
        check_question(query)
        search_mode = check_search_mode(search_mode)
        _check_limit(limit)
        expr = translate_filter(filter)
        fusion = fusion or Fusion()
        if fusion.prf is not None and search_mode != "dense":
            raise ConfigurationError(
                "pseudo-relevance feedback (prf) runs in PostgreSQL's lexical branch; "
                "Milvus's BM25 takes no weighted query terms",
                hint="leave prf off on a Milvus store",
            )
        if search_mode == "hybrid" and fusion.dense_weight != fusion.lexical_weight:
            raise ConfigurationError(
                "Milvus fuses with the engine's RRF, which weighs both branches equally",
                hint="leave dense_weight and lexical_weight equal on a Milvus store",
            )
        # The partition key is read on connect; every refusal above comes before it.
        await self.ready()
        expr = self._partitioned(filter, expr)
        if search_mode == "lexical":
            hits = await self._search("sparse", query, limit, expr)
            # Milvus reports BM25 as a score, Milvus Lite as its negative; order is the
            # engine's either way.
            return [_result(h, abs(float(h["distance"]))) for h in hits]
        vector = await self.embedding.aembed_query(query)
        if search_mode == "dense":
            return await self.similarity_search_by_vector(vector, limit, filter=filter)
        from pymilvus import AnnSearchRequest, RRFRanker

        candidates = min(max(2 * limit, 20), _MAX_LIMIT)
        requests = [
            AnnSearchRequest(
                data=[data],
                anns_field=field,
                param={"metric_type": _METRICS[field]},
                limit=candidates,
                expr=expr or None,
            )
            for field, data in (("embedding", list(vector)), ("sparse", query))
        ]
        client = await self.ready()
        hits = await self._call(
            client.hybrid_search,
            self.collection,
            reqs=requests,
            ranker=RRFRanker(fusion.rrf_k),
            limit=limit,
            output_fields=self._child_fields,
        )
        return [_result(h, float(h["distance"])) for h in hits[0]]

    async def similarity_search_by_vector(
        self,
        vector: Sequence[float],
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
    ) -> list[SearchResult]:
        """Dense :meth:`similarity_search` with a precomputed query vector."""
        _check_limit(limit)
        if len(vector) != self.dimension:
            raise ConfigurationError(
                f"query vector has {len(vector)} values, expected {self.dimension}"
            )
        data = [float(x) for x in vector]
        expr = translate_filter(filter)
        await self.ready()
        hits = await self._search("embedding", data, limit, self._partitioned(filter, expr))
        # Milvus's COSINE "distance" is the similarity.
        return [_result(h, float(h["distance"]), 1.0 - float(h["distance"])) for h in hits]

    def _partitioned(self, filter: Mapping[str, Any] | None, expr: str) -> str:
        """``expr`` (the filter's expression) narrowed to one partition when the
        collection has a partition key and ``filter`` fixes it to one value
        (:func:`~parrot_parents.stores.milvus.filters.partition_clause`): Milvus then
        searches only the partition holding that value's rows."""
        part = partition_clause(filter, self.partition_key)
        if not part:
            return expr
        return f"({expr}) and {part}" if expr else part

    async def _search(self, field: str, data: Any, limit: int, expr: str) -> list[Any]:
        """The hits of one branch (``embedding`` or ``sparse``), best first."""
        client = await self.ready()
        hits = await self._call(
            client.search,
            self.collection,
            data=[data],
            anns_field=field,
            limit=limit,
            filter=expr,
            output_fields=self._child_fields,
            search_params={"metric_type": _METRICS[field]},
        )
        return list(hits[0])

    async def _query(self, name: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """The rows of collection ``name`` matching ``expr`` (a Milvus expression built by
        this package, never by a user): at most :data:`QUERY_WINDOW`."""
        client = await self.ready()
        rows = await self._call(
            client.query, name, filter=expr, output_fields=fields, limit=QUERY_WINDOW
        )
        return list(rows)

    async def _children(self, expr: str) -> list[SearchResult]:
        """Children matching ``expr``.

        Raises:
            StoreError: more than :data:`QUERY_WINDOW` rows match (Milvus's result window).
        """
        fields = [*self._child_fields, "chunk_index", "start_index"]
        rows = await self._query(self.collection, expr, fields)
        if len(rows) >= QUERY_WINDOW:
            raise StoreError(f"more than {QUERY_WINDOW} children match one read; narrow it")
        return [
            SearchResult(id=r["id"], content=r["text"], metadata=dict(r["metadata"] or {}))
            for r in rows
        ]

    @property
    def _child_fields(self) -> list[str]:
        return [*CHILD_FIELDS, VIA] if self._search_text else CHILD_FIELDS

    async def fetch_parents(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """Parents by id (primary-key reads); missing ids are absent."""
        ids = list(dict.fromkeys(str(p) for p in parent_ids if p is not None))
        if not ids:
            return {}
        client = await self.ready()
        rows = await self._call(
            client.get, self.parents_collection, ids=ids, output_fields=PARENT_FIELDS
        )
        return {
            r["id"]: Document(id=r["id"], page_content=r["text"], metadata=dict(r["metadata"]))
            for r in rows
        }

    async def ids_matching(self, ids: Sequence[str], filter: Mapping[str, Any]) -> set[str]:
        """As :meth:`~parrot_parents.stores.protocols.ScopeCheck.ids_matching`, over the
        children and the parents collection (a filter in Milvus's subset:
        :func:`~parrot_parents.stores.milvus.filters.translate_filter`)."""
        expr = translate_filter(filter)  # a bad filter: before any read
        wanted = list(dict.fromkeys(str(i) for i in ids))
        if not wanted:
            return set()
        kept: set[str] = set()
        for start in range(0, len(wanted), QUERY_WINDOW):
            match = in_list("id", wanted[start : start + QUERY_WINDOW])
            if expr:
                match = f"{match} and ({expr})"
            for name in (self.collection, self.parents_collection):
                kept.update(str(r["id"]) for r in await self._query(name, match, ["id"]))
        return kept

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        ids = list(dict.fromkeys(str(p) for p in parent_ids if p is not None))
        if not ids:
            return {}
        rows = await self._children(in_list("parent_document_id", ids))
        return _grouped(rows, "parent_document_id", "start_index")

    async def fetch_chunk_ranges(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> dict[str, list[SearchResult]]:
        if not ranges:
            return {}
        expr = " or ".join(
            f"(document_id == {literal(str(d))} and chunk_index >= {int(lo)}"
            f" and chunk_index <= {int(hi)})"
            for d, lo, hi in ranges
        )
        return _grouped(await self._children(expr), "document_id", "chunk_index")

    async def document_sources(self, document_ids: Sequence[str]) -> dict[str, set[str]]:
        ids = list(dict.fromkeys(str(d) for d in document_ids))
        if not ids:
            return {}
        out: dict[str, set[str]] = {}
        for name in (self.collection, self.parents_collection):
            rows = await self._query(name, in_list("document_id", ids), ["document_id", "metadata"])
            for r in rows:
                sources = out.setdefault(r["document_id"], set())
                source = (r.get("metadata") or {}).get("source")
                if source is not None:
                    sources.add(str(source))
        return out

    async def stored_row_metadata(
        self, document_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """As :meth:`~parrot_parents.stores.protocols.Partitioned.stored_row_metadata`:
        the metadata of one row of each document (its parents first, else its children),
        which carries the caller's; a few queries. Milvus has no transaction to read it in
        with the write, so of two writers of one new document under two values at once,
        both may succeed (the PostgreSQL store refuses the second)."""
        return await first_row_metadata(
            self._query, (self.parents_collection, self.collection), document_ids
        )

    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        """As :meth:`IndexedRows.ingestion_records`; one query (:func:`ingestion_records`:
        a ``StoreError`` past :data:`QUERY_WINDOW` parents)."""
        return await ingestion_records(self._query, self.parents_collection)

    async def count(self, *, include_parents: bool = True) -> int:
        client = await self.ready()
        names = [self.collection] + ([self.parents_collection] if include_parents else [])
        total = 0
        for name in names:
            rows = await self._call(client.query, name, filter="", output_fields=["count(*)"])
            total += int(rows[0]["count(*)"])
        return total


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise ConfigurationError(f"limit must be an int in [1, {_MAX_LIMIT}], got {limit!r}")


def _grouped(rows: list[SearchResult], key: str, order: str) -> dict[str, list[SearchResult]]:
    """``rows`` by their ``metadata[key]``, each list ordered by ``metadata[order]``."""
    out: dict[str, list[SearchResult]] = defaultdict(list)
    for r in rows:
        out[str(r.metadata[key])].append(r)
    for group in out.values():
        group.sort(key=lambda r: v if isinstance(v := r.metadata.get(order), int) else -1)
    return dict(out)


def _result(hit: Any, score: float, distance: float | None = None) -> SearchResult:
    entity = hit.get("entity", {})
    via = entity.get(VIA) or None
    return SearchResult(
        id=str(hit["id"]),
        content=entity.get("text", ""),
        metadata=dict(entity.get("metadata") or {}),
        score=score,
        distance=distance,
        via=via,
        via_kind=FOLDED_KIND if via else None,
    )


def _deleted_count(result: Any) -> int:
    if isinstance(result, dict):
        return int(result.get("delete_count", 0))
    try:
        return len(result)
    except TypeError:
        return 0

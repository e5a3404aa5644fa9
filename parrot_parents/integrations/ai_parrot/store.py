"""An ai-parrot store backed by a parrot-parents collection.

A stock ai-parrot bot given this store searches with parrot-parents' defaults (hybrid
BM25 + dense over late-chunked children, the ingestion strategy's indexed rows, filters
and scopes) and gets ai-parrot ``SearchResult`` objects carrying ``parent_document_id``,
so its own reranker and its ``_expand_to_parents`` (with the ``parrot_parents`` parent
searcher) run in the spec's order: search, rerank, top K, expand. Packing into a budget is
not part of that stock path; :class:`~parrot_parents.integrations.ai_parrot.mixin.ParentChildMixin`
runs the whole pipeline.

Registered as ai-parrot's vector store ``parrot_parents`` on import of
:mod:`parrot_parents.integrations.ai_parrot`: a bot row's ``vector_store_config``
``{"name": "parrot_parents", "table": "my_docs"}`` resolves to it through ai-parrot's own
``configure_store``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.ai_parrot.documents import passage_result
from parrot_parents.integrations.ai_parrot.framework import AbstractStore, supported_stores
from parrot_parents.integrations.ai_parrot.ingest import document_id_of, ingest_documents
from parrot_parents.loaders.abstract import IngestReport
from parrot_parents.retrieval.options import LIMIT_MAX, RetrievalOptions
from parrot_parents.retrieval.pipeline import Retriever
from parrot_parents.retrieval.scope import validate_scope
from parrot_parents.stores.postgres import PgVectorStore

__all__ = ["STORE_NAME", "ParrotParentsStore", "register_store"]

LOG = logging.getLogger(__name__)

#: The ``name`` of a ``vector_store_config`` that selects this store.
STORE_NAME = "parrot_parents"

#: ai-parrot's own store keywords, which its bots pass to every store: accepted, and not
#: used (the collection records its model, dimension and metric; see the class).
FRAMEWORK_KEYS = frozenset(
    {
        "name",
        "vector_store",
        "vector_database",
        "embedding_model",
        "embedding",
        "dimension",
        "metric_type",
        "index_type",
        "use_database",
        "database",
        "index_name",
        "collection_name",
        "use_vector",
    }
)

#: ``similarity_search`` keywords passed on to the search as retrieval options.
SEARCH_OPTIONS = frozenset({"search_mode", "rrf_k", "dense_weight", "lexical_weight", "prf"})


class ParrotParentsStore(AbstractStore):
    """ai-parrot's ``AbstractStore`` over a parrot-parents collection.

    Args:
        store: the collection; else one is opened from ``table`` (or ``collection``),
            ``schema``, ``dsn`` and ``model``, and owned (closed by :meth:`disconnect`).
        table, collection: the collection's table name (one of them).
        schema: default ``public``.
        dsn: PostgreSQL DSN; default ``$PARROT_PARENTS_DSN``, else the embedded server.
        model: the embedding model the collection was built with (a sentence-transformers
            name or path); default all-MiniLM-L6-v2. ai-parrot's ``embedding_model`` and
            ``embedding`` are not used: the collection records its model, and a search
            with another one raises :class:`~parrot_parents.errors.ModelMismatchError`.
        scope: a metadata filter every search holds to (a call's filter narrows it).
        options: default search options of every search (:data:`SEARCH_OPTIONS`:
            ``search_mode``, ``rrf_k``, ``dense_weight``, ``lexical_weight``, ``prf``;
            e.g. ``{"search_mode": "dense"}``); expansion and packing are the bot's, so
            ``budget``, ``mode`` and the like are refused.
        **kwargs: ai-parrot's store keywords (:data:`FRAMEWORK_KEYS`), ignored.

    Raises:
        ConfigurationError: an unknown keyword, no collection named, or a bad scope or
            option (before any model loads).
    """

    #: ai-parrot's: the open collection (None when disconnected), and the nesting of
    #: ``async with`` blocks.
    _connection: PgVectorStore | None
    _context_depth: int

    def __init__(
        self,
        store: PgVectorStore | None = None,
        *,
        table: str | None = None,
        collection: str | None = None,
        schema: str = "public",
        dsn: str | None = None,
        model: str | None = None,
        scope: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(kwargs) - FRAMEWORK_KEYS)
        if unknown:
            raise ConfigurationError(
                f"unknown ParrotParentsStore keyword(s): {', '.join(map(repr, unknown))}",
                hint="the collection is `table`; retrieval options go in `options`",
            )
        other = sorted(set(options or {}) - SEARCH_OPTIONS)
        if other:
            raise ConfigurationError(
                f"ParrotParentsStore options {', '.join(map(repr, other))} are not search "
                f"options; it takes {', '.join(sorted(SEARCH_OPTIONS))}",
                hint="expansion and packing belong to the bot: ParentChildMixin takes them",
            )
        self.defaults = RetrievalOptions.from_overrides(dict(options or {}))
        self.scope = validate_scope(dict(scope) if scope is not None else None)
        if store is None:
            name = table or collection
            if not name:
                raise ConfigurationError(
                    "ParrotParentsStore needs a collection",
                    hint="pass table='my_docs' (vector_store_config {'name': "
                    f"'{STORE_NAME}', 'table': 'my_docs'}}) or store=PgVectorStore(...)",
                )
            from parrot_parents.embeddings.sentence_transformer import (
                SentenceTransformerEmbeddings,
            )

            embedding = SentenceTransformerEmbeddings(model) if model else None
            store = PgVectorStore(dsn=dsn, table=name, schema=schema, embedding=embedding)
            self.owns_store = True
        else:
            self.owns_store = False
        self.collection_store: PgVectorStore = store
        super().__init__(
            use_database=True,
            collection_name=store.collection,
            dimension=kwargs.get("dimension", 384),
        )
        self.table_name = store.table
        self.schema = store.schema

    # -- lifecycle (ai-parrot's connection / disconnect / async with) --------------------

    async def connection(self) -> PgVectorStore:
        """Open the collection (reading never creates it); returns the parrot-parents store.

        Raises:
            CollectionNotFoundError: the collection does not exist.
            StoreError: the server cannot be reached.
        """
        await self.collection_store.ready()
        self._connection = self.collection_store
        self._connected = True
        return self.collection_store

    async def disconnect(self) -> None:
        """Close the collection's connection pools when this store opened them; safe twice."""
        if self.owns_store:
            await self.collection_store.close()
        self._connection = None
        self._connected = False

    async def __aexit__(self, *exc: object) -> None:
        # ai-parrot's bots enter the store around every search: the pools stay open
        # between searches, as its own PgVectorStore keeps its engine; disconnect() ends it.
        self._context_depth = max(0, self._context_depth - 1)

    def get_vector(self, metric_type: str | None = None, **kwargs: Any) -> PgVectorStore:
        """The parrot-parents store itself (there is no LangChain vector store beneath)."""
        return self.collection_store

    # -- search -------------------------------------------------------------------------

    def retriever(self, min_similarity: float | None = None) -> Retriever:
        """The parrot-parents pipeline over this collection (no reranker, no expansion)."""
        return Retriever(
            self.collection_store,
            defaults=self.defaults,
            scope=self.scope,
            min_similarity=min_similarity,
        )

    async def similarity_search(
        self,
        query: str,
        collection: str | None = None,
        limit: int | None = None,
        similarity_threshold: float | None = None,
        search_strategy: str = "auto",
        metadata_filters: Mapping[str, Any] | None = None,
        include_parents: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """The children best matching ``query``, best first, as ai-parrot ``SearchResult``s.

        Args:
            query: the question (1..4000 characters, no NUL).
            collection: must be this store's collection when given.
            limit: children wanted, at least 1; default 10 (``k`` is the same). Over
                100 (ai-parrot over-fetches ``limit x rerank_oversample_factor`` for its
                reranker) it is served as 100, the pipeline's most, with a warning logged.
            similarity_threshold, score_threshold: one meaning, whichever name is used:
                the minimum cosine similarity (in [-1, 1], higher is closer) of a child to
                the question; a child only the lexical branch found has none and is kept.
                None or absent: no threshold.
            search_strategy: ``auto`` only (the collection's defaults).
            metadata_filters, filter: a metadata filter (parrot-parents' filter language,
                the langchain-postgres operators); give one of the two.
            include_parents: must be False: parents are reached by expansion.
            **kwargs: ``k``, ``score_threshold``, ``filter``, ``metric`` (``COSINE``
                only), and the retrieval options ``search_mode``, ``rrf_k``,
                ``dense_weight``, ``lexical_weight``, ``prf``.

        Returns:
            ``SearchResult``s: ``score`` the search score, higher is better (fused RRF in
            ``hybrid`` mode, cosine similarity in ``dense``); ``metadata`` the child's
            stored metadata (``parent_document_id``, ``document_id``, ``start_index``,
            ``end_index`` in characters) and the passage keys (``kind``,
            ``section_path``, ``dense_score``, ``lexical_rank``...).

        Raises:
            ConfigurationError: a bad question, option, filter or keyword (before any
                model loads).
            CollectionNotFoundError: the collection does not exist.
            ModelMismatchError: the store's model is not the collection's.
            StoreError: the database failed.
        """
        options, threshold = self._search_call(
            collection,
            limit,
            similarity_threshold,
            search_strategy,
            metadata_filters,
            include_parents,
            kwargs,
        )
        retrieval = await self.retriever(threshold).retrieve(query, options)
        return [passage_result(p) for p in retrieval.passages]

    def _search_call(
        self,
        collection: str | None,
        limit: int | None,
        similarity_threshold: float | None,
        search_strategy: str,
        metadata_filters: Mapping[str, Any] | None,
        include_parents: bool,
        kwargs: dict[str, Any],
    ) -> tuple[RetrievalOptions, float | None]:
        """The retrieval options and the threshold of one ``similarity_search`` call."""
        extra = dict(kwargs)
        k = extra.pop("k", None)
        score_threshold = extra.pop("score_threshold", None)
        filter_ = extra.pop("filter", None)
        metric = extra.pop("metric", None)
        options = {key: extra.pop(key) for key in list(extra) if key in SEARCH_OPTIONS}
        if extra:
            raise ConfigurationError(
                f"unknown similarity_search keyword(s): {', '.join(map(repr, sorted(extra)))}"
            )
        if collection not in (None, self.collection_store.collection):
            raise ConfigurationError(
                f"collection {collection!r} is not this store's "
                f"({self.collection_store.collection!r})"
            )
        if search_strategy != "auto":
            raise ConfigurationError(
                f"search_strategy {search_strategy!r} is not supported; use 'auto'",
                hint="choose the branches with search_mode='dense'|'lexical'|'hybrid'",
            )
        if include_parents:
            raise ConfigurationError(
                "include_parents=True is not supported: parents are reached by expansion",
                hint="expand with the bot's parent searcher",
            )
        if metric is not None and str(metric).upper() != "COSINE":
            raise ConfigurationError(f"metric {metric!r} is not supported; the index is cosine")
        if k is not None and limit is not None and k != limit:
            raise ConfigurationError(f"k={k!r} and limit={limit!r} differ; give one")
        if metadata_filters is not None and filter_ is not None:
            raise ConfigurationError("give metadata_filters or filter, not both")
        both = similarity_threshold is not None and score_threshold is not None
        if both and similarity_threshold != score_threshold:
            raise ConfigurationError(
                "similarity_threshold and score_threshold differ; they mean the same"
            )
        threshold = score_threshold if score_threshold is not None else similarity_threshold
        chosen = metadata_filters if metadata_filters is not None else filter_
        wanted = limit if limit is not None else (k if k is not None else 10)
        if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > LIMIT_MAX:
            LOG.warning(
                "similarity_search: limit %d served as %d, the most a search returns",
                wanted,
                LIMIT_MAX,
            )
            wanted = LIMIT_MAX
        call: dict[str, Any] = {"expand_to_parent": False, "limit": wanted, **options}
        if chosen is not None:
            call["filter"] = dict(chosen)
        return RetrievalOptions.from_overrides(call), threshold

    async def mmr_search(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Not served: ai-parrot's ``mmr`` (and its ``ensemble``, built on it) have no
        parrot-parents counterpart.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(
            "search_type 'mmr' (and 'ensemble') is not served by a parrot-parents "
            "collection; use 'similarity'",
            hint="choose the branches with search_kwargs={'search_mode': ...}",
        )

    # -- writes -------------------------------------------------------------------------

    async def add_documents(
        self, documents: list[Any], collection: str | None = None, **kwargs: Any
    ) -> IngestReport:
        """Ingest whole documents (ai-parrot ``Document``s): :func:`ingest_documents`.

        Raises:
            ConfigurationError: ``collection`` is not this store's, or a bad option.
        """
        self._check_collection(collection)
        return await ingest_documents(documents, self.collection_store, **kwargs)

    async def from_documents(
        self, documents: list[Any], collection: str | None = None, **kwargs: Any
    ) -> ParrotParentsStore:
        """:meth:`add_documents`, returning the store (ai-parrot's convention)."""
        await self.add_documents(documents, collection, **kwargs)
        return self

    async def create_collection(self, collection: str) -> None:
        """Create this store's collection (with its indexes) when it is missing.

        Raises:
            ConfigurationError: ``collection`` is not this store's.
        """
        self._check_collection(collection)
        await self.collection_store.connect()

    async def prepare_embedding_table(self, tablename: str, *args: Any, **kwargs: Any) -> None:
        """Not supported: a parrot-parents collection is made by :meth:`create_collection`
        or an ingest, with its own schema; an ai-parrot table is re-indexed by ingesting
        its documents again (docs/integrations.md, "Moving in").

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(
            f"prepare_embedding_table({tablename!r}) is not supported by a parrot-parents "
            "collection",
            hint="create_collection() makes one; add_documents() fills it",
        )

    async def delete_documents(
        self,
        documents: Sequence[Any] | None = None,
        pk: str = "document_id",
        values: str | Sequence[str] | None = None,
        table: str | None = None,
        schema: str | None = None,
        collection: str | None = None,
        **kwargs: Any,
    ) -> int:
        """Delete whole documents (every row of each: parents, children, indexed rows).

        Args:
            documents: ai-parrot ``Document``s whose ``metadata["document_id"]`` names
                them; or ``values``.
            pk: ``document_id`` only (documents are the unit of a parrot-parents write).
            values: one document id or several.

        Returns:
            The number of rows deleted.

        Raises:
            ConfigurationError: another ``pk``, another table or collection, or a
                document without a ``document_id``.
        """
        self._check_collection(collection or table)
        if pk != "document_id":
            raise ConfigurationError(
                f"pk {pk!r} is not supported; documents are deleted by 'document_id'"
            )
        ids = _document_ids(documents, values)
        deleted = 0
        for document_id in ids:
            deleted += await self.collection_store.delete(document_id)
        return deleted

    async def delete_documents_by_filter(
        self,
        search_filter: Mapping[str, Any],
        table: str | None = None,
        schema: str | None = None,
        collection: str | None = None,
        **kwargs: Any,
    ) -> int:
        """:meth:`delete_documents` for ``{"document_id": id}`` or ``{"document_id": [ids]}``.

        Raises:
            ConfigurationError: a filter on another key.
        """
        if set(search_filter) != {"document_id"}:
            raise ConfigurationError(
                "only {'document_id': ...} filters delete from a parrot-parents collection"
            )
        return await self.delete_documents(
            values=search_filter["document_id"], table=table, collection=collection
        )

    def _check_collection(self, collection: str | None) -> None:
        if collection not in (None, self.collection_store.collection, self.table_name):
            raise ConfigurationError(
                f"collection {collection!r} is not this store's "
                f"({self.collection_store.collection!r})"
            )


def _document_ids(documents: Sequence[Any] | None, values: str | Sequence[str] | None) -> list[str]:
    """The ids to delete: ``values``, and each document's id as :func:`ingest_documents`
    gave it (``document_id``, else ``source``, ``filename`` or ``url``)."""
    given = [values] if isinstance(values, str) else values
    if given is not None and not isinstance(given, list | tuple):
        raise ConfigurationError(
            f"values must be a document id or a list of them, got {type(values).__name__}"
        )
    ids = list(given or ())
    bad = [v for v in ids if not isinstance(v, str) or not v]
    if bad:
        raise ConfigurationError(f"document ids are non-empty strings, got {bad[0]!r}")
    for doc in documents or ():
        document_id = document_id_of(doc.metadata or {})
        if document_id is None:
            raise ConfigurationError(
                "a document to delete has no document_id, source, filename or url"
            )
        ids.append(document_id)
    return list(dict.fromkeys(ids))


def register_store() -> None:
    """Make ``{"name": "parrot_parents"}`` a vector store of ai-parrot's bots (idempotent).

    ai-parrot resolves a store name to ``parrot.stores.<name>`` and a class name in its
    ``supported_stores``; this module is entered there under that name.
    """
    supported_stores[STORE_NAME] = ParrotParentsStore.__name__
    sys.modules.setdefault(f"parrot.stores.{STORE_NAME}", sys.modules[__name__])

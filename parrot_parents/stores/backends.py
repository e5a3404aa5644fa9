"""Choosing a storage backend from a short spec: ``postgres`` or ``milvus:URI``.

Used by the command line (``--store``) and ``eval``; Python code constructs
:class:`~parrot_parents.stores.postgres.PgVectorStore` or
:class:`~parrot_parents.stores.milvus.MilvusStore` directly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.milvus.settings import MILVUS_TOKEN_ENV
from parrot_parents.stores.parents.abstract import AbstractParentSearcher

__all__ = ["StoreSpec", "open_store", "parent_searcher_for", "parse_store_spec"]

StoreSpec = tuple[str, str | None]


def parse_store_spec(spec: str | None) -> StoreSpec:
    """``("postgres", None)`` or ``("milvus", uri)``.

    ``None``, ``""`` and ``"postgres"`` mean PostgreSQL; ``"milvus:./milvus.db"`` a
    Milvus Lite file; ``"milvus:http://host:19530"`` a Milvus server.

    Raises:
        ConfigurationError: any other spec, or ``milvus:`` without a URI.
    """
    if spec is None or spec in ("", "postgres", "postgresql", "pg"):
        return "postgres", None
    kind, sep, uri = spec.partition(":")
    if kind == "milvus" and sep and uri.strip():
        return "milvus", uri.strip()
    raise ConfigurationError(
        f"unknown store {spec!r}",
        hint="use 'postgres' (the default) or 'milvus:URI', e.g. milvus:./milvus.db",
    )


def open_store(
    spec: str | None,
    *,
    dsn: str | None = None,
    collection: str = "documents",
    embedding: Any = None,
    create: bool = True,
    lexical_backend: str = "auto",
    partition_key: str | None = None,
    filter_keys: Sequence[str] | None = None,
) -> AbstractStore:
    """The store named by ``spec`` (see :func:`parse_store_spec`); nothing connects yet.

    ``dsn``, ``lexical_backend`` (``auto``, ``pg_textsearch`` or ``sql``: what ranks the
    lexical branch of a new collection,
    :mod:`parrot_parents.stores.postgres.search.bm25_index`) are for PostgreSQL;
    ``partition_key`` (:mod:`parrot_parents.stores.partition_keys`) for both;
    ``filter_keys``
    (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`) for PostgreSQL; a
    Milvus cluster's token is read from ``$PARROT_PARENTS_MILVUS_TOKEN``.

    Raises:
        ConfigurationError: a bad spec, collection name, lexical backend, partition key or
            filter key, or ``--dsn``, a lexical backend or filter keys given with Milvus.
    """
    from parrot_parents.stores.postgres.search.bm25_index import validate_lexical_choice

    choice = validate_lexical_choice(lexical_backend)
    kind, uri = parse_store_spec(spec)
    if kind == "milvus":
        if dsn is not None:
            raise ConfigurationError("--dsn is for PostgreSQL; a Milvus store takes its URI")
        if choice != "auto":
            raise ConfigurationError(
                "a lexical backend is for PostgreSQL; Milvus ranks text with its own BM25"
            )
        if filter_keys:
            raise ConfigurationError(
                "filter keys are for PostgreSQL; Milvus filters scalar fields with its own indexes"
            )
        from parrot_parents.stores.milvus.store import MilvusStore

        return MilvusStore(
            uri or "",
            collection,
            token=os.environ.get(MILVUS_TOKEN_ENV) or None,
            embedding=embedding,
            create=create,
            partition_key=partition_key,
        )
    from parrot_parents.stores.postgres import PgVectorStore

    return PgVectorStore(
        dsn=dsn,
        table=collection,
        embedding=embedding,
        create=create,
        lexical_backend=choice,
        partition_key=partition_key,
        filter_keys=filter_keys,
    )


def parent_searcher_for(store: AbstractStore) -> AbstractParentSearcher:
    """The parent searcher reading the store's own parents.

    Raises:
        ConfigurationError: a store of a kind this package has no searcher for.
    """
    from parrot_parents.stores.milvus.parents import MilvusParentSearcher
    from parrot_parents.stores.parents.in_table import InTableParentSearcher

    for searcher in (InTableParentSearcher, MilvusParentSearcher):
        if isinstance(store, searcher.store_class):
            return searcher(store)
    raise ConfigurationError(f"no parent searcher for a {type(store).__name__}")

"""Reads of a Milvus collection that walk its rows by document: one row's metadata per
document, and the ingestion records on the parents. Milvus Lite has no query iterator, so
each read stays within one result window (:data:`QUERY_WINDOW`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from parrot_parents.errors import StoreError
from parrot_parents.stores.milvus.filters import in_list

__all__ = ["QUERY_WINDOW", "Query", "first_row_metadata", "ingestion_records"]

#: Milvus returns at most this many rows per query (``maxQueryResultWindow``).
QUERY_WINDOW = 16_384
#: Document ids read per query of their rows' metadata.
_IDS_PER_QUERY = 64
#: Key of the per-document ingestion record on parent rows (loaders.indexing.INGESTION_KEY).
_INGESTION = "ingestion"

#: ``(collection, expression, fields) -> rows``: a store's query, at most a window of rows.
Query = Callable[[str, str, list[str]], Awaitable[list[dict[str, Any]]]]


async def first_row_metadata(
    query: Query, names: Iterable[str], document_ids: Sequence[str]
) -> dict[str, Mapping[str, Any]]:
    """The metadata of the first row found of each document, collection by collection of
    ``names`` (parents first), ``_IDS_PER_QUERY`` ids a query; one id a query where a
    window fills, since a document may then be missing from it."""
    wanted = list(dict.fromkeys(str(d) for d in document_ids))
    found: dict[str, Mapping[str, Any]] = {}
    fields = ["document_id", "metadata"]
    for name in names:
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            missing = [d for d in wanted[start : start + _IDS_PER_QUERY] if d not in found]
            if not missing:
                continue
            rows = await query(name, in_list("document_id", missing), fields)
            if len(rows) >= QUERY_WINDOW:
                rows = [
                    r
                    for d in missing
                    for r in await query(name, in_list("document_id", [d]), fields)
                ]
            for r in rows:
                found.setdefault(str(r["document_id"]), dict(r.get("metadata") or {}))
    return found


async def ingestion_records(query: Query, parents: str) -> dict[str, dict[str, Any]]:
    """Each document's ingestion record, read from the parents collection ``parents``.

    Raises:
        StoreError: more than :data:`QUERY_WINDOW` parents.
    """
    rows = await query(parents, 'document_id != ""', ["document_id", "metadata"])
    if len(rows) >= QUERY_WINDOW:
        raise StoreError(f"more than {QUERY_WINDOW} parents: cannot list them in one read")
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        record = (r.get("metadata") or {}).get(_INGESTION)
        if isinstance(record, dict):
            out.setdefault(str(r["document_id"]), dict(record))
    return dict(sorted(out.items()))

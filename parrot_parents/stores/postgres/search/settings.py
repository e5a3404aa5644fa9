"""The session settings of a search's statement: the HNSW scan's, and which scans the
planner may use (:func:`search_settings`); and the size of the graph the scan walks
(:class:`GraphSize`), which its ``ef_search`` grows with."""

from __future__ import annotations

import time

from parrot_parents.stores.identifiers import CollectionName, derived_name
from parrot_parents.stores.postgres.collections.partitions import LOOKUP_TTL_S
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection
from parrot_parents.stores.postgres.connections.reads import Settings
from parrot_parents.stores.postgres.search.request import SearchRequest
from parrot_parents.stores.search_options import HNSWQueryOptions

__all__ = ["GraphSize", "search_settings"]


class GraphSize:
    """A searcher's view of how many vectors its collection's HNSW graph holds (the
    catalog's ``reltuples`` of the index), read again after
    :data:`~parrot_parents.stores.postgres.collections.partitions.LOOKUP_TTL_S`, as a
    partition's indexes are: both are the catalog's estimates."""

    def __init__(self) -> None:
        self._read: tuple[float, float | None] | None = None

    async def children(self, conn: ReadConnection, name: CollectionName) -> float | None:
        """The vectors in the graph, read on the search's connection when the last read
        is old; None without the index (dropped, or deferred during a bulk load) or
        before the server has counted it."""
        now = time.monotonic()
        if self._read is not None and now - self._read[0] < LOOKUP_TTL_S:
            return self._read[1]
        rows = await conn.fetch_with(
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)",
            (name.quoted(derived_name(name.table, "embedding_hnsw")),),
            (),
        )
        size = float(rows[0][0]) if rows and rows[0][0] is not None else None
        found = size if size is not None and size >= 0 else None
        self._read = (now, found)
        return found


def search_settings(
    options: HNSWQueryOptions,
    request: SearchRequest,
    index_only: bool = False,
    partition: bool = False,
    bitmaps: bool = True,
    children: float | None = None,
) -> Settings:
    """The session settings a search's statement needs under ``options`` (the store's
    search options), every one that any search statement changes: they stay on the read
    pool's connection after it.

    Without a filter, sequential scans are disabled: the planner would otherwise pick
    a full scan and sort on a small table with a large ``ef_search``, several times
    slower (docs/performance.md, "Does the planner use the HNSW index?"), or scan the
    table for the lexical branch's capped candidates; and so are parallel workers: at
    a million children the planner ran the lexical branch's bitmap heap scan under a
    ``Gather``, and starting the workers cost more than the scan (lexical search p50
    30.5 against 15.1 ms on two cores, docs/performance.md). With a filter the statement is
    planned for the filter's values (a custom plan each time: a generic one would not
    know how many children they keep), and the planner stays free,
    unless ``index_only``: a ranking kept on its indexes
    (:mod:`~parrot_parents.stores.postgres.search.filter_plan`), with no sequential
    scan, and no bitmap scan unless ``bitmaps`` (a lexical branch ranked in SQL reads
    the GIN index of the query's lexemes through one). The planner has no statistics
    for a range or a pattern on a metadata key, and takes a conjunction of them to
    keep a row or two: left free, it then ranks every child the filter keeps by a
    sequential scan and a sort (at 100k children, a scope ANDed with a range keeping
    20 %: 700 ms in hybrid mode, against 20 ms through the indexes). ``partition``: the
    search walks a partition key value's own graph, with ``partition_ef_search``; its
    statement holds the value and runs a generic plan, made at its first run on a
    connection and kept with the prepared statement (the value's indexes are chosen
    by the value, whatever the rest of the filter keeps). Otherwise ``ef_search``
    grows with ``children``, the vectors of the collection's graph
    (:meth:`~parrot_parents.stores.search_options.HNSWQueryOptions.ef_at`).
    """
    hnsw: Settings = ()
    if request.mode != "lexical":
        ef = options.partition_ef_search if partition else options.ef_at(children)
        hnsw = (
            ("hnsw.ef_search", str(max(ef, min(request.depth, 1000)))),
            ("hnsw.iterative_scan", options.iterative_scan),
            ("hnsw.max_scan_tuples", str(options.max_scan_tuples)),
        )
    if not request.filter:
        return (
            *hnsw,
            ("enable_seqscan", "off"),
            ("enable_bitmapscan", None),
            ("plan_cache_mode", None),
            ("max_parallel_workers_per_gather", "0"),
        )
    scans = "off" if index_only else None
    return (
        *hnsw,
        ("enable_seqscan", scans),
        ("enable_bitmapscan", None if bitmaps else scans),
        ("plan_cache_mode", "force_generic_plan" if partition else "force_custom_plan"),
        ("max_parallel_workers_per_gather", None),
    )

"""Bulk loading: the vector index deferred while an ingest writes, built once after."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from parrot_parents.loaders.report import IngestReport
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.protocols import BulkLoad

__all__ = ["bulk_writes", "wants_bulk_load"]


@contextlib.asynccontextmanager
async def bulk_writes(
    store: AbstractStore | None, wanted: bool, report: IngestReport
) -> AsyncIterator[None]:
    """The store's bulk load (vector index deferred) around the writes, when wanted."""
    if not wanted or not isinstance(store, BulkLoad):
        yield
        return
    await store.connect()  # bulk_load needs the connected engine
    async with store.bulk_load() as load:
        yield
    report.index_build_seconds = load.build_seconds


async def wants_bulk_load(store: AbstractStore | None, flag: bool | None = None) -> bool:
    """Whether to bulk load (vector index deferred) into ``store``.

    ``flag`` as given when not None (False for a store without
    :class:`~parrot_parents.stores.protocols.BulkLoad`); by default,
    True when the collection has no rows (new or empty) or lacks its vector index (a bulk
    load that could not build it): building the index once after the load is then far
    cheaper than inserting into it row by row (``python -m benchmarks run scale_write``).
    Into a filled collection, rebuilding the whole index for some new rows is not, so it stays.
    """
    if not isinstance(store, BulkLoad):
        return False
    if flag is not None:
        return flag
    await store.connect()  # the ingest's writer: a new collection is created, then counted
    return await store.count() == 0 or not await store.vector_index_exists()

"""Marker backfill: add ``is_chunk`` markers to the legacy rows of a collection, in place.

Each row's ``cmetadata`` is rewritten with
:func:`~parrot_parents.stores.records.markers.normalize_markers` (the rule of new writes),
without re-embedding. It stays out of live traffic's way: keyset batches in primary-key
order, one short transaction each, updating only changed rows whose ``cmetadata`` is still
what was read; row locks only, bounded by ``lock_timeout`` (a batch is retried, then the
run stops, resumable). The position and counters are stored in ``parrot_parents_backfill``
with each batch, so an interrupted run resumes after its last committed batch.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    MetaData,
    Table,
    Text,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import NullPool

from parrot_parents.errors import ConfigurationError, StoreError
from parrot_parents.stores.identifiers import validate_identifier
from parrot_parents.stores.postgres.connections.engine import make_engine, sqlstate_of
from parrot_parents.stores.records.markers import normalize_markers

__all__ = ["PROGRESS_TABLE", "BackfillReport", "backfill_markers", "progress_table"]

#: Table of checkpoints, one row per collection (created by migration 0003, or here).
PROGRESS_TABLE = "parrot_parents_backfill"
_RETRY_SQLSTATES = {"55P03", "40P01", "40001"}  # lock timeout, deadlock, serialization


def progress_table(schema: str = "public") -> Table:
    """The ``parrot_parents_backfill`` table (same columns as migration 0003)."""
    return Table(
        PROGRESS_TABLE,
        MetaData(),
        Column("collection_schema", Text, primary_key=True),
        Column("collection", Text, primary_key=True),
        Column("last_id", Text),
        Column("scanned", BigInteger, nullable=False, server_default="0"),
        Column("updated", BigInteger, nullable=False, server_default="0"),
        Column("batches", BigInteger, nullable=False, server_default="0"),
        Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("finished_at", DateTime(timezone=True)),
        schema=validate_identifier(schema, "schema"),
    )


@dataclass(frozen=True)
class BackfillReport:
    """State of a collection's backfill pass after a run.

    Attributes:
        collection, schema: the collection.
        scanned, updated, batches: totals of the pass so far (earlier interrupted runs
            included); ``updated`` counts rows whose markers changed.
        last_id: primary key of the last row scanned; None before the first batch.
        finished: the pass reached the end of the table.
        resumed_from: the ``last_id`` this run started after, when it resumed a pass.
        seconds: duration of this run.
    """

    collection: str
    schema: str
    scanned: int
    updated: int
    batches: int
    last_id: str | None
    finished: bool
    resumed_from: str | None
    seconds: float


def _check_positive(name: str, value: Any, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")


async def backfill_markers(
    collection: str,
    *,
    dsn: str | None = None,
    engine: AsyncEngine | None = None,
    schema: str = "public",
    batch_size: int = 1000,
    restart: bool = False,
    max_batches: int | None = None,
    pause_s: float = 0.0,
    lock_timeout_ms: int = 2000,
    retries: int = 3,
    on_batch: Callable[[BackfillReport], None] | None = None,
) -> BackfillReport:
    """Add hierarchy markers to every row of ``collection`` that lacks them.

    Args:
        collection: the collection (table) name.
        dsn: PostgreSQL DSN (default ``$PARROT_PARENTS_DSN``, else the embedded server);
            ignored when ``engine`` is given.
        engine: an async engine to use (not disposed).
        schema: the collection's schema, default ``"public"``.
        batch_size: rows per transaction, default 1000.
        restart: ignore an unfinished pass and start from the first row.
        max_batches: stop (resumably) after this many batches in this run; None: to the end.
        pause_s: sleep between batches, to throttle on a busy server; default 0.
        lock_timeout_ms: longest wait for a row lock held by another writer, default 2000.
        retries: attempts of a batch that hit a lock timeout or deadlock, default 3.
        on_batch: called with the running totals after each committed batch.

    Returns:
        The pass's :class:`BackfillReport` (``finished`` False when ``max_batches`` stopped it).

    Raises:
        ConfigurationError: bad names or numbers, or the collection does not exist.
        StoreError: a batch kept failing (the committed batches stay; run again to resume).
    """
    validate_identifier(collection, "collection")
    validate_identifier(schema, "schema")
    _check_positive("batch_size", batch_size)
    _check_positive("max_batches", max_batches, allow_none=True)
    _check_positive("lock_timeout_ms", lock_timeout_ms)
    if pause_s < 0:
        raise ConfigurationError(f"pause_s must be >= 0, got {pause_s!r}")
    owned = engine is None
    if engine is None:
        engine = await make_engine(dsn, poolclass=NullPool)
    try:
        runner = _Backfill(engine, collection, schema, batch_size, lock_timeout_ms, retries)
        return await runner.run(restart, max_batches, pause_s, on_batch)
    finally:
        if owned:
            await engine.dispose()


@dataclass
class _Backfill:
    engine: AsyncEngine
    collection: str
    schema: str
    batch_size: int
    lock_timeout_ms: int
    retries: int

    def __post_init__(self) -> None:
        self.retries = max(0, self.retries)
        self.table = Table(
            self.collection,
            MetaData(),
            Column("id", Text, primary_key=True),
            Column("cmetadata", JSONB),
            schema=self.schema,
        )
        self.progress = p = progress_table()
        #: This collection's row of the progress table.
        self.mine = (p.c.collection_schema == self.schema) & (p.c.collection == self.collection)
        # Identifiers are validated; the values are bound arrays.
        self.update_sql = text(
            f'UPDATE "{self.schema}"."{self.collection}" AS t SET cmetadata = v.new_meta::jsonb'
            " FROM unnest(CAST(:ids AS text[]), CAST(:olds AS text[]), CAST(:news AS text[]))"
            " AS v(id, old_meta, new_meta)"
            " WHERE t.id = v.id AND t.cmetadata = v.old_meta::jsonb"
            " RETURNING t.id"
        )

    async def _start(self, restart: bool) -> dict[str, Any]:
        p = self.progress
        key = {"collection_schema": self.schema, "collection": self.collection}
        async with self.engine.begin() as conn:
            found = await conn.execute(
                text("SELECT to_regclass(format('%I.%I', CAST(:s AS text), CAST(:t AS text)))"),
                {"s": self.schema, "t": self.collection},
            )
            if found.scalar_one() is None:
                raise ConfigurationError(
                    f"collection {self.schema}.{self.collection} does not exist"
                )
            await conn.run_sync(p.create, checkfirst=True)
            row = (await conn.execute(select(p).where(self.mine))).first()
            if row is not None and row.finished_at is None and not restart:
                return dict(row._mapping)
            fresh = {**key, "last_id": None, "scanned": 0, "updated": 0, "batches": 0}
            stmt = pg_insert(p).values(**fresh)
            stmt = stmt.on_conflict_do_update(
                index_elements=[p.c.collection_schema, p.c.collection],
                set_={
                    **{k: stmt.excluded[k] for k in ("last_id", "scanned", "updated", "batches")},
                    "started_at": func.now(),
                    "updated_at": func.now(),
                    "finished_at": None,
                },
            )
            await conn.execute(stmt)
            return fresh

    async def run(
        self,
        restart: bool,
        max_batches: int | None,
        pause_s: float,
        on_batch: Callable[[BackfillReport], None] | None,
    ) -> BackfillReport:
        started = time.perf_counter()
        state = await self._start(restart)
        resumed_from = state["last_id"] if state["batches"] else None
        done = 0
        finished = False
        while max_batches is None or done < max_batches:
            finished = await self._batch_with_retries(state)
            if finished:
                break
            done += 1
            if on_batch is not None:
                on_batch(self._report(state, False, resumed_from, started))
            if pause_s:
                await asyncio.sleep(pause_s)
        return self._report(state, finished, resumed_from, started)

    def _report(
        self, state: dict[str, Any], finished: bool, resumed_from: str | None, started: float
    ) -> BackfillReport:
        return BackfillReport(
            collection=self.collection,
            schema=self.schema,
            scanned=state["scanned"],
            updated=state["updated"],
            batches=state["batches"],
            last_id=state["last_id"],
            finished=finished,
            resumed_from=resumed_from,
            seconds=round(time.perf_counter() - started, 3),
        )

    async def _batch_with_retries(self, state: dict[str, Any]) -> bool:
        attempt = 0
        while True:
            try:
                async with self.engine.begin() as conn:
                    new_state = await self._batch(conn, state)
                break
            except DBAPIError as exc:
                if sqlstate_of(exc) not in _RETRY_SQLSTATES or attempt == self.retries:
                    raise StoreError(
                        f"backfill of {self.schema}.{self.collection} stopped after row "
                        f"{state['last_id']!r}: {type(exc.orig).__name__}",
                        hint="run the backfill again to resume from there",
                    ) from exc
                attempt += 1
                await asyncio.sleep(0.2 * attempt)
        # Committed: only now does the in-memory position move.
        if new_state is not None:
            state.update(new_state)
        return new_state is None

    async def _batch(self, conn: AsyncConnection, state: dict[str, Any]) -> dict[str, Any] | None:
        """One transaction: read a batch, fix its markers, move the checkpoint.

        Returns the new position and totals, or None when the table is exhausted.
        """
        t, p = self.table, self.progress
        await conn.execute(
            text("SELECT set_config('lock_timeout', :v, true)"),
            {"v": f"{self.lock_timeout_ms}ms"},
        )
        stmt = select(t.c.id, t.c.cmetadata).order_by(t.c.id).limit(self.batch_size)
        if state["last_id"] is not None:
            stmt = stmt.where(t.c.id > state["last_id"])
        rows = (await conn.execute(stmt)).all()
        if not rows:
            await conn.execute(
                p.update().where(self.mine).values(finished_at=func.now(), updated_at=func.now())
            )
            return None
        ids, olds, news = [], [], []
        for row in rows:
            old = dict(row.cmetadata or {})
            new = normalize_markers(old)
            if new != old:
                ids.append(row.id)
                olds.append(json.dumps(old))
                news.append(json.dumps(new))
        updated = 0
        if ids:
            result = await conn.execute(self.update_sql, {"ids": ids, "olds": olds, "news": news})
            updated = len(result.all())
        new_state = {
            "last_id": rows[-1].id,
            "scanned": state["scanned"] + len(rows),
            "updated": state["updated"] + updated,
            "batches": state["batches"] + 1,
        }
        await conn.execute(p.update().where(self.mine).values(**new_state, updated_at=func.now()))
        return new_state

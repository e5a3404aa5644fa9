"""The store's guard of a ``bm25`` index on a pg_textsearch release that can hang.

Two hangs, read in pg_textsearch 1.0.0's source (``src/state/state.c``, ``src/mod.c``,
``src/segment/segment.c``, ``src/query/bmw.c``) and upstream
(https://github.com/timescale/pg_textsearch/issues/370,
https://github.com/timescale/pg_textsearch/pull/360,
https://github.com/timescale/pg_textsearch/issues/384):

* **A deadlock the server cannot see.** A writing transaction takes the index's LWLock at
  its first row and holds it until it ends; the collection's statistics triggers take an
  advisory lock at the end of each write statement
  (:mod:`~parrot_parents.stores.postgres.search.lexical`). A writer that inserts first
  (``add_documents``) then waits for that lock holding the LWLock, while a writer that
  deleted first (a replace, a delete) holds it and waits for the LWLock. One edge of the
  cycle is an LWLock, so the deadlock detector never breaks it and neither backend can be
  cancelled; every other writer and ranked search then waits on ``LWLock``/``extension``.
  ``python -m benchmarks run bm25_stress --no-guard`` hangs so within its first second.
* **A scan that spins.** New rows go to a shared in-memory *memtable*; a *spill* (past
  ``pg_textsearch.memtable_spill_threshold``, at a large transaction's commit, or by a
  ``VACUUM``) writes it to a segment, each term's postings in the order they were appended,
  while the segment's document ids follow the rows' CTIDs. Rows appended out of CTID order
  (writers on different connections each fill their own heap page; ``VACUUM`` frees space
  lower in the table) make a segment whose posting blocks are not sorted, and a ranked
  multi-term scan over it can loop for ever in ``seek_term_to_doc`` (no interrupt check)
  holding the LWLock. The memtable itself is scored exhaustively, in any order, and an
  index build reads the table in CTID order.

The guard (:class:`Bm25Guard`, on a collection whose ``bm25`` index is on a release older
than :data:`~parrot_parents.stores.postgres.search.bm25_index.SAFE_VERSION`):

1. **Writers** (writes and deletes) take the collection's exclusive transaction-level
   advisory lock before their first statement (:meth:`Bm25Guard.lock`): no writer then
   holds the LWLock or the statistics lock without it, so the cycle cannot form, and a
   writer waits on a lock that can be cancelled and keeps maintenance out.
2. Their transaction **never spills**: ``pg_textsearch.memtable_spill_threshold`` and
   ``pg_textsearch.bulk_load_threshold`` are 0 for it (``set_config(..., true)``). Both are
   superuser settings: for a role that is not one (the embedded server's is), the guard is
   step 1 alone.
3. **Autovacuum is off** for the table (``autovacuum_enabled = false``): its ``VACUUM``
   would spill the memtable.
4. **Maintenance** (:meth:`Bm25Guard.maintain`) holds the same lock at session level,
   builds a new index beside the old one (serially: sorted segments, an empty memtable)
   and swaps them, then runs ``VACUUM (ANALYZE)`` of the table, whose spill finds nothing
   to write. It runs after a write or delete that finds it due, by autovacuum's rule with
   its default thresholds (:data:`DEAD_ROWS`, :data:`NEW_ROWS`), and on
   :meth:`~parrot_parents.stores.postgres.PgVectorStore.vacuum`. Writers wait for it: at
   100k children on two shared cores the build took 5 s and a ``VACUUM`` 27 s.

Searches take no lock: the LWLock already keeps a scan out of a writer's transaction, and
without an unsorted segment there is nothing to spin on. What the guard cannot cover: rows
written to the table by anything but the store, and an anti-wraparound autovacuum (it runs
even with autovacuum off; every 200 million transactions by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import CollectionName, derived_name
from parrot_parents.stores.postgres.search.bm25_index import (
    SAFE_VERSION,
    bm25_index_name,
    bm25_index_sql,
    parse_version,
)

__all__ = [
    "DEAD_ROWS",
    "GUARD_KEY",
    "NEW_ROWS",
    "Bm25Guard",
    "GuardChoice",
    "describe_guard",
    "maintenance_due",
    "needs_guard",
    "read_bm25_version",
    "read_superuser",
    "validate_guard_choice",
]

GuardChoice = Literal["auto", "writers", "off"]


#: The high 32 bits of the collection lock's key; the low 32 are the table's oid. (The
#: store's other advisory locks use the two-key form, another key space.)
GUARD_KEY = 0x626D3235  # "bm25"

#: Maintenance is due, as autovacuum's default rule has it, when the dead rows exceed
#: ``DEAD_ROWS[0] + DEAD_ROWS[1] * live rows``, or the rows inserted since the last
#: ``VACUUM`` (they sit in the memtable) exceed ``NEW_ROWS[0] + NEW_ROWS[1] * live rows``.
DEAD_ROWS = (50, 0.2)
NEW_ROWS = (1000, 0.2)

_SETTINGS = ("pg_textsearch.memtable_spill_threshold", "pg_textsearch.bulk_load_threshold")
_KEY_SQL = "(CAST(:space AS bigint) << 32) | CAST(CAST(:table AS regclass) AS oid)::bigint"
_STATS_SQL = (
    "pg_stat_get_dead_tuples(CAST(:table AS regclass)),"
    " pg_stat_get_live_tuples(CAST(:table AS regclass)),"
    " pg_stat_get_ins_since_vacuum(CAST(:table AS regclass))"
)
_LOCK_SQL = text(
    f"SELECT pg_advisory_xact_lock({_KEY_SQL}),"
    f" set_config('{_SETTINGS[0]}', '0', true), set_config('{_SETTINGS[1]}', '0', true),"
    f" {_STATS_SQL}"
)
_LOCK_ONLY_SQL = text(f"SELECT pg_advisory_xact_lock({_KEY_SQL}), {_STATS_SQL}")


def validate_guard_choice(value: object) -> GuardChoice:
    """``auto`` (guard a ``bm25`` index where its release needs it), ``writers`` (its
    writers' lock alone, step 1) or ``off``.

    Raises:
        ConfigurationError: anything else.
    """
    if value == "auto" or value == "writers" or value == "off":
        return value
    raise ConfigurationError(f"bm25_guard must be auto, writers or off; got {value!r}")


def read_bm25_version(conn: Connection) -> tuple[int, ...] | None:
    """The pg_textsearch version created in this database, as integers, or None."""
    found = conn.execute(
        text("SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'")
    ).scalar_one_or_none()
    return None if found is None else parse_version(found)


def maintenance_due(dead: int, live: int, inserted: int) -> bool:
    """Whether a guarded collection's maintenance is due, by autovacuum's default rule:
    ``dead`` rows over :data:`DEAD_ROWS`, or rows ``inserted`` since the last ``VACUUM``
    over :data:`NEW_ROWS`, each against the ``live`` rows (the server's statistics)."""
    return dead > DEAD_ROWS[0] + DEAD_ROWS[1] * live or (
        inserted > NEW_ROWS[0] + NEW_ROWS[1] * live
    )


def needs_guard(version: tuple[int, ...] | None) -> bool:
    """Whether a ``bm25`` index on this release needs the guard (older than
    :data:`~parrot_parents.stores.postgres.search.bm25_index.SAFE_VERSION`)."""
    return version is not None and version < SAFE_VERSION


def read_superuser(conn: Connection) -> bool:
    """Whether this session's role is a superuser (the whole guard needs one)."""
    return bool(
        conn.execute(
            text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        ).scalar_one_or_none()
    )


def describe_guard(version: tuple[int, ...] | None, superuser: bool) -> str:
    """What the store does to a ``bm25`` index of pg_textsearch ``version`` (None: the
    server has none) for a role that is or is not a superuser, in one line (``doctor``)."""
    if version is None:
        return "none (no pg_textsearch)"
    shown = ".".join(map(str, version))
    if not needs_guard(version):
        return f"none needed (pg_textsearch {shown})"
    if superuser:
        return (
            f"on (pg_textsearch {shown}): writers under one advisory lock per collection, "
            "no memtable spills, autovacuum off, the index rebuilt before each VACUUM"
        )
    return (
        f"writers only (pg_textsearch {shown}, a role that is not a superuser): writers "
        "under one advisory lock per collection; spills and autovacuum as the server has them"
    )


@dataclass(frozen=True)
class Bm25Guard:
    """The guard of one collection's ``bm25`` index (module docstring).

    Attributes:
        name: the collection.
        config: its text-search configuration (the ``bm25`` index's ``text_config``).
        full: the whole guard (steps 1-4), which needs a superuser role; False: step 1
            only (the lock of the writers), and maintenance a plain ``VACUUM``.
    """

    name: CollectionName
    config: str
    full: bool = True

    @property
    def index(self) -> str:
        """The schema-qualified, quoted name of the collection's ``bm25`` index."""
        return self.name.quoted(bm25_index_name(self.name.table))

    def _params(self) -> dict[str, Any]:
        return {"space": GUARD_KEY, "table": self.name.quoted()}

    async def lock(self, conn: Any) -> bool:
        """In a writer's transaction, before it writes: take the collection's exclusive
        lock (held until the transaction ends) and keep the transaction from spilling.

        Returns:
            Whether maintenance is due (read from the server's statistics, which lag
            the last second or so of writes).
        """
        statement = _LOCK_SQL if self.full else _LOCK_ONLY_SQL
        row = (await conn.execute(statement, self._params())).one()
        return maintenance_due(*(int(n or 0) for n in row[-3:]))

    def configure(self, conn: Connection) -> None:
        """Turn autovacuum off for the table (the whole guard), unless it already is (in
        the caller's transaction; takes a lock that blocks no reader or writer)."""
        if not self.full:
            return
        off = conn.execute(
            text(
                "SELECT coalesce('autovacuum_enabled=false' = ANY (reloptions), false)"
                " FROM pg_class WHERE oid = CAST(:table AS regclass)"
            ),
            {"table": self.name.quoted()},
        ).scalar_one()
        if not off:
            conn.execute(text(f"ALTER TABLE {self.name.quoted()} SET (autovacuum_enabled = false)"))

    async def maintain(self, engine: AsyncEngine, *, force: bool = False) -> bool:
        """Rebuild the index and vacuum the table under the collection's lock (module
        docstring, step 4), when due or ``force``; waits for the writers in flight.

        Returns:
            Whether it ran (another process may have run it first).

        Raises:
            sqlalchemy / asyncpg errors, for the caller's ``store_errors``.
        """
        params = self._params()
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"SELECT pg_advisory_lock({_KEY_SQL})"), params)
            try:
                if not force:
                    stats = (await conn.execute(text(f"SELECT {_STATS_SQL}"), params)).one()
                    if not maintenance_due(*(int(n or 0) for n in stats)):
                        return False
                if self.full:
                    await self._rebuild(conn)
                await conn.execute(text(f"VACUUM (ANALYZE) {self.name.quoted()}"))
                return True
            finally:
                await conn.execute(text(f"SELECT pg_advisory_unlock({_KEY_SQL})"), params)

    async def _rebuild(self, conn: Any) -> None:
        """Build a new index beside the old one, then swap them in one short transaction.

        Not ``REINDEX``: it keeps the index's oid, and pg_textsearch 1.x before 1.3 keeps
        per-backend state under that oid, which then points into the old file
        (timescale/pg_textsearch#390: "could not read blocks"). The build reads the table
        serially, in CTID order, the order a segment must be in; searches use the old
        index meanwhile and wait only for the swap.
        """
        schema, table = self.name.schema, self.name.table
        index, fresh = bm25_index_name(table), derived_name(table, "bm25_new")
        await conn.execute(text(f"DROP INDEX IF EXISTS {self.name.quoted(fresh)}"))
        await conn.execute(text("SET max_parallel_maintenance_workers = 0"))
        try:
            await conn.execute(text(bm25_index_sql(schema, table, fresh, self.config)))
        finally:
            await conn.execute(text("RESET max_parallel_maintenance_workers"))
        # One simple query of two statements: one implicit transaction, on this session
        # (whose lock keeps the writers out; they hold the pool's other connections).
        driver = (await conn.get_raw_connection()).driver_connection
        await driver.execute(
            f"DROP INDEX {self.name.quoted(index)};"
            f' ALTER INDEX {self.name.quoted(fresh)} RENAME TO "{index}"'
        )

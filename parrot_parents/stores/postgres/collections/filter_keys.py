"""Filter keys: metadata keys whose value gets a B-tree index and planner statistics.

Metadata lives in one ``jsonb`` column. Its GIN index serves containment
(``{"tenant": "t07"}``), but not a range (``{"year": {"$gte": 2020}}``), and PostgreSQL
keeps no statistics of one key's values: it takes a range on a key to keep a fixed share
of the rows, and a conjunction of two to keep one or two. A filtered search then has to
count a sample of the table to plan (:mod:`~parrot_parents.stores.postgres.search.filter_plan`),
and the exact ranking of a selective range reads the whole table.

A collection's *filter key* gets, in the collection's own schema:

* a B-tree index over the key's value, ``((cmetadata['key']))``: a range, ``$in`` or an
  equality on the key reads the rows it keeps through it;
* the statistics of that expression (``ANALYZE`` keeps them for an index's expression),
  and a statistics object on ``jsonb_typeof(cmetadata['key'])``, the type guard of a range
  (:func:`~parrot_parents.stores.filters.compile_filter`), so the planner estimates a
  filter on the key as it does a column's.

A filter on a filter key is compiled to conditions on the key's value, the expression the
index holds (``cmetadata['key'] = v``, ``= ANY(...)``: the ``keyed`` of
:func:`~parrot_parents.stores.filters.compile_filter`); a search plans from the planner's
estimate, never from a sample. Measured: docs/performance.md, "Filters at every
selectivity".

Each index carries its key in its comment (JSON, ``{"filter_key": key}``), which is how a
searcher finds a collection's filter keys (:class:`FilterKeyLookup`). Building one reads
the table once and holds its writers meanwhile (``CREATE INDEX``, then ``ANALYZE``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import derived_name
from parrot_parents.stores.partition_keys import validate_partition_key
from parrot_parents.stores.postgres.collections.partitions import LOOKUP_TTL_S, sql_literal

if TYPE_CHECKING:
    from parrot_parents.stores.identifiers import CollectionName
    from parrot_parents.stores.postgres.connections.read_pool import ReadConnection

__all__ = [
    "LOOKUP_TTL_S",
    "FilterKeyLookup",
    "ensure_filter_keys",
    "filter_key_index_name",
    "filter_key_statistics_name",
    "missing_filter_keys",
    "noted",
    "read_filter_keys",
    "validate_filter_keys",
]

_COMMENT_FIELD = "filter_key"
_READ_SQL = (
    "SELECT obj_description(i.indexrelid, 'pg_class') FROM pg_index i"
    " WHERE i.indrelid = to_regclass({table})"
)


def validate_filter_keys(keys: object) -> tuple[str, ...]:
    """``keys`` (a list, tuple or set; None for none) checked, each once, in order:
    metadata keys of 1 to 256 characters, not starting with ``$``, with no NUL and no
    lone surrogate.

    Raises:
        ConfigurationError: a bad key, or anything but a list of keys.
    """
    if keys is None:
        return ()
    if isinstance(keys, str):
        raise ConfigurationError(
            f"filter_keys must be a list of metadata keys, got the string {keys!r}",
            hint=f"write filter_keys=[{keys!r}]",
        )
    if not isinstance(keys, list | tuple | set | frozenset):
        raise ConfigurationError(
            f"filter_keys must be a list of metadata keys, got {type(keys).__name__}"
        )
    out: dict[str, None] = {}
    for key in keys:
        try:
            checked = _checked(key)
        except ConfigurationError as exc:
            raise ConfigurationError(exc.message.replace("partition_key", "filter key")) from exc
        out[checked] = None
    return tuple(out)


def _checked(key: object) -> str:
    if key is None:
        raise ConfigurationError("filter key must be a metadata key, got None")
    # The partition key's rules, without its ban on the hierarchy's keys: a filter on
    # document_id (a list of documents) is a filter key's first use.
    try:
        checked = validate_partition_key(key)
    except ConfigurationError as exc:
        if "hierarchy writes" not in exc.message:
            raise
        assert isinstance(key, str)
        return key
    assert checked is not None
    return checked


def filter_key_index_name(table: str, key: str) -> str:
    """The name of ``key``'s B-tree index in the collection ``table``:
    ``<table>_fkey_<the first 16 hex digits of the SHA-256 of the key>``; its statistics
    object is ``<table>_fkst_<the same digits>``."""
    return derived_name(table, f"fkey_{_digest(key)}")


def filter_key_statistics_name(table: str, key: str) -> str:
    """The name of ``key``'s statistics object (:func:`filter_key_index_name`)."""
    return derived_name(table, f"fkst_{_digest(key)}")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def read_filter_keys(conn: Connection, name: CollectionName) -> frozenset[str]:
    """The collection's filter keys (those with an index), on a SQLAlchemy connection."""
    rows = conn.execute(text(_READ_SQL.format(table=":table")), {"table": name.quoted()})
    return _keys(r[0] for r in rows)


def _keys(comments: Iterable[str | None]) -> frozenset[str]:
    return frozenset(noted(comments, _COMMENT_FIELD))


def noted(comments: Iterable[str | None], field: str) -> list[str]:
    """The strings that ``comments`` (of indexes: JSON objects, or anything else) hold
    under ``field``, one per comment that holds one, in order."""
    found = []
    for comment in comments:
        if not comment or not comment.startswith("{"):
            continue
        try:
            value = json.loads(comment)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get(field), str):
            found.append(value[field])
    return found


def missing_filter_keys(conn: Connection, name: CollectionName, keys: Iterable[str]) -> None:
    """Refuse a reader asking for filter keys the collection lacks (it builds nothing).

    Raises:
        ConfigurationError: naming the keys, and how to give them.
    """
    have = read_filter_keys(conn, name)
    lacking = [k for k in keys if k not in have]
    if lacking:
        listed = " ".join(json.dumps(k) for k in lacking)
        raise ConfigurationError(
            f"collection {name.table!r} has no filter keys {listed}",
            hint=f"open it with create=True, or run `parrot-parents filter-keys {name.table} "
            "KEY...`, to give them",
        )


def ensure_filter_keys(conn: Connection, name: CollectionName, keys: Iterable[str]) -> list[str]:
    """Give the collection the filter keys of ``keys`` it lacks (module docstring), in the
    caller's transaction, and ``ANALYZE`` it when one was added. Returns the keys added.
    ``keys`` must be checked (:func:`validate_filter_keys`)."""
    have = read_filter_keys(conn, name)
    added = [k for k in keys if k not in have]
    for key in added:
        value = f"(cmetadata[{sql_literal(key)}])"
        index = filter_key_index_name(name.table, key)
        # DDL takes no parameters: the key is written in as a quoted literal, and the
        # statements go to the driver as they are (a ``:`` in a key is no bind name).
        conn.exec_driver_sql(
            f'CREATE INDEX IF NOT EXISTS "{index}" ON {name.quoted()} USING btree ({value})'
        )
        comment = json.dumps({_COMMENT_FIELD: key})
        conn.exec_driver_sql(f"COMMENT ON INDEX {name.quoted(index)} IS {sql_literal(comment)}")
        stats = name.quoted(filter_key_statistics_name(name.table, key))
        conn.exec_driver_sql(
            f"CREATE STATISTICS IF NOT EXISTS {stats} ON (jsonb_typeof{value}) FROM {name.quoted()}"
        )
    if added:
        conn.exec_driver_sql(f"ANALYZE {name.quoted()}")
    return added


class FilterKeyLookup:
    """A searcher's view of its collection's filter keys, read again after
    :data:`~parrot_parents.stores.postgres.collections.partitions.LOOKUP_TTL_S` seconds
    (another process may have added one), as the values' indexes are."""

    def __init__(self) -> None:
        self._read: tuple[float, frozenset[str]] | None = None

    def forget(self) -> None:
        """Read them again at the next search (this process added one)."""
        self._read = None

    async def keys(self, conn: ReadConnection, name: CollectionName) -> frozenset[str]:
        """The filter keys, read on the search's connection when the last read is old."""
        now = time.monotonic()
        if self._read is not None and now - self._read[0] < LOOKUP_TTL_S:
            return self._read[1]
        rows = await conn.fetch_with(_READ_SQL.format(table="$1"), (name.quoted(),), ())
        keys = _keys(r[0] for r in rows)
        self._read = (now, keys)
        return keys

"""Value graphs: an HNSW graph of its own for each large value of a filter key.

An HNSW scan under a filter walks the collection's graph from the question outwards and
drops the rows the filter leaves out. Where the rows a value keeps lie far from the
question (a department's manuals, asked about something else), the walk meets them late:
on real text, a ``package`` keeping 20 % of 100k children found 0.65 of its true top 10
through the collection's graph (docs/performance.md, "Filters at every selectivity"). A
graph holding nothing but the value's rows finds them as an unfiltered search finds its
own.

Each value of a filter key (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`)
that keeps more children than a filtered search would rank exactly (:func:`floor_for`:
:data:`VALUE_GRAPH_FLOOR` up to 100k children, growing with the collection as the
search's threshold does) gets the indexes a partition key's
value has (:func:`~parrot_parents.stores.postgres.collections.partitions.ensure_partition_indexes`:
a partial HNSW index at half precision and a partial GIN index of the lexemes, named from
the key and the value), and a search whose filter fixes that value ranks through them as
it does for a partition key's value. A value keeping fewer is ranked exactly anyway
(about 2.5 µs a child). Each row holds one value of a key, so a key's graphs hold at most
the collection's children once more, and there are at most ``children / floor`` of them
(a ``document_id`` whose documents are all small gets none). The floor grows with the
collection because the graphs compete for the server's buffers: at a million children,
the 100 graphs of a key whose values keep 1 % each (1 GB beside the collection's 2 GB
graph, with 3 GB of ``shared_buffers``) were read from the operating system's cache at
most searches, and a value's search took 36 ms, where its exact ranking takes 25 to 31.

When they are built, each in the caller's transaction (every build reads the whole table
once, and the collection's writes wait for it):

* when a collection is given a filter key, or opened by a writer that asks for filter
  keys (:func:`ensure_value_graphs`, over every value of every filter key);
* at the end of a bulk load, after the collection's own graph;
* after a write, for the values its rows hold that have grown past the floor
  (:func:`ensure_written_value_graphs`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Table, text

from parrot_parents.stores.identifiers import CollectionName, collection_name
from parrot_parents.stores.partition_keys import PartitionValue, value_json
from parrot_parents.stores.postgres.collections.filter_keys import noted, read_filter_keys
from parrot_parents.stores.postgres.collections.partitions import (
    ensure_partition_indexes,
    partition_index_name,
    partition_values,
    sql_literal,
)
from parrot_parents.stores.postgres.search.filter_plan import threshold
from parrot_parents.stores.search_options import FILTER_EXACT_BELOW

__all__ = [
    "VALUE_GRAPH_FLOOR",
    "ensure_value_graphs",
    "ensure_written_value_graphs",
    "floor_for",
    "grown_values",
    "read_value_graphs",
]

#: A filter key's value gets a graph when it keeps more children than this.
VALUE_GRAPH_FLOOR = FILTER_EXACT_BELOW
_COMMENT_FIELD = "value_graph"


def floor_for(floor: int, children: int) -> int:
    """The floor of a collection of ``children``: ``floor`` grown as a filtered search's
    threshold for exact ranking grows
    (:func:`~parrot_parents.stores.postgres.search.filter_plan.threshold`: ``floor`` up to
    100k children, 15,900 at a million for the default 4,000)."""
    return threshold(floor, children)


def _children(conn: Connection, table: Table) -> int:
    """The rows of the collection's own HNSW index (those with a vector, as the catalog
    counts them; 0 without the index)."""
    own, _, _ = _hnsw_options(table)
    if own is None:
        return 0
    found = conn.execute(
        text("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(:i)"),
        {"i": _name(table).quoted(own)},
    ).scalar_one_or_none()
    return int(found or 0)


def _name(table: Table) -> CollectionName:
    return collection_name(table.name, table.schema or "public", reserved=True)


def grown_values(
    conn: Connection, table: Table, key: str, floor: int = VALUE_GRAPH_FLOOR
) -> list[PartitionValue]:
    """The values of ``key`` that more than ``floor`` children hold, and that get indexes
    (strings, integers, booleans), in the order of their JSON text."""
    qualified = _name(table).quoted()
    sql = (
        f"SELECT (cmetadata -> :key)::text, count(*) FROM {qualified}"
        " WHERE embedding IS NOT NULL AND cmetadata ? :key GROUP BY 1"
    )
    counts: dict[str, int] = {}
    for stored, n in conn.execute(text(sql), {"key": key}):
        if stored is not None:
            _count(counts, key, stored, int(n))
    grown = sorted(v for v, n in counts.items() if n > floor)
    return partition_values(({key: json.loads(v)} for v in grown), key)


def _count(counts: dict[str, int], key: str, stored: str, n: int) -> None:
    """Add ``n`` to the count of the value the server wrote as ``stored``, keyed by its
    canonical JSON: the server writes its own (a non-ASCII character as itself, say),
    and ``true`` must not count as ``1``. Values that get no indexes are left out."""
    value = json.loads(stored)
    if partition_values([{key: value}], key):
        as_json = value_json(value)
        counts[as_json] = counts.get(as_json, 0) + n


def _build(
    conn: Connection, table: Table, key: str, values: list[PartitionValue], m: int, ef: int
) -> list[str]:
    """The values' indexes built, each graph marked with its key in its comment (JSON,
    ``{"value_graph": key}``: how :func:`read_value_graphs` counts them)."""
    created = ensure_partition_indexes(conn, table, key, values, m, ef)
    graphs = {partition_index_name(table.name, key, v) for v in values}
    note = sql_literal(json.dumps({_COMMENT_FIELD: key}))
    name = _name(table)
    for index in created:
        if index in graphs:
            conn.exec_driver_sql(f"COMMENT ON INDEX {name.quoted(index)} IS {note}")
    return created


def read_value_graphs(conn: Connection, name: CollectionName) -> dict[str, int]:
    """How many value graphs each filter key of the collection has (keys with none left
    out), on a SQLAlchemy connection."""
    rows = conn.execute(
        text(
            "SELECT obj_description(i.indexrelid, 'pg_class') FROM pg_index i"
            " WHERE i.indrelid = to_regclass(:table)"
        ),
        {"table": name.quoted()},
    )
    counts: dict[str, int] = {}
    for key in noted((r[0] for r in rows), _COMMENT_FIELD):
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _literal(key: str) -> str:
    # Inside a statement sent through text(): the key must match the filter key's index
    # expression, so it is written in; quotes doubled, colons escaped for text().
    return "'" + key.replace("'", "''").replace(":", r"\:") + "'"


def _hnsw_options(table: Table) -> tuple[str | None, int, int]:
    """The name, ``m`` and ``ef_construction`` of the collection's own HNSW index."""
    for index in table.indexes:
        options = index.dialect_options["postgresql"]
        if options["using"] == "hnsw":
            built = options["with"] or {}
            m, ef = int(built.get("m", 16)), int(built.get("ef_construction", 64))
            return index.name if isinstance(index.name, str) else None, m, ef
    return None, 16, 64


def ensure_value_graphs(
    conn: Connection,
    table: Table,
    floor: int | None = VALUE_GRAPH_FLOOR,
    keys: Iterable[str] | None = None,
) -> list[str]:
    """Build the missing value graphs of every value of ``keys`` (the collection's filter
    keys when None) keeping more than ``floor`` children (grown with the collection:
    :func:`floor_for`; None: build none), in the
    caller's transaction, with the collection's HNSW parameters. Returns the indexes
    created (HNSW and GIN)."""
    if floor is None:
        return []
    floor = floor_for(floor, _children(conn, table))
    chosen = read_filter_keys(conn, _name(table)) if keys is None else keys
    _, m, ef = _hnsw_options(table)
    created: list[str] = []
    for key in sorted(chosen):
        values = grown_values(conn, table, key, floor=floor)
        created += _build(conn, table, key, values, m, ef)
    return created


def ensure_written_value_graphs(
    conn: Connection,
    table: Table,
    rows: Iterable[Mapping[str, Any]],
    floor: int | None = VALUE_GRAPH_FLOOR,
    keys: Iterable[str] | None = None,
) -> list[str]:
    """Before a write of ``rows`` (dicts with ``cmetadata`` and ``embedding``): build the
    graphs of the values of the collection's filter keys (``keys``, read when None) that
    the rows with a vector hold, that have none yet, and that will keep more than
    ``floor`` children (:func:`floor_for`; those stored, counted through each key's
    index, and the written ones; a replaced document's rows are counted twice). Built
    first in the write's transaction, before its rows lock the table, as a partition
    key's are (two writers then queue on the builds' lock instead of deadlocking).
    Nothing while the collection's own HNSW index is missing (a bulk load builds them at
    its end), or ``floor`` is None. Two statements when no value grows past the floor
    (the catalog's, and one count over every key). Returns the indexes created."""
    name = _name(table)
    chosen = sorted(read_filter_keys(conn, name) if keys is None else keys)
    if floor is None or not chosen:
        return []
    held = [r["cmetadata"] for r in rows if r.get("embedding") is not None]
    adding: dict[str, dict[str, int]] = {}
    names: dict[str, tuple[str, str]] = {}
    for key in chosen:
        for meta in held:
            value = meta.get(key)
            if value is None or not partition_values([meta], key):
                continue
            as_json = value_json(value)
            counted = adding.setdefault(key, {})
            counted[as_json] = counted.get(as_json, 0) + 1
            names.setdefault(partition_index_name(table.name, key, value), (key, as_json))
    own, m, ef = _hnsw_options(table)
    if not names or own is None:
        return []
    found, children, present = conn.execute(
        text(
            "SELECT to_regclass(:own) IS NOT NULL,"
            " coalesce((SELECT greatest(reltuples, 0)::bigint FROM pg_class"
            " WHERE oid = to_regclass(:own)), 0),"
            " ARRAY(SELECT c.relname FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = :schema"
            " AND c.relname = ANY(:names))"
        ),
        {"own": name.quoted(own), "schema": name.schema, "names": list(names)},
    ).one()
    if not found:
        return []
    lacking: dict[str, dict[str, int]] = {}
    built = set(present)
    for index, (key, as_json) in names.items():
        if index not in built:
            lacking.setdefault(key, {})[as_json] = adding[key][as_json]
    grown = _grown_among(conn, table, lacking, floor_for(floor, int(children)))
    created: list[str] = []
    for key, values in grown.items():
        created += _build(conn, table, key, values, m, ef)
    return created


def _grown_among(
    conn: Connection, table: Table, lacking: Mapping[str, Mapping[str, int]], floor: int
) -> dict[str, list[PartitionValue]]:
    """Of ``lacking`` (``{key: {value as JSON: children a write adds}}``), the values that
    will keep more than ``floor`` children: stored ones counted in one statement, each
    key through its own index."""
    if not lacking:
        return {}
    qualified = _name(table).quoted()
    parts: list[str] = []
    params: dict[str, Any] = {}
    for i, (key, values) in enumerate(sorted(lacking.items())):
        parts.append(
            f"SELECT CAST(:k{i} AS text), (cmetadata -> :k{i})::text, count(*) FROM {qualified}"
            f" WHERE embedding IS NOT NULL"
            f" AND cmetadata[{_literal(key)}] = ANY(CAST(:v{i} AS jsonb[])) GROUP BY 2"
        )
        params[f"k{i}"] = key
        params[f"v{i}"] = list(values)
    counts = {key: dict(values) for key, values in lacking.items()}
    for key, stored, n in conn.execute(text(" UNION ALL ".join(parts)), params):
        if stored is not None:
            _count(counts[key], key, stored, int(n))
    return {
        key: partition_values(
            ({key: json.loads(v)} for v, n in sorted(values.items()) if n > floor), key
        )
        for key, values in counts.items()
    }

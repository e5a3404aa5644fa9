"""A collection's partition key: indexes of its own for each value of one metadata key.

A collection made with ``PgVectorStore(partition_key="tenant")`` records the key, and every
write gives each value of ``tenant`` that its rows hold an HNSW index over the rows of that
value alone, and a GIN index of their lexemes: partial indexes, ``WHERE (cmetadata ->
'tenant') = <value>``, beside the collection's indexes over every row. A search whose filter
(or bot scope) fixes the key to one value (``{"tenant": v}``, ``{"tenant": {"$eq": v}}``,
or either inside a top-level ``$and``) ranks through that value's indexes: a small graph
holding nothing but the value's rows, so neither an exact ranking of every row the filter
keeps nor an HNSW walk that filters after it; the rest of the filter is checked on the
rows those indexes yield. Such a search's statement holds the value, so it is planned
once per value and connection, not at every run (:func:`partition_clause`). The value's
graph holds its vectors at half precision (``embedding::halfvec(d)``, where the server's
pgvector has ``halfvec``): half the memory,
and half the pages to read when the graph is not in the buffers (a search then reads most
of it); its hits are ranked again at full precision, and it is searched with
``HNSWQueryOptions.partition_ef_search`` (a small graph walked wider). The lexical
branch's candidate rule (a budget of expected children,
:class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`) is scaled by the
collection's children over the value's, so that about as many of the value's children are
scored as an unfiltered search scores of the collection's. Any other search
uses the collection's indexes, as in a collection without a key. Values that are strings,
integers or booleans get indexes; others (floats, lists, objects) are searched as plain
filters.

Why partial indexes and not a partitioned table (one partition per value, each with its
own indexes): a search across every value of a table in 100 partitions ran 100 HNSW scans
under a Merge Append, 47 times the time of the same search on one table (100,000
children, docs/performance.md, "Partitioned collections"); the partial indexes leave that
search exactly as it was, and a value's search reads its own graph either way. The lexical
statistics stay those of the whole collection (one BM25 idf for every value), so a
child's lexical score does not depend on which index found it.

Cost: each value's indexes are built by the write that first stores the value, in its
transaction; each build reads the whole table once (PostgreSQL checks the index's
predicate on every row), and the writes of the collection wait for it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Connection, Table, literal_column, text, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from parrot_parents.stores.identifiers import derived_name, validate_identifier
from parrot_parents.stores.partition_keys import (
    PartitionValue,
    canonical,
    fixed_value,
    fixed_values,
    is_partition_value,
    only_key,
    validate_partition_key,
    value_json,
)
from parrot_parents.stores.postgres.search.hybrid import scaled_rule, subset_scale

if TYPE_CHECKING:
    from parrot_parents.stores.identifiers import CollectionName
    from parrot_parents.stores.postgres.connections.read_pool import ReadConnection
    from parrot_parents.stores.postgres.search.hybrid import CandidateRule

__all__ = [
    "HALFVEC_MAX_DIM",
    "LOOKUP_ENTRIES",
    "LOOKUP_TTL_S",
    "MAX_GRAPHS",
    "FixedPartition",
    "PartitionLookup",
    "PartitionValue",
    "ensure_partition_indexes",
    "existing_values",
    "fixed_value",
    "graphs_scale",
    "partition_clause",
    "partition_index_name",
    "partition_values",
    "partitioned_collections",
    "read_partition_key",
    "record_partition_key",
    "sql_literal",
    "unindexed",
    "validate_partition_key",
    "value_predicate",
]

#: The most dimensions pgvector's HNSW index takes of a ``halfvec``.
HALFVEC_MAX_DIM = 4000

# The key is recorded as JSON in the comment of the ``cmetadata`` column.
_COMMENT_FIELD = "partition_key"


def partition_index_name(table: str, key: str, value: PartitionValue, kind: str = "part") -> str:
    """The name of the HNSW index (``kind`` ``part``) or the lexemes' GIN index
    (``partl``) of ``key = value`` in the collection ``table``: ``<table>_<kind>_<the
    first 16 hex digits of the SHA-256 of {key: value} as JSON>``, so that ``"1"`` and
    ``1`` (or ``true``) get different names."""
    digest = hashlib.sha256(canonical(key, value).encode("utf-8")).hexdigest()[:16]
    return derived_name(validate_identifier(table, "table"), f"{kind}_{digest}")


def partition_values(metadatas: Iterable[Mapping[str, Any]], key: str) -> list[PartitionValue]:
    """The values of ``key`` that the rows' metadata hold and that get an index, each
    once, in the order met. Distinct as JSON values are: ``true`` is not ``1`` (Python
    holds ``True == 1``, so a set would keep only one of them), ``1.0`` is ``1``."""
    found: dict[tuple[bool, PartitionValue], PartitionValue] = {}
    for meta in metadatas:
        value = meta.get(key)
        if value is not None and is_partition_value(value):
            found.setdefault((isinstance(value, bool), value), value)
    return list(found.values())


def _extracted(cmetadata: str, key: str) -> str:
    return f"({cmetadata} -> {sql_literal(key)})"


def value_predicate(cmetadata: str, key: str, value: PartitionValue) -> str:
    """``(cmetadata -> 'key') = '<value as JSON>'::jsonb`` as SQL text, the value written
    in: the predicate of the value's partial indexes, and the clause that lets a search
    use them (PostgreSQL proves an index's predicate from the statement's own constants).
    ``value`` is a string, integer or boolean (JSON-escaped, then quoted as SQL)."""
    return f"{_extracted(cmetadata, key)} = {sql_literal(value_json(value))}::jsonb"


def partition_clause(cmetadata: Any, key: str, value: PartitionValue) -> ColumnElement[bool]:
    """:func:`value_predicate` over the column ``cmetadata``, for a search statement.

    The value is written into the statement rather than bound, so the statement of one
    value is planned once per connection (a generic plan, reused), where a bound value
    needs a custom plan at every run, and the planner weighs every value's partial
    indexes each time: at a million children and 100 values, a tenant's search whose
    graph was in the buffers ran 1.3-1.5 times the unfiltered search with the plan
    reused, 1.8-1.9 times planned at each run (docs/performance.md, "Partitioned
    collections")."""
    extracted = cmetadata.op("->")(literal_column(sql_literal(key)))
    literal: ColumnElement[Any] = literal_column(f"{sql_literal(value_json(value))}::jsonb")
    clause: ColumnElement[bool] = type_coerce(extracted, JSONB) == literal
    return clause


def unindexed(cmetadata: Any) -> Any:
    """``cmetadata || '{}'``: the same object, as an expression that no index of the
    column serves, so that a filter compiled over it is checked on the rows a value's
    indexes yield instead of steering the plan onto the metadata's GIN index."""
    return type_coerce(cmetadata.op("||")(literal_column("'{}'::jsonb")), JSONB)


@dataclass(frozen=True)
class FixedPartition:
    """A partition key's value that a search's filter fixes, and its indexes.

    Attributes:
        key: the partition key. value: its value (a JSON scalar).
        index: the value's HNSW index. rows: the rows that index holds (the catalog's
            estimate). children: the rows of the collection's HNSW index (same).
        half: whether the index is over ``embedding::halfvec(d)`` (every index this
            module builds where the server has ``halfvec``) rather than ``embedding``.
    """

    key: str
    value: PartitionValue
    index: str
    rows: float
    children: float
    half: bool = False

    @property
    def scale(self) -> int:
        """The collection's children over the value's, as
        :func:`~parrot_parents.stores.postgres.search.hybrid.subset_scale` rounds them."""
        return subset_scale(self.children, self.rows)

    def candidates(self, rule: CandidateRule) -> CandidateRule:
        """``rule`` with its budgets of expected children times :attr:`scale` and no
        cap: about as many of the value's children scored as ``rule`` scores of the
        whole collection. (A searcher ranks a value of at most ``rule.exact_below``
        children exactly instead.)"""
        return scaled_rule(rule, self.scale)


def graphs_scale(graphs: Sequence[FixedPartition]) -> int:
    """The collection's children over those of ``graphs`` together (one value's, or an
    ``$in``'s), as :func:`~parrot_parents.stores.postgres.search.hybrid.subset_scale`
    rounds them: how much wider the lexical branch's candidate rule is made."""
    return subset_scale(graphs[0].children, sum(g.rows for g in graphs)) if graphs else 1


#: How long a lookup of a value's indexes is reused, in seconds: the row counts follow
#: the catalog's estimates, which change only with VACUUM and ANALYZE.
LOOKUP_TTL_S = 30.0
#: The most values a lookup remembers (it forgets them all when full).
LOOKUP_ENTRIES = 4096
#: The most values of an ``$in`` a search ranks through their own indexes, a scan of
#: each value's graph; a longer list goes through the collection's indexes.
MAX_GRAPHS = 8


class PartitionLookup:
    """Finds and remembers the indexes of a partition key's values (for a searcher)."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[float, FixedPartition | None]] = {}

    async def find(
        self,
        conn: ReadConnection,
        name: CollectionName,
        key: str,
        value: PartitionValue,
        *,
        remember_missing: bool = False,
    ) -> FixedPartition | None:
        """The value's :class:`FixedPartition`, or None when its HNSW index does not
        exist (the value was never written by a store of the key, or a filter key's value
        keeps too few children for a graph). ``remember_missing``: trust a missing index
        for :data:`LOOKUP_TTL_S` too (a filter key's small values have none, and a search
        fixing one should not ask each time; a value given a graph meanwhile is searched
        through the collection's indexes until then)."""
        index = partition_index_name(name.table, key, value)
        cached = self._found.get(index)
        now = time.monotonic()
        if cached is not None and now - cached[0] < LOOKUP_TTL_S:
            return cached[1]
        # An index over an expression is over ``embedding::halfvec(d)``: the only
        # expression these indexes are built on.
        rows = await conn.fetch_with(
            "SELECT c.reltuples, i.indexprs IS NOT NULL,"
            " (SELECT reltuples FROM pg_class WHERE oid = to_regclass($2))"
            " FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE c.oid = to_regclass($1)",
            (name.quoted(index), name.quoted(derived_name(name.table, "embedding_hnsw"))),
            (),
        )
        if not rows:
            if remember_missing:
                self._remember(index, now, None)
            else:
                self._found.pop(index, None)
            return None
        own, half, every = rows[0]
        found = FixedPartition(key, value, index, float(own), float(every or 0), bool(half))
        self._remember(index, now, found)
        return found

    async def fixed(
        self,
        conn: ReadConnection,
        name: CollectionName,
        filter: Mapping[str, Any] | None,
        partition_key: str | None,
        keys: AbstractSet[str],
    ) -> tuple[FixedPartition, ...]:
        """The values whose own indexes a search with ``filter`` ranks through, when
        every one of them has its indexes; of several keys, the one whose values hold the
        fewest rows; empty when none:

        * the partition key's value that the filter fixes
          (:func:`~parrot_parents.stores.partition_keys.fixed_value`), whatever else the
          filter holds (checked on the rows its graph yields);
        * the values of the partition key, or of a filter key of ``keys`` (whose large
          values have graphs: :mod:`~parrot_parents.stores.postgres.collections.value_graphs`),
          that a filter reading that key alone fixes: one value, or an ``$in`` of at most
          :data:`MAX_GRAPHS` (:func:`~parrot_parents.stores.partition_keys.fixed_values`).
          A filter with more conditions is planned by its estimate instead: a walk of
          a value's graph that drops the rows they leave out is as slow as the
          collection's when they keep few (on real text, a range keeping 5 to 20 % of
          100k children inside two values' graphs took 100 ms).
        """
        ordered = sorted(keys - {partition_key} if partition_key else keys)
        if partition_key is not None:
            ordered.insert(0, partition_key)
        best: tuple[FixedPartition, ...] = ()
        for key in ordered:
            if only_key(filter, key):
                values = fixed_values(filter, key)
            else:
                fixed = fixed_value(filter, key) if key == partition_key else None
                values = None if fixed is None else [fixed]
            if values is None or len(values) > MAX_GRAPHS:
                continue
            found = []
            for value in values:
                one = await self.find(conn, name, key, value, remember_missing=key != partition_key)
                if one is None:
                    break
                found.append(one)
            else:
                if not best or sum(f.rows for f in found) < sum(f.rows for f in best):
                    best = tuple(found)
        return best

    def _remember(self, index: str, now: float, found: FixedPartition | None) -> None:
        if len(self._found) >= LOOKUP_ENTRIES:
            self._found.clear()
        self._found[index] = (now, found)


def _qualified(schema: str, table: str) -> str:
    return f'"{validate_identifier(schema, "schema")}"."{validate_identifier(table, "table")}"'


def read_partition_key(conn: Connection, table: str, schema: str = "public") -> str | None:
    """The collection's recorded partition key, or None."""
    comment = conn.execute(
        text(
            "SELECT col_description(a.attrelid, a.attnum) FROM pg_attribute a"
            " WHERE a.attrelid = to_regclass(:qualified) AND a.attname = 'cmetadata'"
        ),
        {"qualified": f'"{schema}"."{table}"'},
    ).scalar_one_or_none()
    return _key_of(comment)


def partitioned_collections(conn: Connection) -> dict[str, str]:
    """Every collection of the database that has a partition key: ``{"schema.table": key}``."""
    rows = conn.execute(
        text(
            "SELECT n.nspname, c.relname, col_description(a.attrelid, a.attnum)"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE a.attname = 'cmetadata' AND c.relkind = 'r'"
            " AND col_description(a.attrelid, a.attnum) LIKE :field"
            " ORDER BY 1, 2"
        ),
        {"field": f'%"{_COMMENT_FIELD}"%'},
    )
    found = {}
    for schema, table, comment in rows:
        key = _key_of(comment)
        if key is not None:
            found[f"{schema}.{table}"] = key
    return found


def _key_of(comment: str | None) -> str | None:
    if not comment:
        return None
    try:
        recorded = json.loads(comment)
    except ValueError:
        return None
    key = recorded.get(_COMMENT_FIELD) if isinstance(recorded, dict) else None
    return key if isinstance(key, str) else None


def record_partition_key(conn: Connection, table: str, schema: str, key: str) -> None:
    """Record ``key`` as the collection's partition key (in the caller's transaction)."""
    value = json.dumps({_COMMENT_FIELD: validate_partition_key(key)}, ensure_ascii=True)
    # A COMMENT takes no bound parameter; sent as it is, since SQLAlchemy's text() would
    # read a ":name" inside the key as one of its own.
    conn.exec_driver_sql(
        f"COMMENT ON COLUMN {_qualified(schema, table)}.cmetadata IS {sql_literal(value)}"
    )


def existing_values(conn: Connection, table: str, schema: str, key: str) -> list[PartitionValue]:
    """The values of ``key`` the collection's rows already hold that get an index."""
    qualified = _qualified(schema, table)
    found = conn.execute(
        text(f"SELECT DISTINCT (cmetadata -> :key)::text FROM {qualified} WHERE cmetadata ? :key"),
        {"key": key},
    ).scalars()
    return partition_values(({key: json.loads(v)} for v in found if v is not None), key)


def sql_literal(value: str) -> str:
    """``value`` as an SQL string literal, for statements that take no parameters (DDL,
    an index's predicate): quotes and backslashes doubled inside ``E'...'``, which reads
    the same whatever ``standard_conforming_strings`` is."""
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def ensure_partition_indexes(
    conn: Connection,
    table: Table,
    key: str,
    values: Iterable[PartitionValue],
    m: int,
    ef_construction: int,
) -> list[str]:
    """Create the missing indexes of ``values`` (in the caller's transaction, under a lock
    that serialises the collection's index builds); returns the names created."""
    schema = table.schema or "public"
    wanted = {partition_index_name(table.name, key, v): v for v in values}
    if not wanted:
        return []
    present = set(
        conn.execute(
            text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = :schema AND c.relname = ANY(:names)"
            ),
            {"schema": schema, "names": list(wanted)},
        ).scalars()
    )
    missing = sorted(set(wanted) - present)
    if not missing:
        return []
    conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
        {"k": f"parrot_parents.partitions:{schema}.{table.name}"},
    )
    qualified = (
        f'"{validate_identifier(schema, "schema")}"."{validate_identifier(table.name, "table")}"'
    )
    lexemes, halfvec = conn.execute(
        text(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:t)"
            " AND attname = 'lexical' AND NOT attisdropped),"
            " to_regtype('halfvec') IS NOT NULL"
        ),
        {"t": qualified},
    ).one()
    column = table.c.embedding.type
    dim = column.dim if isinstance(column, VECTOR) else None
    # Half precision halves a value's graph (11.7 against 20.4 MB for 10,000 vectors of
    # 384 dimensions), and ranks as the full vectors do but for near-ties (which the
    # search ranks again at full precision): at a million children, 100 values, a
    # value's search ran 2.6 against 3.9 ms with the same recall (docs/performance.md,
    # "Partitioned collections"). pgvector has halfvec from 0.7, for up to 4,000
    # dimensions in an HNSW index.
    if halfvec and isinstance(dim, int) and dim <= HALFVEC_MAX_DIM:
        indexed = f"((embedding::halfvec({dim})) halfvec_cosine_ops)"
    else:
        indexed = "(embedding vector_cosine_ops)"
    created = []
    for name in missing:
        value = wanted[name]
        predicate = value_predicate("cmetadata", key, value)
        # DDL takes no bound parameter, so the value is written in, and the statement
        # is sent as it is: SQLAlchemy's text() would read ":x" in a value as its own.
        conn.exec_driver_sql(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON {qualified} USING hnsw {indexed}'
            f" WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
            f" WHERE {predicate}"
        )
        created.append(name)
        if lexemes:
            gin = partition_index_name(table.name, key, value, "partl")
            conn.exec_driver_sql(
                f'CREATE INDEX IF NOT EXISTS "{gin}" ON {qualified} USING gin (lexical)'
                f" WHERE {predicate}"
            )
            created.append(gin)
    return created

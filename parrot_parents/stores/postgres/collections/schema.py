"""Table definition of a collection, shared by the store and the migrations.

One table per collection::

    id         text primary key
    embedding  vector(d)   NULL for parents, so parents never enter the HNSW index
    document   text
    cmetadata  jsonb
    lexical    tsvector    generated: the children's lexical form (see stores.lexical)

Indexes: HNSW (cosine) on ``embedding``; btree on ``cmetadata->>'parent_document_id'``
(children of a parent) and ``cmetadata->>'document_id'`` (delete / re-ingest); GIN
(``jsonb_path_ops``) on ``cmetadata`` for ``@>`` metadata filters; GIN on ``lexical``.
Fetching a parent by id uses the primary key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Column,
    ColumnElement,
    Computed,
    Index,
    MetaData,
    Table,
    Text,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import derived_name, validate_identifier
from parrot_parents.stores.postgres.search.lexical import (
    DEFAULT_TEXT_SEARCH_CONFIG,
    lexical_expression,
)
from parrot_parents.stores.search_options import FILTER_EXACT_BELOW

__all__ = ["HNSWIndex", "collection_table", "meta_field"]

# Metadata keys the store queries on; rendered as SQL literals (never user input), so the
# planner can match the expression indexes below.
_QUERY_KEYS = frozenset(
    {"document_id", "parent_document_id", "chunk_index", "start_index", "end_index"}
)


def meta_field(table: Table, key: str) -> ColumnElement[str]:
    """``cmetadata ->> 'key'`` with the key as a literal, as the expression indexes have it.

    (``table.c.cmetadata[key].astext`` binds the key as a parameter, which an expression
    index on ``cmetadata->>'key'`` cannot serve.)
    """
    if key not in _QUERY_KEYS:
        raise ConfigurationError(f"unsupported metadata key {key!r}")
    return table.c.cmetadata.op("->>", return_type=Text)(literal_column(f"'{key}'"))


@dataclass(frozen=True)
class HNSWIndex:
    """HNSW build parameters: ``m`` (default 16, pgvector's) and ``ef_construction``
    (default 200; pgvector's is 64), and ``value_graph_floor``: a filter key's value
    keeping more children than this gets a graph of its own, in a collection of up to
    100k children; the floor grows with a larger one as a filtered search's threshold for
    exact ranking does (default 4,000: that threshold's; None builds none;
    :mod:`~parrot_parents.stores.postgres.collections.value_graphs`).

    ``ef_construction=200`` took the build of 101k real children from 16 s to 35 s (same
    size, 198 MB) and raised recall@10 of held-out children at ``ef_search`` 100 from
    0.84 to 0.95 (``python -m benchmarks run hnsw_recall``, ``docs/performance.md``):
    the default :class:`~parrot_parents.stores.search_options.HNSWQueryOptions` is
    chosen for this build.

    Raises:
        ConfigurationError: ``m`` outside 2..100, ``ef_construction`` outside
            4..1000 or below ``2 * m``, or ``value_graph_floor`` neither None nor an
            int of at least 0.
    """

    m: int = 16
    ef_construction: int = 200
    value_graph_floor: int | None = FILTER_EXACT_BELOW

    def __post_init__(self) -> None:
        floor = self.value_graph_floor
        if floor is not None and (
            isinstance(floor, bool) or not isinstance(floor, int) or floor < 0
        ):
            raise ConfigurationError(
                f"HNSWIndex.value_graph_floor must be a count of children (an int >= 0) "
                f"or None, got {floor!r}"
            )
        if not 2 <= self.m <= 100:
            raise ConfigurationError(f"HNSWIndex.m must be in [2, 100], got {self.m!r}")
        if not 4 <= self.ef_construction <= 1000 or self.ef_construction < 2 * self.m:
            raise ConfigurationError(
                f"HNSWIndex.ef_construction must be in [4, 1000] and >= 2*m, "
                f"got {self.ef_construction!r} with m={self.m!r}"
            )


def collection_table(
    name: str,
    dimension: int,
    *,
    schema: str = "public",
    metadata: MetaData | None = None,
    hnsw: HNSWIndex | None = None,
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG,
) -> Table:
    """Build the SQLAlchemy ``Table`` of a collection (nothing is executed).

    Args:
        name: table name; validated as an identifier.
        dimension: embedding length (384 for all-MiniLM-L6-v2).
        schema: PostgreSQL schema, default ``"public"``.
        metadata: SQLAlchemy ``MetaData`` to attach to; a new one by default.
        hnsw: HNSW build parameters; :class:`HNSWIndex`'s defaults when None.
        text_search_config: configuration of the ``lexical`` column of a new table
            (``english`` by default; ``simple`` for text of unknown language).

    Raises:
        ConfigurationError: a bad identifier or a dimension outside 1..16000.
    """
    validate_identifier(name, "table")
    validate_identifier(schema, "schema")
    if not isinstance(dimension, int) or not 1 <= dimension <= 16000:
        raise ConfigurationError(f"dimension must be in 1..16000, got {dimension!r}")
    hnsw = hnsw or HNSWIndex()
    md = metadata if metadata is not None else MetaData()
    table = Table(
        name,
        md,
        Column("id", Text, primary_key=True),
        Column("embedding", Vector(dimension), nullable=True),
        Column("document", Text, nullable=False),
        Column("cmetadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
        Column(
            "lexical",
            TSVECTOR,
            Computed(lexical_expression(text_search_config), persisted=True),
        ),
        schema=schema,
    )
    # Index names are derived from the whole table name, within PostgreSQL's 63 bytes.
    Index(
        derived_name(name, "embedding_hnsw"),
        table.c.embedding,
        postgresql_using="hnsw",
        postgresql_with={"m": hnsw.m, "ef_construction": hnsw.ef_construction},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    # Expression indexes built from the table's column, so that they belong to the table
    # (an Index over a bare text() clause would never be created).
    Index(derived_name(name, "parent_id_idx"), meta_field(table, "parent_document_id"))
    Index(derived_name(name, "document_id_idx"), meta_field(table, "document_id"))
    Index(
        derived_name(name, "cmetadata_gin"),
        table.c.cmetadata,
        postgresql_using="gin",
        postgresql_ops={"cmetadata": "jsonb_path_ops"},
    )
    Index(
        derived_name(name, "lexical_gin"),
        table.c.lexical,
        postgresql_using="gin",
        postgresql_where=table.c.lexical.is_not(None),
    )
    return table

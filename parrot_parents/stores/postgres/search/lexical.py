"""The lexical index of a collection: a ``tsvector`` per child and BM25 statistics.

* ``lexical``: a generated column, ``to_tsvector('<config>', document)`` for children (NULL
  for parents), with ``cmetadata->>'retrieval_preamble'`` indexed before the text; a GIN
  index serves ``@@``.
* ``<table>_lexicon(lexeme, df)`` and ``<table>_lexstats(n, total_len)``, kept exact by
  statement-level triggers in the writer's transaction (``<table>``:
  :func:`~parrot_parents.stores.identifiers.derived_name`'s base).

BM25 (Robertson & Zaragoza, 2009) with the Lucene idf ``ln(1 + (N - df + 0.5) / (df +
0.5))``, ``k1 = 1.5``, ``b = 0.75`` as in bm25s, at query time
(:mod:`~parrot_parents.stores.postgres.search.hybrid`); ``ts_rank`` is not close enough
(docs/benchmarks.md). The text-search configuration is fixed per collection and read back
from the column's expression.
"""

from __future__ import annotations

import re

from sqlalchemy import BigInteger, Boolean, Column, Connection, MetaData, Table, Text, text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import CollectionName, collection_name, derived_name
from parrot_parents.stores.records.structure_markers import RETRIEVAL_PREAMBLE

__all__ = [
    "BM25_B",
    "BM25_K1",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "INDEXED_TEXT",
    "LexicalTables",
    "ensure_lexical",
    "lexical_expression",
    "read_text_search_config",
    "validate_text_search_config",
]

DEFAULT_TEXT_SEARCH_CONFIG = "english"
#: BM25 parameters (bm25s's and Lucene's defaults), of every lexical backend.
BM25_K1 = 1.5
BM25_B = 0.75
#: The text a child's lexical index holds: its retrieval preamble and a newline, then its
#: document (NULL || text is NULL: a row without a preamble indexes exactly its text).
INDEXED_TEXT = f"coalesce((cmetadata->>'{RETRIEVAL_PREAMBLE}') || E'\\n', '') || document"
_CONFIG = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TRIGGER_EVENTS = ("insert", "delete", "update")
_READ_CONFIG = re.compile(r"to_tsvector\('([a-z_][a-z0-9_]*)'::regconfig")


def validate_text_search_config(name: str) -> str:
    """A text-search configuration name (``english``, ``simple``, ``german``...).

    Raises:
        ConfigurationError: not a plain lower-case name.
    """
    if not isinstance(name, str) or not _CONFIG.match(name):
        raise ConfigurationError(
            f"text search configuration must be a name like 'english' or 'simple', got {name!r}"
        )
    return name


def lexical_expression(config: str) -> str:
    """SQL of the generated ``lexical`` column (children only)."""
    config = validate_text_search_config(config)
    return (
        "CASE WHEN embedding IS NULL THEN NULL::tsvector "
        f"ELSE to_tsvector('{config}'::regconfig, {INDEXED_TEXT}) END"
    )


class LexicalTables:
    """Names and SQLAlchemy tables of a collection's BM25 statistics."""

    def __init__(self, name: CollectionName) -> None:
        self.table = table = name.table
        self.schema = schema = name.schema
        self.lexicon_name = derived_name(table, "lexicon")
        self.stats_name = derived_name(table, "lexstats")
        self.function_name = derived_name(table, "lexstats_fn")
        self.index_name = derived_name(table, "lexical_gin")
        self.trigger_names = {e: derived_name(table, f"lex_{e}") for e in _TRIGGER_EVENTS}
        md = MetaData()
        self.lexicon = Table(
            self.lexicon_name,
            md,
            Column("lexeme", Text, primary_key=True),
            Column("df", BigInteger, nullable=False),
            schema=schema,
        )
        self.stats = Table(
            self.stats_name,
            md,
            Column("id", Boolean, primary_key=True),
            Column("n", BigInteger, nullable=False),
            Column("total_len", BigInteger, nullable=False),
            schema=schema,
        )

    def q(self, name: str) -> str:
        return f'"{self.schema}"."{name}"'


def _lexical_expr(conn: Connection, table: str, schema: str) -> str | None:
    return conn.execute(
        text(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE n.nspname = :schema AND c.relname = :table"
            " AND a.attname = 'lexical' AND NOT a.attisdropped"
        ),
        {"schema": schema, "table": table},
    ).scalar_one_or_none()


def read_text_search_config(conn: Connection, table: str, schema: str = "public") -> str | None:
    """The configuration of the collection's ``lexical`` column; None without the column."""
    found = _READ_CONFIG.search(_lexical_expr(conn, table, schema) or "")
    return found.group(1) if found else None


def ensure_lexical(
    conn: Connection, table: str, schema: str = "public", config: str | None = None
) -> str:
    """Give a collection its lexical column, GIN index, statistics and triggers.

    Idempotent. On a table created before this feature the column is added (PostgreSQL
    rewrites the table once) and the statistics are computed from the existing children.

    Args:
        conn: a connection inside a transaction.
        table, schema: the collection.
        config: the text-search configuration for a new column; default ``english``.
            An existing column keeps its own.

    Returns:
        The collection's text-search configuration.

    Raises:
        ConfigurationError: ``config`` differs from the existing column's.
    """
    t = LexicalTables(collection_name(table, schema, what="table", reserved=True))
    existing = read_text_search_config(conn, table, schema)
    wanted = validate_text_search_config(config or existing or DEFAULT_TEXT_SEARCH_CONFIG)
    if existing is not None and config is not None and existing != config:
        raise ConfigurationError(
            f"collection {table!r} indexes text with the {existing!r} configuration, "
            f"not {config!r}",
            hint="use another collection, or re-create this one",
        )
    qt = t.q(table)
    expression = _lexical_expr(conn, table, schema) if existing is not None else None
    current = RETRIEVAL_PREAMBLE in (expression or "")
    if existing is not None and current and _complete(conn, t):
        # Already set up: no DDL, so opening a store never takes a table lock that could
        # deadlock with writers (every ingest opens one).
        return existing
    if existing is not None and not current:
        # A collection from before retrieval preambles: re-create the column with the
        # preamble in its expression (one table rewrite), then count the statistics again.
        conn.execute(text(f"ALTER TABLE {qt} DROP COLUMN lexical"))
        conn.execute(text(f"DROP TABLE IF EXISTS {t.q(t.lexicon_name)}, {t.q(t.stats_name)}"))
        existing = None
    if existing is None:
        conn.execute(
            text(
                f"ALTER TABLE {qt} ADD COLUMN IF NOT EXISTS lexical tsvector"
                f" GENERATED ALWAYS AS ({lexical_expression(wanted)}) STORED"
            )
        )
    conn.execute(
        text(
            f'CREATE INDEX IF NOT EXISTS "{t.index_name}" ON {qt}'
            " USING gin (lexical) WHERE lexical IS NOT NULL"
        )
    )
    has_stats = conn.execute(
        text("SELECT to_regclass(:name)"), {"name": f"{schema}.{t.stats_name}"}
    ).scalar_one()
    t.lexicon.metadata.create_all(conn, checkfirst=True)
    if has_stats is None:
        # First time: count what is already there (the triggers keep it from now on).
        conn.execute(
            text(
                f"INSERT INTO {t.q(t.lexicon_name)} (lexeme, df)"
                f" SELECT u.lexeme, count(*) FROM {qt} r, unnest(r.lexical) u"
                " WHERE r.lexical IS NOT NULL GROUP BY u.lexeme"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO {t.q(t.stats_name)} (id, n, total_len)"
                " SELECT true, count(*), coalesce(sum(length(r.lexical)), 0)"
                f" FROM {qt} r WHERE r.lexical IS NOT NULL"
            )
        )
    _create_triggers(conn, t)
    return wanted


def _complete(conn: Connection, t: LexicalTables) -> bool:
    """True when the statistics tables, the index and the three triggers all exist."""
    found = conn.execute(
        text(
            "SELECT to_regclass(:stats) IS NOT NULL AND to_regclass(:lexicon) IS NOT NULL"
            " AND to_regclass(:index) IS NOT NULL"
            " AND (SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(:table)"
            "      AND tgname = ANY(:triggers)) = 3"
        ),
        {
            "stats": t.q(t.stats_name),
            "lexicon": t.q(t.lexicon_name),
            "index": t.q(t.index_name),
            "table": t.q(t.table),
            "triggers": list(t.trigger_names.values()),
        },
    ).scalar_one()
    return bool(found)


def _create_triggers(conn: Connection, t: LexicalTables) -> None:
    lexicon, stats, qt = t.q(t.lexicon_name), t.q(t.stats_name), t.q(t.table)
    lock = f"{t.schema}.{t.table}:lexstats"
    len_of = "length(r.lexical)"
    # One advisory lock per collection serialises the statistics updates of concurrent
    # writers (until they commit), so two writers never deadlock on lexicon rows.
    # Kept to a few index-driven statements per write statement: the statistics must not
    # slow ingest down (docs/benchmarks.md, "What hybrid search costs"). A lexeme whose df
    # reaches 0 is deleted by its key, never by scanning the lexicon.
    body = f"""
DECLARE
  d_n bigint;
  d_len bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('{lock}'));
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    SELECT count(*), coalesce(sum({len_of}), 0) INTO d_n, d_len
      FROM old_rows r WHERE r.lexical IS NOT NULL;
    IF d_n > 0 THEN
      WITH g AS (SELECT u.lexeme, count(*) AS c FROM old_rows r, unnest(r.lexical) u
                 WHERE r.lexical IS NOT NULL GROUP BY u.lexeme),
           gone AS (DELETE FROM {lexicon} l USING g
                    WHERE l.lexeme = g.lexeme AND l.df <= g.c RETURNING l.lexeme)
      UPDATE {lexicon} l SET df = l.df - g.c FROM g
        WHERE l.lexeme = g.lexeme AND l.df > g.c;
      UPDATE {stats} SET n = n - d_n, total_len = total_len - d_len;
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    SELECT count(*), coalesce(sum({len_of}), 0) INTO d_n, d_len
      FROM new_rows r WHERE r.lexical IS NOT NULL;
    IF d_n > 0 THEN
      INSERT INTO {lexicon} (lexeme, df)
        SELECT u.lexeme, count(*) FROM new_rows r, unnest(r.lexical) u
        WHERE r.lexical IS NOT NULL GROUP BY u.lexeme
        ON CONFLICT (lexeme) DO UPDATE SET df = {lexicon}.df + EXCLUDED.df;
      UPDATE {stats} SET n = n + d_n, total_len = total_len + d_len;
    END IF;
  END IF;
  RETURN NULL;
END"""
    fn = t.q(t.function_name)
    conn.execute(
        text(
            f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $fn${body}$fn$"
        )
    )
    for event, refs in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("DELETE", "OLD TABLE AS old_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ):
        name = t.trigger_names[event.lower()]
        conn.execute(text(f'DROP TRIGGER IF EXISTS "{name}" ON {qt}'))
        conn.execute(
            text(
                f'CREATE TRIGGER "{name}" AFTER {event} ON {qt} REFERENCING {refs}'
                f" FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
            )
        )


def drop_lexical(conn: Connection, table: str, schema: str = "public") -> None:
    """Drop the statistics tables and the trigger function (after the collection)."""
    t = LexicalTables(collection_name(table, schema, what="table", reserved=True))
    conn.execute(text(f"DROP TABLE IF EXISTS {t.q(t.lexicon_name)}, {t.q(t.stats_name)}"))
    conn.execute(text(f"DROP FUNCTION IF EXISTS {t.q(t.function_name)}() CASCADE"))

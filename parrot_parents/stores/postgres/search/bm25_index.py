"""The lexical backend of a collection (:data:`LexicalBackend`).

* ``pg_textsearch``: pg_textsearch's (https://github.com/timescale/pg_textsearch) ``bm25``
  index over a stored column ``lexical_text`` (it indexes only a column), ranking with
  block-max WAND. Its scores differ from the SQL backend's in the last digits (it counts a
  row's length in tokens, and its statistics follow its own upkeep).
* ``sql``: BM25 in SQL from the collection's exact statistics
  (:mod:`~parrot_parents.stores.postgres.search.lexical`); it also serves the searches the
  index cannot answer well: under a metadata filter, and with pseudo-relevance feedback.

A collection is ``pg_textsearch`` exactly when its ``bm25`` index exists. ``auto`` picks it
for a new collection only from :data:`SAFE_VERSION`: older releases can hang concurrent
writers (timescale/pg_textsearch#370 on 1.0.0, #384 on 1.1.0); asked for by name it is
given on them too, with a warning, and the store guards such an index
(:mod:`~parrot_parents.stores.postgres.search.bm25_guard`). ``parrot-parents reindex
--lexical`` moves a collection.

A ``bm25`` index copied with its database (``CREATE DATABASE ... TEMPLATE``) is refused
(:func:`refuse_copied_index`): pg_textsearch up to 1.4 keeps an index's shared in-memory
state under the index's oid alone, and the copy has the original's oid.
"""

from __future__ import annotations

import logging
import re
from typing import Literal, get_args

from sqlalchemy import Connection, text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import derived_name, validate_identifier
from parrot_parents.stores.postgres.search.lexical import (
    BM25_B,
    BM25_K1,
    INDEXED_TEXT,
    validate_text_search_config,
)

__all__ = [
    "BM25_COLUMN",
    "LEXICAL_BACKENDS",
    "SAFE_VERSION",
    "LexicalBackend",
    "LexicalChoice",
    "auto_bm25",
    "bm25_index_name",
    "bm25_index_sql",
    "bm25_unavailable",
    "bm25_unsafe",
    "check_lexical_choice",
    "drop_bm25",
    "ensure_bm25",
    "parse_version",
    "read_lexical_backend",
    "refuse_copied_index",
    "reset_autovacuum",
    "validate_lexical_choice",
]

LexicalBackend = Literal["pg_textsearch", "sql"]
#: What a caller may ask for: a backend, or ``auto`` (``pg_textsearch`` where the server has it).
LexicalChoice = Literal["auto", "pg_textsearch", "sql"]
LEXICAL_BACKENDS: tuple[LexicalBackend, ...] = get_args(LexicalBackend)

#: The first pg_textsearch release whose index needs no guard: upstream's stress of
#: concurrent inserts, deletes, ranked queries and aggressive autovacuum locked 1.1.0 up in
#: ~510 s and ran 1.3.0-dev clean for 25 minutes (timescale/pg_textsearch#384).
SAFE_VERSION = (1, 3, 0)

#: The stored generated column the ``bm25`` index is built on.
BM25_COLUMN = "lexical_text"
_EXTENSION = "pg_textsearch"
logger = logging.getLogger(__name__)


def validate_lexical_choice(value: object) -> LexicalChoice:
    """``auto``, ``pg_textsearch`` or ``sql``.

    Raises:
        ConfigurationError: anything else.
    """
    if value not in ("auto", *LEXICAL_BACKENDS):
        raise ConfigurationError(
            f"lexical backend must be one of auto, {', '.join(LEXICAL_BACKENDS)}; got {value!r}"
        )
    return value  # type: ignore[return-value]


def check_lexical_choice(table: str, backend: LexicalBackend, wanted: LexicalChoice) -> None:
    """Refuse ``pg_textsearch`` for a collection without its index. (Every collection
    keeps the SQL backend's statistics, so ``sql`` can rank any of them.)

    Raises:
        ConfigurationError: naming the command that builds the index.
    """
    if wanted == "pg_textsearch" and backend != "pg_textsearch":
        raise ConfigurationError(
            f"collection {table!r} has no pg_textsearch index: it ranks BM25 in SQL",
            hint=f"build it with `parrot-parents reindex --lexical {wanted} --collection {table}`",
        )


def bm25_index_name(table: str) -> str:
    """The name of a collection's ``bm25`` index (in the collection's schema)."""
    return derived_name(validate_identifier(table, "table"), "bm25")


def _qualified(schema: str, name: str) -> str:
    return f'"{validate_identifier(schema, "schema")}"."{name}"'


def read_lexical_backend(conn: Connection, table: str, schema: str = "public") -> LexicalBackend:
    """The collection's backend: ``pg_textsearch`` when its ``bm25`` index exists."""
    found = conn.execute(
        text("SELECT to_regclass(:name) IS NOT NULL"),
        {"name": _qualified(schema, bm25_index_name(table))},
    ).scalar_one()
    return "pg_textsearch" if found else "sql"


def bm25_unavailable(conn: Connection) -> str | None:
    """Why this server cannot give a collection a ``bm25`` index, or None when it can.

    The extension must be installed, listed in ``shared_preload_libraries`` and either
    created in this database or creatable by this role (it is not a trusted extension:
    creating it takes a superuser). Reads the catalog only; creates nothing.
    """
    row = conn.execute(
        text(
            "SELECT"
            " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = :ext),"
            " EXISTS (SELECT 1 FROM pg_extension WHERE extname = :ext),"
            " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
            # Only roles that may read every setting see this one (NULL: cannot tell).
            " CASE WHEN pg_has_role('pg_read_all_settings', 'USAGE') THEN"
            "   :ext = ANY (string_to_array(replace("
            "     current_setting('shared_preload_libraries'), ' ', ''), ','))"
            " END"
        ),
        {"ext": _EXTENSION},
    ).one()
    available, created, superuser, preloaded = row
    if not available:
        return "the server has no pg_textsearch extension"
    if preloaded is False:
        return "pg_textsearch is not in shared_preload_libraries"
    if not created and not superuser:
        return "pg_textsearch is not created in this database and this role may not create it"
    return None


def parse_version(found: str) -> tuple[int, ...]:
    """An extension version as integers: ``'1.0.0'`` -> ``(1, 0, 0)`` (at most three)."""
    return tuple(int(p) for p in re.findall(r"\d+", found)[:3])


def bm25_unsafe(conn: Connection) -> str | None:
    """Why ``auto`` should not choose pg_textsearch on this server though it can (a
    release older than :data:`SAFE_VERSION`), or None."""
    version = conn.execute(
        text(
            "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = :ext),"
            " (SELECT default_version FROM pg_available_extensions WHERE name = :ext))"
        ),
        {"ext": _EXTENSION},
    ).scalar_one_or_none()
    if version is None:
        return None
    found = parse_version(str(version))
    if found >= SAFE_VERSION:
        return None
    safe = ".".join(map(str, SAFE_VERSION))
    return (
        f"pg_textsearch {version} can hang concurrent writers (timescale/pg_textsearch#370, "
        f"#384); {safe} or newer is needed"
    )


def auto_bm25(conn: Connection) -> bool:
    """Whether ``auto`` gives a new collection pg_textsearch here: the server can
    (:func:`bm25_unavailable`) and its release is safe (:func:`bm25_unsafe`)."""
    return bm25_unavailable(conn) is None and bm25_unsafe(conn) is None


def ensure_bm25(conn: Connection, table: str, schema: str, config: str) -> None:
    """Give a collection its ``lexical_text`` column and ``bm25`` index (idempotent).

    Runs in the caller's transaction; on an existing table the column is added with one
    table rewrite and the index is built over the rows already there.

    Raises:
        ConfigurationError: the server cannot (:func:`bm25_unavailable`).
    """
    reason = bm25_unavailable(conn)
    if reason is not None:
        raise ConfigurationError(
            f"collection {table!r} cannot use the pg_textsearch lexical backend: {reason}",
            hint="use the sql backend (it needs nothing but PostgreSQL)",
        )
    risk = bm25_unsafe(conn)
    if risk is not None:
        logger.warning("collection %r ranks BM25 with pg_textsearch, but %s", table, risk)
    config = validate_text_search_config(config)
    qt = _qualified(schema, validate_identifier(table, "table"))
    # Two first creators in one database would race on the extension's catalog rows:
    # the lock the pgvector extension is created under serialises them.
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('parrot_parents.extension'))"))
    conn.execute(text(f"CREATE EXTENSION IF NOT EXISTS {_EXTENSION}"))
    # The text the tsvector holds; parents (no embedding) are NULL and stay out of the index.
    conn.execute(
        text(
            f'ALTER TABLE {qt} ADD COLUMN IF NOT EXISTS "{BM25_COLUMN}" text GENERATED ALWAYS AS'
            f" (CASE WHEN embedding IS NULL THEN NULL ELSE {INDEXED_TEXT} END) STORED"
        )
    )
    conn.execute(text(bm25_index_sql(schema, table, bm25_index_name(table), config)))


def refuse_copied_index(conn: Connection, table: str, schema: str = "public") -> None:
    """Refuse a collection whose ``bm25`` index was copied with its database from a
    template (``CREATE DATABASE ... TEMPLATE``, or a clone made that way).

    pg_textsearch (1.0.0 to 1.4; upstream keys the state by database too only after
    timescale/pg_textsearch#490) keeps each index's in-memory state (its memtable of recent
    rows, its statistics) in shared memory under the index's oid, and a copied index keeps
    the original's oid. The copy then reads the original's recent rows as its own: a search
    fails with ``could not read blocks ... read only 0 of 8192 bytes`` (XX001) or returns
    another database's row ids, and its writes land in the original's memtable. Dropping
    the copy frees the original's state under its open sessions (measured on 1.0.0: the
    original's next search crashed its backend), so the store does neither: it refuses.

    An index was copied when its oid is lower than its database's: oids come from one
    counter for the whole server, and a database's oid is taken when it is created.
    (After the counter wraps around, about 4 billion oids, a new index can look copied.)

    Raises:
        ConfigurationError: the collection's ``bm25`` index was copied.
    """
    qt = _qualified(schema, validate_identifier(table, "table"))
    copied = conn.execute(
        text(
            "SELECT i.oid < d.oid FROM pg_class i, pg_database d"
            " WHERE i.oid = to_regclass(:index) AND d.datname = current_database()"
        ),
        {"index": _qualified(schema, bm25_index_name(table))},
    ).scalar()
    if copied:
        raise ConfigurationError(
            f"collection {qt}'s bm25 index was copied with its database from a template;"
            " pg_textsearch keeps an index's in-memory state under the index's oid alone, so"
            " the copy would read and write the original's recent rows",
            hint="copy a database with pg_dump and pg_restore (new oids), or from a template"
            " whose collections use the sql lexical backend",
        )


def reset_autovacuum(conn: Connection, schema: str, table: str) -> None:
    """Give the table back the server's autovacuum (the guard of a ``bm25`` index turns it
    off, :mod:`~parrot_parents.stores.postgres.search.bm25_guard`)."""
    qt = _qualified(schema, validate_identifier(table, "table"))
    conn.execute(text(f"ALTER TABLE {qt} RESET (autovacuum_enabled)"))


def bm25_index_sql(schema: str, table: str, index: str, config: str) -> str:
    """``CREATE INDEX IF NOT EXISTS index`` of a collection's ``bm25`` index (``index`` in
    the table's schema), with the text-search configuration ``config``."""
    qt = _qualified(schema, validate_identifier(table, "table"))
    config = validate_text_search_config(config)
    return (
        f'CREATE INDEX IF NOT EXISTS "{validate_identifier(index, "index")}" ON {qt}'
        f' USING bm25 ("{BM25_COLUMN}")'
        f" WITH (text_config = '{config}', k1 = {BM25_K1}, b = {BM25_B})"
    )


def drop_bm25(conn: Connection, table: str, schema: str = "public") -> None:
    """Drop a collection's ``bm25`` index and its column (idempotent): the collection
    is ``sql`` from then on."""
    qt = _qualified(schema, validate_identifier(table, "table"))
    conn.execute(text(f"DROP INDEX IF EXISTS {_qualified(schema, bm25_index_name(table))}"))
    conn.execute(text(f'ALTER TABLE {qt} DROP COLUMN IF EXISTS "{BM25_COLUMN}"'))

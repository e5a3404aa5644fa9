"""Where a collection's row keeps its columns: what a search reads stays in the row.

PostgreSQL moves a row's wide values out of line (TOAST) once the row passes about 2 KB.
pgvector's ``vector`` type asks for that (storage ``EXTERNAL``), and a child row (a
384-d vector is 1,540 bytes, plus its text, metadata and ``tsvector``) is past it, so
every child's vector lands in the TOAST table. An index scan does not mind, but every
read of the vector from the row does: the distance of each hit, and above all an exact
ranking over a filter's children, which then costs a TOAST index lookup per child.

So a collection's table gives storage ``MAIN`` to the columns a search reads row by row
(:data:`INLINE_COLUMNS`: the vector, the metadata a filter rechecks, the ``tsvector``
BM25 in SQL scores) and leaves the text columns at ``EXTENDED``. PostgreSQL then
compresses and moves the text out first and keeps ``MAIN`` values in the row unless the
row cannot fit a page (``TOAST_TUPLE_TARGET_MAIN``), so a vector of up to about 1,900
dimensions stays in line, and a larger one is still stored. timescale/pgai gives its
vector columns ``MAIN`` for the same reason (pgai PR #198); pgvector's README suggests
``PLAIN``, which fails on rows too large for a page instead.

Measured on copies of the scale benchmark's 100k children (``python -m benchmarks run
row_layout``, docs/performance.md): exact ranking over the children of a 1 to 10 % filter
2.3x faster, the distances of a search's hits 1.4x, and reading the ``tsvector`` of
every BM25 candidate about the same (0.95x).

A storage change applies to the rows written after it; ``VACUUM FULL`` on the table (or
any other rewrite) moves the existing ones.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = ["INLINE_COLUMNS", "apply_layout", "columns_out_of_layout"]

#: Columns stored ``MAIN``: kept in the row, compressed only as a last resort.
INLINE_COLUMNS = ("embedding", "cmetadata", "lexical")


def columns_out_of_layout(conn: Connection, schema: str, table: str) -> list[str]:
    """The :data:`INLINE_COLUMNS` of ``schema.table`` whose storage is not ``MAIN``
    (columns the table lacks are skipped); ``[]`` when the layout is in place."""
    rows = conn.execute(
        text(
            "SELECT a.attname FROM pg_attribute a"
            " WHERE a.attrelid = to_regclass(:qualified) AND a.attname = ANY(:columns)"
            " AND a.attstorage <> 'm' AND NOT a.attisdropped ORDER BY a.attnum"
        ),
        {"qualified": f'"{schema}"."{table}"', "columns": list(INLINE_COLUMNS)},
    )
    return [str(r[0]) for r in rows]


def apply_layout(conn: Connection, schema: str, table: str) -> list[str]:
    """Give the :data:`INLINE_COLUMNS` of ``schema.table`` storage ``MAIN``; return the
    columns changed (``[]``: nothing to do, and no lock taken).

    ``ALTER TABLE ... SET STORAGE`` takes an ``ACCESS EXCLUSIVE`` lock for a moment and
    rewrites nothing: rows written from then on follow it. Sync, inside the caller's
    transaction; ``schema`` and ``table`` must be validated identifiers.
    """
    changed = columns_out_of_layout(conn, schema, table)
    if changed:
        actions = ", ".join(f'ALTER COLUMN "{c}" SET STORAGE MAIN' for c in changed)
        conn.execute(text(f'ALTER TABLE "{schema}"."{table}" {actions}'))
    return changed

"""Where a collection's row keeps its columns: what a search reads stays in the row.

A child row is past PostgreSQL's 2 KB TOAST threshold, and pgvector's ``vector`` asks to be
moved out of line, so every read of a vector from the row (above all an exact ranking over
a filter's children) would cost a TOAST lookup. The columns a search reads row by row
(:data:`INLINE_COLUMNS`) get storage ``MAIN`` (in the row unless it cannot fit a page, as
timescale/pgai does; pgvector's ``PLAIN`` would fail on such rows), the text stays
``EXTENDED``. It applies to rows written after it; ``VACUUM FULL`` moves the others.
Measured: docs/performance.md, "Row layout".
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = ["INLINE_COLUMNS", "apply_layout"]

#: Columns stored ``MAIN``: kept in the row, compressed only as a last resort.
INLINE_COLUMNS = ("embedding", "cmetadata", "lexical")


def apply_layout(conn: Connection, schema: str, table: str) -> list[str]:
    """Give the :data:`INLINE_COLUMNS` of ``schema.table`` storage ``MAIN`` (those it has);
    return the columns changed (``[]``: the layout is in place, and no lock taken).

    ``ALTER TABLE ... SET STORAGE`` takes an ``ACCESS EXCLUSIVE`` lock for a moment and
    rewrites nothing: rows written from then on follow it. Sync, inside the caller's
    transaction; ``schema`` and ``table`` must be validated identifiers.
    """
    rows = conn.execute(
        text(
            "SELECT a.attname FROM pg_attribute a"
            " WHERE a.attrelid = to_regclass(:qualified) AND a.attname = ANY(:columns)"
            " AND a.attstorage <> 'm' AND NOT a.attisdropped ORDER BY a.attnum"
        ),
        {"qualified": f'"{schema}"."{table}"', "columns": list(INLINE_COLUMNS)},
    )
    changed = [str(r[0]) for r in rows]
    if changed:
        actions = ", ".join(f'ALTER COLUMN "{c}" SET STORAGE MAIN' for c in changed)
        conn.execute(text(f'ALTER TABLE "{schema}"."{table}" {actions}'))
    return changed

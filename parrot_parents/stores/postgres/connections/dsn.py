"""DSNs: a ``postgresql://`` DSN rewritten for SQLAlchemy's asyncpg dialect."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from parrot_parents.errors import ConfigurationError

__all__ = ["to_async_dsn"]


def to_async_dsn(dsn: str) -> str:
    """Rewrite ``postgresql://`` / ``postgres://`` DSNs for SQLAlchemy's asyncpg dialect."""
    try:
        url = make_url(dsn)
    except ArgumentError as exc:
        raise ConfigurationError(
            "cannot parse the DSN", hint="expected postgresql://user:password@host:port/db"
        ) from exc
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        url = url.set(drivername="postgresql+asyncpg")
    elif url.drivername != "postgresql+asyncpg":
        raise ConfigurationError(f"expected a postgresql:// DSN, got driver {url.drivername!r}")
    return url.render_as_string(hide_password=False)

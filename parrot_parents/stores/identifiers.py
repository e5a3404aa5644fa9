"""Validation of SQL identifiers (schema and table names), and the names derived from a
collection's table name.

Identifiers cannot be bound as SQL parameters, so they are checked once, at construction,
against a conservative pattern, and then always quoted by SQLAlchemy.

A collection owns objects named after its table (the documents and BM25 tables, indexes,
triggers, a function): :func:`derived_name` is the one rule that names them all. A table
name of at most :data:`SHORT_NAME_BYTES` bytes is used whole, so ``docs`` owns
``docs_documents``; a longer one is cut and given 8 hex digits of the SHA-1 of the whole
name, so two long names sharing a prefix never share an object, and every derived name
stays within PostgreSQL's 63 bytes (a longer identifier would be truncated by the server,
silently, into a name another collection may hold).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from parrot_parents.errors import ConfigurationError

__all__ = [
    "MAX_IDENTIFIER_BYTES",
    "RESERVED_TABLE_NAMES",
    "SHORT_NAME_BYTES",
    "CollectionName",
    "collection_name",
    "derived_name",
    "validate_identifier",
]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

#: PostgreSQL's ``NAMEDATALEN - 1``: the longest identifier it keeps, in bytes.
MAX_IDENTIFIER_BYTES = 63

#: Table names up to this many bytes give their derived names whole (see the module).
SHORT_NAME_BYTES = 40

_HASH_HEX = 8
_SUFFIX = re.compile(r"^[a-z_][a-z0-9_]*$")

#: The project's own tables, never collection names: the bots table (its default name),
#: the migrations' version table and the backfill progress table.
RESERVED_TABLE_NAMES = frozenset({"bots", "alembic_version", "parrot_parents_backfill"})


def validate_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a safe PostgreSQL identifier.

    Allowed: a letter or ``_`` then letters, digits or ``_``; at most 63 characters
    (PostgreSQL's ``NAMEDATALEN - 1``).

    Raises:
        ConfigurationError: ``value`` is not a string or does not match the pattern.
    """
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ConfigurationError(
            f"invalid {what} name {value!r}",
            hint="use 1-63 characters: ASCII letters (a-z, A-Z), digits and '_', "
            "not starting with a digit",
        )
    return value


@dataclass(frozen=True)
class CollectionName:
    """A collection's schema and table, both checked: made by :func:`collection_name`, so
    that what takes one never validates it again."""

    schema: str
    table: str

    @property
    def qualified(self) -> str:
        """``schema.table``."""
        return f"{self.schema}.{self.table}"

    def quoted(self, name: str | None = None) -> str:
        """``"schema"."name"`` (default: the table), for SQL text."""
        return f'"{self.schema}"."{name or self.table}"'


def collection_name(
    table: object, schema: object = "public", *, what: str = "collection", reserved: bool = False
) -> CollectionName:
    """The checked name of the collection ``table`` in ``schema``: where a name enters.

    ``reserved``: allow the project's own table names (:data:`RESERVED_TABLE_NAMES`), for
    readers of any table.

    Raises:
        ConfigurationError: a bad identifier, or (unless ``reserved``) a reserved name.
    """
    checked = validate_identifier(table, what)
    if not reserved and checked in RESERVED_TABLE_NAMES:
        raise ConfigurationError(
            f"{checked!r} is the name of one of parrot-parents' own tables, not a collection",
            hint="choose another collection name",
        )
    return CollectionName(validate_identifier(schema, "schema"), checked)


def derived_name(table: str, suffix: str) -> str:
    """The name of the object ``suffix`` of the collection ``table``: ``<base>_<suffix>``.

    ``base`` is ``table`` when it has at most :data:`SHORT_NAME_BYTES` bytes (so the
    objects of existing collections keep their names); otherwise its first 31 bytes (cut
    on a character boundary), ``_`` and the first 8 hex digits of the SHA-1 of the whole
    UTF-8 name: 40 bytes at most. Pure: every module names a collection's objects with it.

    Args:
        table: the collection's table name (any string; byte lengths count, not characters).
        suffix: lower-case letters, digits and ``_``; at most 22 bytes, so the result
            fits PostgreSQL's 63 bytes.

    Raises:
        ConfigurationError: a bad ``suffix``.
    """
    if not _SUFFIX.match(suffix) or len(suffix) > MAX_IDENTIFIER_BYTES - SHORT_NAME_BYTES - 1:
        raise ConfigurationError(f"invalid derived-name suffix {suffix!r}")
    raw = table.encode("utf-8")
    if len(raw) <= SHORT_NAME_BYTES:
        base = table
    else:
        digest = hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:_HASH_HEX]
        head = raw[: SHORT_NAME_BYTES - _HASH_HEX - 1].decode("utf-8", errors="ignore")
        base = f"{head}_{digest}"
    return f"{base}_{suffix}"

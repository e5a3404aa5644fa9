"""Validation of SQL identifiers (schema and table names).

Identifiers cannot be bound as SQL parameters, so they are checked once, at construction,
against a conservative pattern, and then always quoted by SQLAlchemy.
"""

from __future__ import annotations

import re

from parrot_parents.errors import ConfigurationError

__all__ = ["validate_identifier"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


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
            hint="use 1-63 characters: letters, digits and '_', not starting with a digit",
        )
    return value

"""Checks of the values that reach the database, made at the boundary before any model or
SQL work.

* :func:`clean_text`: NUL, lone surrogates and C0/C1 controls other than tab, LF, CR and FF
  are each replaced by one character (a space, or U+FFFD for a surrogate), so character
  offsets stay exact; what was replaced is reported.
* :func:`normalize_metadata`: JSON that jsonb can store and a filter can compare (dates
  and times become ISO 8601, tuples lists; integers within 64 bits); anything else is a
  :class:`~parrot_parents.errors.ConfigurationError` naming the key.
* :func:`check_document_id`: non-empty, at most :data:`MAX_ID_BYTES` (1024) bytes of UTF-8
  (row ids embed it, and btree entries are limited to about 2.7 KB), no NUL or surrogates.
* :func:`check_vector`: the right dimension, finite, nonzero norm; float32 arrays from here.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from parrot_parents.errors import ConfigurationError

__all__ = [
    "MAX_ID_BYTES",
    "check_document_id",
    "check_string",
    "check_vector",
    "clean_text",
    "normalize_metadata",
]

#: Longest document id, in bytes of UTF-8.
MAX_ID_BYTES = 1024

_SURROGATE = re.compile("[\ud800-\udfff]")
# NUL and control characters but \t \n \f \r (C0), DEL and C1.
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


def clean_text(text: str) -> tuple[str, list[str]]:
    """``text`` with NUL/control characters replaced by spaces and lone surrogates by
    U+FFFD (same length, so offsets are unchanged), and what was replaced.

    Raises:
        ConfigurationError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise ConfigurationError(f"page_content must be a string, got {type(text).__name__}")
    nul = text.count("\x00")
    text, controls = _CONTROL.subn(" ", text)
    text, surrogates = _SURROGATE.subn("\ufffd", text)
    found = [
        (nul, "NUL character(s) replaced by spaces"),
        (controls - nul, "control character(s) replaced by spaces"),
        (surrogates, "lone surrogate(s) replaced by U+FFFD"),
    ]
    return text, [f"{count} {what}" for count, what in found if count]


def check_string(value: str, where: str) -> None:
    """Refuse a string that PostgreSQL cannot store: a NUL or a lone surrogate (U+D800 to
    U+DFFF, which has no UTF-8 form); the message starts with ``where``."""
    if "\x00" in value:
        raise ConfigurationError(f"{where} contains a NUL character")
    if _SURROGATE.search(value):
        raise ConfigurationError(f"{where} contains a lone surrogate (not valid Unicode)")


def normalize_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON-able copy of ``metadata`` (module docstring).

    Raises:
        ConfigurationError: a value that cannot be stored; the message names the key
            (dotted for nested values, e.g. ``metadata['dates'][1]``).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ConfigurationError(f"metadata must be a dict, got {type(metadata).__name__}")
    return {k: v for k, v in _normalize(metadata, "metadata").items()}


#: Integers are kept within 64 bits: the filter language compares no wider ones, and
#: Milvus stores none.
_INT_LIMIT = 2**63


def _normalize(value: Any, where: str, depth: int = 0) -> Any:
    if depth > 32:
        raise ConfigurationError(f"{where} is nested more than 32 levels deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise ConfigurationError(
                f"{where} is an integer that does not fit in 64 bits",
                hint="store it as a string: no filter could compare it as a number",
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where} is {value!r}, not a finite number (not JSON)")
        return value
    if isinstance(value, str):
        check_string(value, where)
        return value
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigurationError(
                    f"{where} has a key of type {type(k).__name__}; keys must be strings"
                )
            check_string(k, f"{where} key {k!r}")
            out[k] = _normalize(v, f"{where}[{k!r}]", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_normalize(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise ConfigurationError(
        f"{where} is a {type(value).__name__}, which is not JSON",
        hint="use a string, number, boolean, list or dict (datetimes become ISO 8601)",
    )


def check_document_id(document_id: Any) -> str:
    """``document_id`` if it is a valid id (module docstring).

    Raises:
        ConfigurationError: empty, too long (the limit is named), NUL or surrogates.
    """
    if not isinstance(document_id, str) or not document_id:
        raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
    check_string(document_id, "document_id")
    size = len(document_id.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise ConfigurationError(
            f"document_id is {size} bytes long; the limit is {MAX_ID_BYTES} bytes of UTF-8",
            hint="use a shorter id, e.g. a path relative to a root or a hash",
        )
    return document_id


def check_vector(vector: Sequence[float] | np.ndarray, dimension: int, where: str) -> np.ndarray:
    """``vector`` as a float32 array of shape ``(dimension,)``, if it has ``dimension``
    finite values and a nonzero norm.

    A float32 numpy array is checked and returned as is (no copy, never a Python list);
    other arrays and sequences of numbers (lists from users) are converted once.

    Raises:
        ConfigurationError: another length or shape, a value that is not a number, a
            NaN/infinite value, or the zero vector.
    """
    try:
        values = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{where} holds a value that is not a number") from exc
    if values.ndim != 1:
        raise ConfigurationError(f"{where} has shape {values.shape}, expected ({dimension},)")
    if values.shape[0] != dimension:
        raise ConfigurationError(f"{where} has {values.shape[0]} values, expected {dimension}")
    if not np.isfinite(values).all():
        raise ConfigurationError(f"{where} holds NaN or infinite values")
    if not values.any():
        raise ConfigurationError(f"{where} is the zero vector (no direction to compare)")
    return values

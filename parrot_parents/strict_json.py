"""Strict JSON reading for input from users and clients (HTTP bodies, ``--filter``).

Python's ``json`` accepts ``NaN``/``Infinity``, turns ``1e400`` into ``inf``, keeps the
last of two equal keys of an object, raises ``RecursionError`` on deep nesting and
``ValueError`` on integers of more than 4300 digits. Here every one of those is a
:class:`InvalidJSON` with a message fit for the user.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "InvalidJSON", "find_nul", "loads_strict"]

#: Deepest nesting accepted (objects and arrays).
MAX_DEPTH = 64


class InvalidJSON(ValueError):
    """The text is not valid (strict) JSON; ``str(err)`` says why, for the user."""


def _constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not a JSON value")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidJSON(f"the number {text[:20]} is out of range")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 leaves duplicate names undefined; taking the last one silently would
    # let {"limit": 5, "limit": 500} mean something its sender may not have meant.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise InvalidJSON(f"duplicate key {key[:100]!r} in an object")
        data[key] = value
    return data


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` without NaN/Infinity, out-of-range numbers, duplicate keys in an
    object or deep nesting.

    Raises:
        InvalidJSON: the message says what is wrong (and where, for syntax errors).
    """
    try:
        data = json.loads(
            text, parse_constant=_constant, parse_float=_float, object_pairs_hook=_object
        )
    except InvalidJSON:
        raise
    except UnicodeDecodeError:
        raise InvalidJSON("the text is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidJSON(f"{exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise InvalidJSON(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # e.g. an integer past the 4300-digit conversion limit
        raise InvalidJSON("a number is too large") from None
    _check_depth(data)
    return data


def _check_depth(data: Any) -> None:
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidJSON(f"nested more than {MAX_DEPTH} levels deep")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)


def find_nul(data: Any) -> str | None:
    """The dotted key path of the first string (key or value) holding a NUL, else None.

    PostgreSQL text and jsonb cannot store NUL, so such input is refused at the boundary.
    """
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return path or "(body)"
        elif isinstance(value, dict):
            for k, v in value.items():
                key = f"{path}.{k}" if path else str(k)
                if "\x00" in str(k):
                    return key
                stack.append((v, key))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return None

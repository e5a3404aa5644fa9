"""Expansion modes: how a hit (a child) is widened at query time.

All three read the same stored hierarchy; none changes what is indexed.

============================  ==========================================================
``parent`` (default)          the parent of each hit (spec FEAT-128)
``auto_merge:T``              the parent only when at least a fraction ``T`` of its
                              children hit, otherwise the hit children themselves
                              (LlamaIndex's AutoMergingRetriever; ``T`` in (0, 1])
``window:N``                  the hit plus ``N`` neighbouring children on each side, in
                              document order (sentence-window retrieval; 1 <= N <= 1000)
============================  ==========================================================

:func:`parse_mode` is the one parser of this grammar, for every surface.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from decimal import Decimal
from typing import Any, Literal

from pydantic_core import core_schema

from parrot_parents.errors import ConfigurationError

__all__ = ["MAX_WINDOW", "ExpansionMode", "parse_mode"]

ModeName = Literal["parent", "auto_merge", "window"]

#: Largest ``N`` of ``window:N`` (neighbours on each side of a hit).
MAX_WINDOW = 1000

#: The canonical spellings of a mode, as a JSON Schema pattern (the parser also takes
#: white space around it and other spellings of the same numbers, e.g. ``window:+2``).
_PATTERN = (
    r"^(parent|auto_merge:(0?\.[0-9]*[1-9][0-9]*|1(\.0*)?)"
    rf"|window:([1-9][0-9]{{0,{len(str(MAX_WINDOW)) - 2}}}|{MAX_WINDOW}))$"
)
_GRAMMAR = "must be 'parent', 'auto_merge:T' (0 < T <= 1) or 'window:N' (N >= 1)"


@dataclass(frozen=True, eq=False)
class ExpansionMode:
    """A parsed expansion mode.

    It compares equal to another mode with the same values and to its canonical string
    (``ExpansionMode("window", window=2) == "window:2"``), and can be used directly as a
    pydantic field type: the field accepts the strings of :func:`parse_mode` and
    serialises to the canonical string.

    Attributes:
        name: ``parent``, ``auto_merge`` or ``window``.
        threshold: for ``auto_merge``, the fraction of a parent's children that must hit.
        window: for ``window``, neighbouring children taken on each side of a hit.
    """

    name: ModeName = "parent"
    threshold: float | None = None
    window: int | None = None

    def __str__(self) -> str:
        if self.name == "auto_merge":
            return f"auto_merge:{_plain(self.threshold or 0.0)}"
        if self.name == "window":
            return f"window:{self.window}"
        return "parent"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExpansionMode):
            return astuple(self) == astuple(other)
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _check,
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {
            "type": "string",
            "description": "'parent', 'auto_merge:T' (0 < T <= 1) or 'window:N' (N >= 1)",
            "pattern": _PATTERN,
            "examples": ["parent", "auto_merge:0.5", "window:1"],
        }


def _plain(number: float) -> str:
    """``0.5``, ``1``, ``0.00001``: positional notation (a bot row's CHECK wants digits)."""
    text = format(Decimal(repr(number)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


class _BadMode(ValueError):
    """A mode string that does not parse: the problem, the offending part and a hint."""

    def __init__(self, problem: str, got: str | None = None, hint: str | None = None) -> None:
        super().__init__(problem)
        self.got, self.hint = got, hint


def _check(value: Any) -> ExpansionMode:
    """The mode ``value`` names; :class:`_BadMode` otherwise (pydantic, which calls this
    for a field, turns the ``ValueError`` into a validation error naming the field)."""
    if isinstance(value, ExpansionMode):
        return value
    if not isinstance(value, str):
        raise _BadMode("must be a string like 'window:2'", type(value).__name__)
    name, sep, arg = value.strip().partition(":")
    if name == "parent":
        if sep:
            raise _BadMode("mode 'parent' takes no parameter")
        return ExpansionMode()
    if name == "auto_merge":
        try:
            threshold = float(arg)
        except ValueError:
            raise _BadMode("auto_merge needs a threshold, e.g. 'auto_merge:0.5'") from None
        if math.isnan(threshold) or not 0.0 < threshold <= 1.0:
            raise _BadMode("the auto_merge threshold T must be in (0, 1]", f"{threshold:g}")
        return ExpansionMode("auto_merge", threshold=threshold)
    if name == "window":
        try:
            n = int(arg)
        except ValueError:
            raise _BadMode("window needs a whole number of neighbours, e.g. 'window:2'") from None
        if n < 1:
            hint = "a window of 0 is the hit alone: use expand_to_parent=False"
            raise _BadMode("the window size N must be >= 1", str(n), hint)
        if n > MAX_WINDOW:
            raise _BadMode(f"the window size N must be <= {MAX_WINDOW}", str(n))
        return ExpansionMode("window", window=n)
    raise _BadMode(f"unknown mode: {_GRAMMAR}")


def parse_mode(value: str | ExpansionMode | None, *, field: str = "mode") -> ExpansionMode:
    """Parse ``"parent"``, ``"auto_merge:0.5"`` or ``"window:2"`` (None is ``parent``);
    white space around it is ignored and the value normalised (``"window:+2"`` is
    ``window:2``, ``"auto_merge:1e-1"`` is ``auto_merge:0.1``).

    Args:
        value: the mode string, a parsed mode, or None.
        field: the name used in the error message (``mode``, ``expansion_mode``).

    Raises:
        ConfigurationError: unknown mode, missing or malformed parameter, a threshold
            outside (0, 1], or a window outside [1, 1000]. The message names the value.
    """
    if value is None:
        return ExpansionMode()
    try:
        return _check(value)
    except _BadMode as exc:
        detail = "" if exc.got is None else f", got {exc.got}"
        raise ConfigurationError(f"{field} {value!r}: {exc}{detail}", hint=exc.hint) from None

"""Expansion modes: how a hit (a child) is widened at query time.

All three read the same stored hierarchy; none changes what is indexed.

============================  ==========================================================
``parent`` (default)          the parent of each hit (spec FEAT-128)
``auto_merge:T``              the parent only when at least a fraction ``T`` of its
                              children hit, otherwise the hit children themselves
                              (LlamaIndex's AutoMergingRetriever; ``T`` in (0, 1])
``window:N``                  the hit plus ``N`` neighbouring children on each side, in
                              document order (sentence-window retrieval; ``N >= 1``)
============================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from parrot_parents.errors import ConfigurationError

__all__ = ["ExpansionMode", "parse_mode"]

ModeName = Literal["parent", "auto_merge", "window"]


@dataclass(frozen=True)
class ExpansionMode:
    """A parsed expansion mode.

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
            return f"auto_merge:{self.threshold:g}"
        if self.name == "window":
            return f"window:{self.window}"
        return "parent"


def parse_mode(value: str | ExpansionMode | None) -> ExpansionMode:
    """Parse ``"parent"``, ``"auto_merge:0.5"`` or ``"window:2"``.

    Raises:
        ConfigurationError: unknown mode, missing or malformed parameter, a threshold
            outside (0, 1], or a window below 1.
    """
    if value is None:
        return ExpansionMode()
    if isinstance(value, ExpansionMode):
        return value
    if not isinstance(value, str):
        raise ConfigurationError(f"mode must be a string like 'window:2', got {value!r}")
    name, _, arg = value.strip().partition(":")
    if name == "parent":
        if arg:
            raise ConfigurationError(f"mode 'parent' takes no parameter, got {value!r}")
        return ExpansionMode()
    if name == "auto_merge":
        try:
            threshold = float(arg)
        except ValueError:
            raise ConfigurationError(
                f"mode {value!r}: auto_merge needs a threshold, e.g. 'auto_merge:0.5'"
            ) from None
        if not 0.0 < threshold <= 1.0:
            raise ConfigurationError(
                f"mode {value!r}: the auto_merge threshold must be in (0, 1], got {threshold:g}",
                hint="at 1 every child of a parent must hit before the parent is returned",
            )
        return ExpansionMode("auto_merge", threshold=threshold)
    if name == "window":
        try:
            n = int(arg)
        except ValueError:
            raise ConfigurationError(
                f"mode {value!r}: window needs a whole number of neighbours, e.g. 'window:2'"
            ) from None
        if n < 1:
            raise ConfigurationError(
                f"mode {value!r}: the window must be >= 1, got {n}",
                hint="a window of 0 is the hit alone: use expand_to_parent=False",
            )
        return ExpansionMode("window", window=n)
    raise ConfigurationError(f"unknown mode {value!r}: use 'parent', 'auto_merge:T' or 'window:N'")

"""The ingestion-strategy grammar: one parser for ``--strategy SPEC``.

A strategy decides what is *indexed* and what is *returned*. The strategies, their
parameters (positional or keyword, e.g. ``hierarchical:4,threshold=0.6``), defaults and
limits: docs/strategies.md ("The grammar"). ``N`` of ``parent-document:N`` and
``hierarchical:N`` is children per parent (parent_chunks of ``N x child size``
characters); ``max_document_chars`` is in characters (default 12,000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, get_args

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.defaults import DEFAULT_STRATEGY
from parrot_parents.retrieval.modes import MAX_WINDOW, ExpansionMode
from parrot_parents.stores.protocols import IndexedRows

__all__ = [
    "DEFAULT_MAX_DOCUMENT_CHARS",
    "DEFAULT_STRATEGY",
    "MAX_COUNT",
    "STRATEGY_NAMES",
    "StrategyName",
    "StrategySpec",
    "parse_strategy",
    "strategy_for",
]

StrategyName = Literal[
    "plain",
    "parent-document",
    "sentence-window",
    "hierarchical",
    "contextual",
    "hypothetical-questions",
    "propositions",
    "summary",
]
STRATEGY_NAMES: tuple[StrategyName, ...] = get_args(StrategyName)
FREE: frozenset[str] = frozenset({"plain", "parent-document", "sentence-window", "hierarchical"})

#: Characters of the source document put into a prompt (contextual, summary).
DEFAULT_MAX_DOCUMENT_CHARS = 12_000
#: Largest ``count`` of questions or propositions per chunk (bounds prompts and the index).
MAX_COUNT = 20
_DEFAULT_COUNT = {"hypothetical-questions": "3", "propositions": "6"}
_DEFAULTS = {
    "window": "2",
    "threshold": "0.5",
    "context": "model",
    "max_document_chars": str(DEFAULT_MAX_DOCUMENT_CHARS),
}

# Per strategy: its keywords, and which one the positional shorthand sets.
_MODEL_KEYS = ("model", "max_document_chars")
_KEYS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "plain": ((), None),
    "parent-document": (("group",), "group"),
    "sentence-window": (("window",), "window"),
    "hierarchical": (("group", "threshold"), "group"),
    "contextual": (("context", *_MODEL_KEYS), "context"),
    "hypothetical-questions": (("count", *_MODEL_KEYS), "count"),
    "propositions": (("count", *_MODEL_KEYS), "count"),
    "summary": (_MODEL_KEYS, None),
}


def _is_strategy_name(name: str) -> TypeGuard[StrategyName]:
    return name in _KEYS


@dataclass(frozen=True)
class StrategySpec:
    """A parsed ingestion strategy; build it with :func:`parse_strategy`.

    Attributes:
        name: one of :data:`STRATEGY_NAMES`.
        group: children per parent (``parent-document``, ``hierarchical``); None keeps
            the package's hierarchy.
        window: neighbouring children on each side (``sentence-window``).
        threshold: fraction of a parent's children that must hit (``hierarchical``).
        count: questions or propositions asked for per chunk.
        context: ``"model"`` or ``"extractive"`` (``contextual`` only).
        model: model name for the model-backed strategies; None: the client's own.
        max_document_chars: document characters in a prompt (model-backed strategies).
    """

    name: StrategyName = "plain"
    group: int | None = None
    window: int | None = None
    threshold: float | None = None
    count: int | None = None
    context: Literal["model", "extractive"] | None = None
    model: str | None = None
    max_document_chars: int | None = None

    def __str__(self) -> str:
        parts: list[str] = []
        for key in _KEYS[self.name][0]:
            value = getattr(self, key)
            if value is None:
                continue
            parts.append(f"{key}={_plain_number(value)}")
        return self.name + (":" + ",".join(parts) if parts else "")

    @property
    def free(self) -> bool:
        """True for the four strategies that need no model and store nothing extra."""
        return self.name in FREE or self.context == "extractive"

    @property
    def needs_model(self) -> bool:
        """True when ingesting calls a model."""
        return not self.free

    @property
    def indexes_rows(self) -> bool:
        """True when the strategy stores indexed rows beside the children."""
        return self.name not in FREE

    @property
    def expand(self) -> bool:
        """Whether hits are widened at query time (``expand_to_parent``)."""
        return self.name in ("parent-document", "sentence-window", "hierarchical")

    @property
    def mode(self) -> ExpansionMode | None:
        """The expansion mode of a free strategy; None when hits are returned as they are."""
        if self.name == "parent-document":
            return ExpansionMode()
        if self.name == "sentence-window":
            return ExpansionMode("window", window=self.window)
        if self.name == "hierarchical":
            return ExpansionMode("auto_merge", threshold=self.threshold)
        return None

    def retrieval_overrides(self) -> dict[str, Any]:
        """The retrieval options this strategy sets (``expand_to_parent`` and ``mode``)."""
        out: dict[str, Any] = {"expand_to_parent": self.expand}
        if self.mode is not None:
            out["mode"] = str(self.mode)
        return out

    def parent_size(self, child_size: int) -> int | None:
        """parent_chunk size in characters for ``group`` children of ``child_size``
        characters; None when the package's hierarchy is kept."""
        return None if self.group is None else self.group * child_size


def _plain_number(value: object) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def _fail(spec: str, problem: str, hint: str | None = None) -> ConfigurationError:
    return ConfigurationError(f"strategy {spec!r}: {problem}", hint=hint)


def strategy_for(value: str | StrategySpec | None, store: object) -> StrategySpec:
    """The strategy given, parsed; when none is given, the package default for ``store``
    (what ``TextLoader()`` does): :data:`DEFAULT_STRATEGY` (from
    :mod:`parrot_parents.loaders.defaults`) on a store that can search indexed rows
    (:class:`~parrot_parents.stores.protocols.IndexedRows`: PostgreSQL, and Milvus, which
    folds each child's one indexed row into the child's searched text), else ``plain``.

    Raises:
        ConfigurationError: as :func:`parse_strategy`.
    """
    if value is not None:
        return parse_strategy(value)
    return parse_strategy(DEFAULT_STRATEGY if isinstance(store, IndexedRows) else "plain")


def parse_strategy(value: str | StrategySpec | None) -> StrategySpec:
    """Parse a ``--strategy`` spec (None is ``plain``).

    Raises:
        ConfigurationError (a ``ValueError``): an unknown strategy or keyword, a value
            that is not a number, a group below 2, a window below 1 (or above 1000), a
            threshold outside (0, 1], a count outside [1, 20], ``max_document_chars``
            below 1, or an empty model name. The message names the spec and the fix.
    """
    if value is None:
        return StrategySpec()
    if isinstance(value, StrategySpec):
        return value
    if not isinstance(value, str):
        raise ConfigurationError(
            f"strategy must be a string like 'sentence-window:2', got {type(value).__name__}"
        )
    spec = value.strip()
    name, sep, rest = spec.partition(":")
    name = name.strip()
    if not _is_strategy_name(name):
        raise _fail(spec, f"unknown strategy; use one of {', '.join(STRATEGY_NAMES)}")
    keys, shorthand = _KEYS[name]
    given: dict[str, str] = {}
    if sep:
        if not rest.strip():
            raise _fail(spec, "nothing after ':'", hint=f"write {name!r} alone")
        for part in rest.split(","):
            key, eq, raw = part.strip().partition("=")
            if not eq:
                if shorthand is None:
                    raise _fail(spec, f"{name} takes no positional parameter, got {part!r}")
                key, raw = shorthand, part.strip()
            key, raw = key.strip(), raw.strip()
            if key not in keys:
                allowed = ", ".join(keys) if keys else "none"
                raise _fail(spec, f"unknown parameter {key!r} for {name} (allowed: {allowed})")
            if key in given:
                raise _fail(spec, f"parameter {key!r} is given twice")
            if not raw:
                raise _fail(spec, f"parameter {key!r} has no value")
            given[key] = raw
    extractive = given.get("context") == "extractive"
    if extractive and ("model" in given or "max_document_chars" in given):
        raise _fail(spec, "the extractive variant calls no model: drop model/max_document_chars")
    fields: dict[str, Any] = {}
    for key in keys:
        text = given.get(key, _DEFAULT_COUNT.get(name) if key == "count" else _DEFAULTS.get(key))
        if text is not None and not (extractive and key == "max_document_chars"):
            fields[key] = _value(spec, key, text)
    return StrategySpec(name, **fields)


def _value(spec: str, key: str, raw: str) -> Any:
    """The value of ``key=raw`` in ``spec``, within its limits."""
    if key == "model":
        return raw
    if key == "context":
        if raw not in ("model", "extractive"):
            raise _fail(spec, f"context must be 'model' or 'extractive', got {raw!r}")
        return raw
    if key == "threshold":
        try:
            threshold = float(raw)
        except ValueError:
            raise _fail(spec, f"threshold must be a number, got {raw!r}") from None
        if math.isnan(threshold) or not 0.0 < threshold <= 1.0:
            raise _fail(
                spec,
                f"threshold must be in (0, 1], got {raw}",
                hint="1 merges a parent only when every one of its children hit",
            )
        return threshold
    try:
        value = int(raw)
    except ValueError:
        raise _fail(spec, f"{key} must be a whole number, got {raw!r}") from None
    if key == "group" and value < 2:
        raise _fail(
            spec,
            f"a parent must group at least 2 children, got {value}",
            hint="a group of one child is plain retrieval: use 'plain'",
        )
    if key == "window" and value < 1:
        raise _fail(
            spec,
            f"the window must take at least 1 neighbour on each side, got {value}",
            hint="a window of zero is plain retrieval: use 'plain'",
        )
    if key == "window" and value > MAX_WINDOW:
        raise _fail(spec, f"the window must be at most {MAX_WINDOW}, got {value}")
    if key == "count" and not 1 <= value <= MAX_COUNT:
        raise _fail(spec, f"count must be in [1, {MAX_COUNT}], got {value}")
    if key == "max_document_chars" and value < 1:
        raise _fail(spec, f"max_document_chars must be >= 1, got {value}")
    return value

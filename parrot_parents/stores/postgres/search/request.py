"""One search, as the store receives it: validated once, passed whole, and keyed by shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.context import ContextPlan
from parrot_parents.stores.filters import validate_filter
from parrot_parents.stores.search_options import Fusion, SearchMode, branch_depth, check_search_mode

__all__ = ["MAX_LIMIT", "SearchRequest", "check_limit_and_filter"]

#: The most rows one search returns.
MAX_LIMIT = 10_000


def check_limit_and_filter(limit: object, filter: object) -> None:
    """Refuse a ``limit`` outside 1..:data:`MAX_LIMIT` or a bad ``filter``, before any
    model or database is touched.

    Raises:
        ConfigurationError: naming the bad limit, or the filter's bad key or operator.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigurationError(f"limit must be an int in [1, {MAX_LIMIT}], got {limit!r}")
    if filter is not None and not isinstance(filter, dict):
        raise ConfigurationError(f"filter must be a dict, got {type(filter).__name__}")
    if filter:
        validate_filter(filter)


@dataclass(frozen=True, eq=False)
class SearchRequest:
    """A search over a collection's children.

    Attributes:
        mode: ``dense``, ``lexical`` or ``hybrid``.
        limit: rows wanted, 1..:data:`MAX_LIMIT`.
        vector: the query embedding as float32 numpy array of the collection's dimension;
            None only in ``lexical`` mode.
        text: the question; needed by ``lexical`` and ``hybrid``.
        filter: a metadata filter (:mod:`parrot_parents.stores.filters`), or None.
        fusion: RRF settings of ``hybrid`` (None: the defaults).
        plan: the reads to join to the search (parents, windows), or None.
        include_parents: whether rows marked as parents are ranked too.
    """

    mode: SearchMode
    limit: int
    vector: np.ndarray | None = None
    text: str | None = None
    filter: Mapping[str, Any] | None = None
    fusion: Fusion | None = None
    plan: ContextPlan | None = None
    include_parents: bool = False

    @classmethod
    def build(
        cls,
        *,
        mode: object,
        limit: object,
        dimension: int,
        vector: Sequence[float] | np.ndarray | None = None,
        text: str | None = None,
        filter: object = None,
        fusion: Fusion | None = None,
        plan: ContextPlan | None = None,
        include_parents: bool = False,
    ) -> SearchRequest:
        """Validate the parts of a search and return it.

        Raises:
            ConfigurationError: an unknown ``mode``, ``limit`` outside 1..MAX_LIMIT, a
                filter that is not a valid dict (the bad key or operator is named), a
                vector of another length or with non-finite values, or no ``text`` for
                a mode that matches it lexically.
        """
        checked = check_search_mode(mode)
        check_limit_and_filter(limit, filter)
        assert isinstance(limit, int) and (filter is None or isinstance(filter, dict))
        array = None
        if vector is not None:
            array = np.asarray(vector, dtype=np.float32)
            if array.shape != (dimension,):
                raise ConfigurationError(
                    f"query vector has {array.size} values, expected {dimension}"
                )
            if not np.isfinite(array).all():
                raise ConfigurationError("query vector has NaN or infinite values")
        elif checked != "lexical":
            raise ConfigurationError(f"search_mode={checked!r} needs the query vector")
        if checked != "dense" and not text:
            raise ConfigurationError(f"search_mode={checked!r} needs the query text: pass query=")
        return cls(
            mode=checked,
            limit=limit,
            vector=array,
            text=text if checked != "dense" else None,
            filter=filter or None,
            fusion=fusion,
            plan=plan,
            include_parents=bool(include_parents),
        )

    def shape(self, *extra: Any, plan: Any = None) -> tuple[Any, ...]:
        """The key of this search's statement, with the store's ``extra`` parts that are
        written into it; a filter's structure is not in it (its statements add it).
        ``plan``: the plan's part of the key, where it is not :attr:`plan` itself (a
        scope's SQL in place of its values)."""
        return (
            self.mode,
            self.limit,
            self.include_parents,
            self.vector is not None,
            self.fusion,
            self.plan if plan is None else plan,
            *extra,
        )

    @property
    def depth(self) -> int:
        """Candidates the dense branch must see
        (:func:`~parrot_parents.stores.search_options.branch_depth`)."""
        return branch_depth(self.mode, self.limit, self.fusion)

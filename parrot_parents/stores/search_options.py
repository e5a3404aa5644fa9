"""Query-time options of the HNSW index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from parrot_parents.errors import ConfigurationError

__all__ = ["HNSWQueryOptions"]

IterativeScan = Literal["off", "strict_order", "relaxed_order"]


@dataclass(frozen=True)
class HNSWQueryOptions:
    """Settings applied with ``SET LOCAL`` inside each search transaction.

    Attributes:
        ef_search: candidate list size (pgvector default 40); raised to ``limit`` when
            a search asks for more rows.
        iterative_scan: pgvector >= 0.8 iterative index scans. ``"strict_order"`` (default)
            keeps scanning the index until ``limit`` rows pass the WHERE clause, in exact
            distance order, so a selective metadata filter still yields ``limit`` rows.
            ``"off"`` restores the classic behaviour (may return fewer rows).
        max_scan_tuples: upper bound of tuples an iterative scan visits (pgvector default
            20000). Raise it for very selective filters on very large tables.
    """

    ef_search: int = 40
    iterative_scan: IterativeScan = "strict_order"
    max_scan_tuples: int = 20000

    def __post_init__(self) -> None:
        if not 1 <= self.ef_search <= 1000:
            raise ConfigurationError(f"ef_search must be in [1, 1000], got {self.ef_search!r}")
        if self.iterative_scan not in ("off", "strict_order", "relaxed_order"):
            raise ConfigurationError(
                "iterative_scan must be 'off', 'strict_order' or 'relaxed_order', "
                f"got {self.iterative_scan!r}"
            )
        if self.max_scan_tuples < 1:
            raise ConfigurationError(f"max_scan_tuples must be >= 1, got {self.max_scan_tuples!r}")

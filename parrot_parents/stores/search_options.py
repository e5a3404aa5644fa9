"""Query-time options of the HNSW index."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from parrot_parents.errors import ConfigurationError

__all__ = [
    "DEFAULT_EF_SEARCH",
    "DEFAULT_EF_SEARCH_CEILING",
    "DEFAULT_PARTITION_EF_SEARCH",
    "EF_SEARCH_GROWS_ABOVE",
    "FILTER_EXACT_BELOW",
    "MIN_FUSION_DEPTH",
    "PRF",
    "SEARCH_MODES",
    "Fusion",
    "HNSWQueryOptions",
    "SearchMode",
    "branch_depth",
    "check_search_mode",
    "fusion_depth",
]

#: The default ``ef_search`` of :class:`HNSWQueryOptions` (how it was chosen: there).
DEFAULT_EF_SEARCH = 100
#: The default ``ef_search_ceiling`` of :class:`HNSWQueryOptions` (how it was chosen: there).
DEFAULT_EF_SEARCH_CEILING = 400
#: A graph of at most this many vectors is walked with ``ef_search`` as set; a larger one's
#: walk grows with it (:meth:`HNSWQueryOptions.ef_at`).
EF_SEARCH_GROWS_ABOVE = 10_000
#: The power of the graph's size (in :data:`EF_SEARCH_GROWS_ABOVE`) by which the walk grows.
EF_SEARCH_GROWTH = 0.6

#: The default ``partition_ef_search`` of :class:`HNSWQueryOptions` (there too).
DEFAULT_PARTITION_EF_SEARCH = 200

IterativeScan = Literal["off", "strict_order", "relaxed_order"]
#: ``dense`` (pgvector kNN), ``lexical`` (BM25 in SQL) or ``hybrid`` (both, fused by RRF).
SearchMode = Literal["dense", "lexical", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("dense", "lexical", "hybrid")

#: A metadata filter expected to keep at most this many children is ranked exactly, in a
#: collection of up to 100k children; the threshold grows with a larger collection
#: (measured crossings: :mod:`parrot_parents.stores.postgres.search.filter_plan`).
FILTER_EXACT_BELOW = 4000


def _check_range(name: str, value: object, low: float, high: float, *, integer: bool) -> None:
    """Refuse ``value`` unless it is a number (an int when ``integer``; never a bool) in
    ``[low, high]``; the message names ``name``."""
    kind = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        what = "an int in" if integer else "in"
        raise ConfigurationError(f"{name} must be {what} [{low}, {high}], got {value!r}")


def check_search_mode(mode: object) -> SearchMode:
    """``mode`` as a :data:`SearchMode`.

    Raises:
        ConfigurationError: it is not one of :data:`SEARCH_MODES`.
    """
    for known in SEARCH_MODES:
        if mode == known:
            return known
    raise ConfigurationError(f"search_mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")


@dataclass(frozen=True)
class PRF:
    """Pseudo-relevance feedback (RM3) for the lexical branch.

    A first BM25 pass takes the top ``fb_docs`` children; each lexeme ``w`` of them is
    weighed by ``sum_D P(w|D) * P(Q|D)`` (``P(w|D)``: its share of the child's lexeme
    occurrences; ``P(Q|D)``: the child's BM25 score over the sum of the ``fb_docs``
    scores), the ``fb_terms`` heaviest are kept and normalised to sum 1, and mixed with
    the query (each query lexeme ``1 / |Q|``) as ``original_weight * query + (1 -
    original_weight) * feedback``. A second BM25 pass then scores every child with each
    lexeme's contribution multiplied by its weight (Lavrenko and Croft, "Relevance-Based
    Language Models", SIGIR 2001; RM3 as in Anserini, whose defaults these are).

    Attributes:
        fb_docs: children of the first pass read for feedback, 1..100 (default 10).
        fb_terms: feedback lexemes kept, 1..100 (default 10).
        original_weight: the query's share of the mixed weights, 0..1 (default 0.5).
    """

    fb_docs: int = 10
    fb_terms: int = 10
    original_weight: float = 0.5

    def __post_init__(self) -> None:
        _check_range("prf fb_docs", self.fb_docs, 1, 100, integer=True)
        _check_range("prf fb_terms", self.fb_terms, 1, 100, integer=True)
        _check_range("prf original_weight", self.original_weight, 0, 1, integer=False)


#: The fewest candidates each branch gives a hybrid search to fuse by default: the default
#: ``limit``. Fusing only ``limit`` from each branch would rank a child differently at
#: another limit: at ``limit=3`` a child third in one list and fourth in the other would
#: lose its second rank, and half its score, to a child first in one list alone.
MIN_FUSION_DEPTH = 10


@dataclass(frozen=True)
class Fusion:
    """Weighted reciprocal rank fusion of the dense and lexical branches.

    Attributes:
        rrf_k: the RRF constant (default 60, as in Cormack et al. 2009), 1..1000.
        dense_weight, lexical_weight: weight of each branch (default 1.0 each), 0..10.
        depth: candidates taken from each branch before fusing; default the ``limit``,
            and at least :data:`MIN_FUSION_DEPTH` (10): a smaller limit then returns the
            first rows of the same fused ranking, not a ranking of shorter lists.
        lexical_depth: candidates of the lexical branch when it should see fewer than
            the dense one (BM25 ranks far down a list add noise); default ``depth``.
        prf: pseudo-relevance feedback for the lexical branch (``lexical`` and
            ``hybrid``), or None (default) for plain BM25. PostgreSQL stores only.
    """

    rrf_k: int = 60
    dense_weight: float = 1.0
    lexical_weight: float = 1.0
    depth: int | None = None
    lexical_depth: int | None = None
    prf: PRF | None = None

    def __post_init__(self) -> None:
        if self.prf is not None and not isinstance(self.prf, PRF):
            raise ConfigurationError(f"prf must be a PRF or None, got {self.prf!r}")
        _check_range("rrf_k", self.rrf_k, 1, 1000, integer=True)
        _check_range("dense_weight", self.dense_weight, 0, 10, integer=False)
        _check_range("lexical_weight", self.lexical_weight, 0, 10, integer=False)
        for name in ("depth", "lexical_depth"):
            if getattr(self, name) is not None:
                _check_range(name, getattr(self, name), 1, 10_000, integer=True)


@dataclass(frozen=True)
class HNSWQueryOptions:
    """Settings applied with ``SET LOCAL`` inside each search transaction.

    Attributes:
        ef_search: candidate list size, 1..1000 (default :data:`DEFAULT_EF_SEARCH`);
            raised to ``limit`` when a search asks for more rows. Larger finds more of
            the exact top ``limit`` and costs latency: the default is the smallest that
            kept recall@10 at 0.95 or above (0.952, 1.45 ms p50) for held-out children of
            real text (late-chunked HTML manuals, 101k children) with the default index
            build (:class:`~parrot_parents.stores.postgres.collections.schema.HNSWIndex`,
            ``ef_construction=200``); pgvector's own default, 40, gave 0.78 at 1.24 ms on
            pgvector's build (``python -m benchmarks run hnsw_recall``,
            ``docs/performance.md``). An index built with ``ef_construction=64`` (before
            that default) needs far more (0.84 at 100, 0.94 at 400): rebuild it. This is
            the walk of a graph of up to 10,000 vectors; a larger one's grows
            (:meth:`ef_at`), up to ``ef_search_ceiling``.
        ef_search_ceiling: the widest walk the growth reaches, 1..1000 (default
            :data:`DEFAULT_EF_SEARCH_CEILING`, 400), or None to walk every graph with
            ``ef_search``; a ceiling below ``ef_search`` keeps ``ef_search``. A question
            is not a passage, and in a large graph a walk of 100 misses most of a
            question's nearest children: at 101k children of real text, recall@10 of the
            dev questions against exact search was 0.56 at 100 and 0.79 at 400 (held-out
            passages: 0.95 and 0.99; ``hnsw_recall``). Among 100k children of
            distractors, the default retrieval's recall of the dev set at 1000/2000/4000
            characters was 0.754/0.876/0.947 at 100, 0.766/0.890/0.957 at 200,
            0.775/0.898/0.964 at 300, 0.780/0.902/0.965 at 400 and 0.784/0.905/0.968 at
            1000 (the dev corpora alone: 0.806/0.922/0.975), so the growth reaches 400
            at 100k children, where the gain flattens (``python -m benchmarks run
            distractors``, ``benchmarks/reports/distractors.md``). A walk of 400 costs
            about 4 ms more at 100k children (1.45 against 5.22 ms p50, ``hnsw_recall``).
        iterative_scan: pgvector >= 0.8 iterative index scans: the index is scanned on
            until ``limit`` rows pass the WHERE clause, so a selective metadata filter
            still yields ``limit`` rows. ``"relaxed_order"`` (default) may yield them
            slightly out of distance order (the search ranks what it yields by its exact
            distance); ``"strict_order"`` keeps exact order by leaving out rows that come
            late, and so finds fewer of a filter's true nearest when the filter keeps
            rows far from the query: on real text (100k children of manuals, filters on
            a page's package or place keeping 1 to 20 %), recall@10 against the exact
            filtered ranking was 0.34 to 0.68 strict and 0.67 to 0.91 relaxed at the
            same latency (``python -m benchmarks run filters --text real``,
            docs/performance.md). ``"off"`` restores the classic behaviour (may return
            fewer rows).
        max_scan_tuples: upper bound of tuples an iterative scan visits (pgvector default
            20000). Raise it for very selective filters on very large tables.
        partition_ef_search: ``ef_search`` of a search through a partition key value's
            own graph (:mod:`~parrot_parents.stores.postgres.collections.partitions`),
            1..1000 (default :data:`DEFAULT_PARTITION_EF_SEARCH`, 200). A value's graph is
            small, so a wider search reads few more of its pages, and a query far from
            every row of the value needs it: at a million children in 100 values, recall@10
            against the value's exact ranking was 0.88 at 100 and 0.96 at 200 for such
            queries (0.99 either way for a query near the value's rows;
            ``python -m benchmarks run partitions``, docs/performance.md).
        filter_exact_below: a metadata filter the planner expects to keep at most this
            many children is ranked exactly over them, a broader one through the HNSW
            index (default :data:`FILTER_EXACT_BELOW`, 4,000 children), in a collection
            of up to 100k children; above that the threshold grows as the collection's
            size to the power 0.6 (15,900 at a million by default;
            :func:`~parrot_parents.stores.postgres.search.filter_plan.threshold`). 0 sends every
            filtered search to the index first.
    """

    ef_search: int = DEFAULT_EF_SEARCH
    ef_search_ceiling: int | None = DEFAULT_EF_SEARCH_CEILING
    iterative_scan: IterativeScan = "relaxed_order"
    max_scan_tuples: int = 20000
    filter_exact_below: int = FILTER_EXACT_BELOW
    partition_ef_search: int = DEFAULT_PARTITION_EF_SEARCH

    def __post_init__(self) -> None:
        _check_range("ef_search", self.ef_search, 1, 1000, integer=True)
        _check_range("partition_ef_search", self.partition_ef_search, 1, 1000, integer=True)
        if self.ef_search_ceiling is not None:
            _check_range("ef_search_ceiling", self.ef_search_ceiling, 1, 1000, integer=True)
        if self.iterative_scan not in ("off", "strict_order", "relaxed_order"):
            raise ConfigurationError(
                "iterative_scan must be 'off', 'strict_order' or 'relaxed_order', "
                f"got {self.iterative_scan!r}"
            )
        if self.max_scan_tuples < 1:
            raise ConfigurationError(f"max_scan_tuples must be >= 1, got {self.max_scan_tuples!r}")
        below = self.filter_exact_below
        if isinstance(below, bool) or not isinstance(below, int) or below < 0:
            raise ConfigurationError(f"filter_exact_below must be an int >= 0, got {below!r}")

    def ef_at(self, children: float | None) -> int:
        """The ``ef_search`` of a walk of the collection's graph of ``children`` vectors
        (None: not known): ``ef_search`` up to :data:`EF_SEARCH_GROWS_ABOVE` (10,000)
        vectors, then ``ef_search * (children / 10,000) ** 0.6``, at most
        ``ef_search_ceiling`` (never below ``ef_search``); with no ceiling, ``ef_search``
        at every size."""
        ceiling = self.ef_search_ceiling
        if children is None or ceiling is None or children <= EF_SEARCH_GROWS_ABOVE:
            return self.ef_search
        grown = round(self.ef_search * math.pow(children / EF_SEARCH_GROWS_ABOVE, EF_SEARCH_GROWTH))
        return max(self.ef_search, min(ceiling, grown))


def branch_depth(mode: SearchMode, limit: int, fusion: Fusion | None) -> int:
    """The candidates each branch of a search of ``limit`` rows ranks: in ``hybrid`` mode
    what it gives to the fusion (:func:`fusion_depth`), else ``limit`` or
    ``fusion.depth`` when that is larger."""
    if mode == "hybrid":
        return fusion_depth(limit, fusion)
    return max(limit, fusion.depth or 0) if fusion is not None else limit


def fusion_depth(limit: int, fusion: Fusion | None) -> int:
    """The candidates each branch of a hybrid search gives to the fusion, for ``limit``
    rows: ``fusion.depth`` when set, else :data:`MIN_FUSION_DEPTH`, and never fewer than
    ``limit``."""
    wanted = fusion.depth if fusion is not None and fusion.depth else MIN_FUSION_DEPTH
    return max(limit, wanted)

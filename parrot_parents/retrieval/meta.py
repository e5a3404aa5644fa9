"""``RetrievalMeta``: what one query did, typed; ``to_dict()`` is the JSON the CLI and the
service emit (``meta`` of ``ask --json`` and ``/context``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from parrot_parents.retrieval.passages import Hit

__all__ = ["ChildScore", "Fallback", "RetrievalMeta", "describe_error"]


def describe_error(exc: BaseException) -> str:
    """``"Type: first line"`` of an error, without SQL text (a database error gives only
    its class and the driver's class: statements and parameters stay in the logs)."""
    orig = getattr(exc, "orig", None)
    if orig is not None and type(exc).__module__.startswith("sqlalchemy"):
        return f"{type(exc).__name__} ({type(orig).__name__})"
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first[:300]}"


@dataclass(frozen=True)
class Fallback:
    """An optional stage that failed and what the pipeline did instead.

    Attributes:
        stage: ``lexical``, ``context``, ``rerank``, ``parent_fetch`` or ``scope``.
        error: the error's type and first line (never SQL).
        action: what was handed over instead.
        parent_ids: the parents concerned, when known.
    """

    stage: str
    error: str
    action: str
    parent_ids: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ChildScore:
    """One kept child: the fields of its :class:`Hit` (scores, ranks, offsets in
    characters, the indexed row it came through) that ``meta["children"]`` reports."""

    id: str
    score: float | None
    rerank_score: float | None
    rank: int
    # The fields in the order of the JSON form (:meth:`to_dict`).
    dense_rank: int | None = None
    dense_score: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    parent_id: str | None = None
    # Where the hit lies in its source (characters): the inspector highlights it.
    document_id: str | None = None
    start_index: int | None = None
    end_index: int | None = None
    # The indexed row (ingestion strategy) that matched, when the hit came through one.
    via: str | None = None
    via_kind: str | None = None

    @classmethod
    def from_hit(cls, hit: Hit) -> ChildScore:
        return cls(**{f.name: getattr(hit, f.name) for f in fields(cls)})

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.via is None:
            del out["via"], out["via_kind"]
        return out


@dataclass(kw_only=True)
class RetrievalMeta(Mapping[str, Any]):
    """What one query did.

    Attributes:
        question: the question as asked.
        expand_to_parent, limit, mode, search_mode: the resolved options (mode as its
            canonical string).
        expanded: at least one hit was widened.
        candidates: children returned by the search (before rerank and top-K).
        reranked: True/False when a reranker ran or failed; None without a reranker.
        children: the kept children, best first.
        notes: options that were given but had no effect, and children a similarity
            threshold left out (``Retriever.min_similarity``).
        parents, folded, missing_parents, auto_merge, windows: what expansion did
            (see :class:`~parrot_parents.retrieval.expanders.Expansion`); None when the
            mode does not report it.
        prf: pseudo-relevance feedback, when it ran: ``{"terms": [...]}``, the lexemes
            (stemmed, as the text-search configuration writes them) it added to the
            lexical query, heaviest first; None when it did not run.
        lexical: what ranked the lexical branch, for a lexical or hybrid search on a store
            that says so: ``{"backend": "pg_textsearch"}`` (pg_textsearch's index) or
            ``{"backend": "sql"}`` (BM25 in SQL), with ``"why"`` when it is not the
            collection's own backend
            (:mod:`parrot_parents.stores.postgres.search.bm25_index`), and, from BM25 in
            SQL, ``"candidates"``: ``"exact"`` (every child holding a query lexeme was
            scored: a collection of at most 5,000 children, a selective metadata filter,
            or query lexemes rare enough) or ``"bounded"`` (the children holding the
            query's rarest lexemes or two of the next rarest, at most 4,000:
            :class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`); None
            otherwise.
        filter_plan: how a search with a metadata filter ranked, on a store that plans
            it: ``{"estimate": children the planner expected the filter to keep,
            "search": "exact" | "index" | "index, then exact" | "exact, then index" |
            "exact, then index, then exact" (each search the store ran, in order),
            "exact_below": the threshold, "children": the planner's estimate of the
            collection's children, which the threshold grows with, "sampled": whether the
            estimate was counted on a sample of the table}``
            (:mod:`parrot_parents.stores.postgres.search.filter_plan`); also when the
            filter kept nothing; None without a filter or such a store.
        scope: the bot's scope, when it has one: ``{"filter": the scope, "withheld": ids
            of the rows expansion read and held back as outside it (parents, window or
            merge children), "partial_parents": ids of parents inside it held back because
            a child of theirs lies outside it (their text holds that child's)}``
            (:mod:`parrot_parents.retrieval.scope`); None without.
        packing: what the budget packer did (``budget``, ``used``, ``substituted``,
            ``truncated``, ``cut``); None without a budget.
        fallbacks: optional stages that failed, in order.
        passages: passages handed over; context_chars: their characters.
        timings_ms: wall time per stage (``search``, ``rerank``, ``expand``, ``pack``,
            ``total``) in milliseconds; ``model_load`` too when this call waited for the
            embedding model to load (included in the stage that needed it: ``search``,
            or ``pack`` for trimming).

    It also reads like the dict of :meth:`to_dict` (``meta["expanded"]``), as the
    ``meta`` of ``get_vector_context`` always has.
    """

    # The fields in the order of the JSON form (:meth:`to_dict`).
    question: str
    expand_to_parent: bool
    expanded: bool = False
    limit: int
    mode: str
    search_mode: str = "dense"
    fallbacks: list[Fallback] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    candidates: int = 0
    children: list[ChildScore] = field(default_factory=list)
    passages: int = 0
    context_chars: int = 0
    notes: list[str] = field(default_factory=list)
    reranked: bool | None = None
    parents: list[str] | None = None
    folded: dict[str, list[str]] | None = None
    missing_parents: list[str] | None = None
    auto_merge: dict[str, dict[str, Any]] | None = None
    windows: dict[str, list[str]] | None = None
    packing: dict[str, Any] | None = None
    prf: dict[str, Any] | None = None
    lexical: dict[str, str] | None = None
    filter_plan: dict[str, Any] | None = None
    scope: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: keys that do not apply to this query (None, or no notes) are left
        out."""
        out = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}
        out.update(
            fallbacks=[f.to_dict() for f in self.fallbacks],
            timings_ms=dict(self.timings_ms),
            children=[c.to_dict() for c in self.children],
            notes=list(self.notes),
        )
        if not self.notes:
            del out["notes"]
        return out

    # Read access like the dict it replaces (``Mapping`` adds ``get``, ``in``, ``keys``...).
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

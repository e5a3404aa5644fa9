"""Result type of :meth:`PgVectorStore.similarity_search`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.documents import Document

from parrot_parents.stores.postgres.search.filter_plan import FilterPlan
from parrot_parents.stores.records.markers import RowKind, int_marker, row_kind
from parrot_parents.stores.records.sentences import SENTENCES, SentenceVectors

__all__ = ["DocumentRow", "SearchResult", "SearchResults"]


@dataclass(frozen=True)
class SearchResult:
    """One row returned by a similarity search.

    Attributes:
        id: row id.
        content: the row's text.
        metadata: the row's ``cmetadata``.
        score: cosine similarity in [-1, 1], higher is better (``1 - distance``).
        distance: pgvector cosine distance in [0, 2], lower is better; ``None`` for a row
            without an embedding, or when no query vector was used (lexical search).
        dense_rank, lexical_rank: 1-based rank in the dense and the lexical (BM25) branch;
            None when the row was not in that branch's candidates.
        lexical_score: the BM25 score, when the lexical branch ran and found the row.
        fused_score: in ``hybrid`` mode, the weighted reciprocal-rank-fusion value the rows
            are ordered by (higher is better;
            :mod:`parrot_parents.stores.postgres.search.hybrid`); None in the other modes,
            and from a store whose engine fuses without reporting ranks (Milvus, whose
            ``score`` is then the fused value).
        lexical_expansion: the lexemes pseudo-relevance feedback added to the query of the
            search that found the row, heaviest first (the same on every row of one search);
            None when it did not run (:class:`~parrot_parents.stores.search_options.PRF`).
        lexical_bounded: whether the lexical branch of the search that found the row
            scored a bounded set of candidates rather than every child holding a query
            lexeme (:class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`;
            the same on every row of one search); None when no lexical branch in SQL ran.
        filter_plan: how the search that found the row planned its metadata filter
            (:class:`~parrot_parents.stores.postgres.search.filter_plan.FilterPlan`; the
            same on every row of one search); None without a filter, and from a store that
            does not plan (Milvus).
        via, via_kind: when the row was reached through an indexed row (an ingestion
            strategy's text), that row's id and kind (``context``, ``question``...);
            None otherwise. Scores and ranks are then those of the indexed row.
        stored_sentences: the row's stored sentences and their vectors, as stored
            (:mod:`parrot_parents.stores.records.sentences`), taken out of the metadata,
            which keeps only what a caller reads; decoded only when asked for
            (:attr:`sentences`).
    """

    id: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    distance: float | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    fused_score: float | None = None
    lexical_expansion: tuple[str, ...] | None = None
    lexical_bounded: bool | None = None
    filter_plan: FilterPlan | None = field(default=None, compare=False)
    via: str | None = None
    via_kind: str | None = None
    stored_sentences: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if SENTENCES in self.metadata:
            metadata = dict(self.metadata)
            stored = metadata.pop(SENTENCES)
            object.__setattr__(self, "metadata", metadata)
            if self.stored_sentences is None:
                object.__setattr__(self, "stored_sentences", stored)

    @property
    def sentences(self) -> SentenceVectors | None:
        """The row's sentences and their vectors, decoded (None when it has none)."""
        return SentenceVectors.decode(self.stored_sentences)

    @property
    def dense_score(self) -> float | None:
        """Cosine similarity from the dense branch (``1 - distance``); None without a
        query vector, and in ``hybrid`` mode for a row the dense branch did not rank."""
        if self.distance is None or (self.fused_score is not None and self.dense_rank is None):
            return None
        return 1.0 - self.distance

    @property
    def page_content(self) -> str:
        """Alias of :attr:`content`, as on LangChain's ``Document``."""
        return self.content

    def to_document(self) -> Document:
        """The row as a LangChain ``Document`` (score and distance are not copied)."""
        return Document(id=self.id, page_content=self.content, metadata=dict(self.metadata))


class SearchResults(list[SearchResult]):
    """The rows of one search, best first (a ``list`` of :class:`SearchResult`), and how
    the search planned its metadata filter.

    Attributes:
        filter_plan: as on each row (:attr:`SearchResult.filter_plan`), and here also when
            no row matched: a filter that keeps nothing is when the plan explains most.
    """

    def __init__(
        self, rows: Iterable[SearchResult] = (), filter_plan: FilterPlan | None = None
    ) -> None:
        super().__init__(rows)
        self.filter_plan = filter_plan


@dataclass(frozen=True)
class DocumentRow:
    """One stored row of a document, without its text (the inspector's document view).

    Attributes:
        id: row id.
        kind: ``"parent"`` (whole document), ``"parent_chunk"`` or ``"child"``.
        start_index, end_index: character offsets into the source (None when absent).
        parent_document_id: a child's parent row id (None for parents).
        chunk_index: position among its siblings (None when absent).
        length: characters of the row's text.
    """

    id: str
    kind: RowKind
    start_index: int | None
    end_index: int | None
    parent_document_id: str | None
    chunk_index: int | None
    length: int

    @classmethod
    def from_row(cls, row_id: str, metadata: dict[str, Any], length: int) -> DocumentRow:
        parent = metadata.get("parent_document_id")
        return cls(
            id=row_id,
            kind=row_kind(metadata),
            start_index=int_marker(metadata, "start_index"),
            end_index=int_marker(metadata, "end_index"),
            parent_document_id=None if parent in (None, "") else str(parent),
            chunk_index=int_marker(metadata, "chunk_index"),
            length=length,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

"""Value types flowing through the query pipeline (hits, passages) and their one formatter.

:func:`format_context` is the one writer of the context string (``headers`` for
``get_vector_context`` and ``/context``, ``tags`` for the prompt of ``ask``); its escaping
keeps a document from ending its own passage.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.documents import Document

from parrot_parents.retrieval.sections import Section
from parrot_parents.stores.records.markers import (
    DOCUMENT_ID,
    END_INDEX,
    PARENT_DOCUMENT_ID,
    SOURCE,
    START_INDEX,
    row_kind,
)
from parrot_parents.stores.records.sentences import SentenceVectors
from parrot_parents.stores.results import SearchResult

__all__ = [
    "ContextStyle",
    "Hit",
    "Passage",
    "PassageKind",
    "branch_scores",
    "format_context",
    "passage_header",
]

PassageKind = Literal["child", "parent", "parent_chunk", "window", "merged"]


@dataclass(frozen=True)
class Hit:
    """A child returned by the search (and possibly reordered by a reranker).

    Attributes:
        id, text, metadata: the child row.
        score: the search score that ordered the hits, higher is better: the fused
            (weighted RRF) value in ``hybrid`` mode, the cosine similarity in [-1, 1] in
            ``dense`` mode, None in ``lexical`` mode (see ``lexical_score``).
        rank: 0-based rank after search and rerank.
        rerank_score: raw reranker score when a reranker ran, else None.
        dense_rank, lexical_rank: 1-based rank in the dense and lexical search branches
            (None when the hit was not in that branch).
        dense_score: cosine similarity from the dense branch (None when absent from it).
        lexical_score: BM25 score from the lexical branch (None when absent from it).
        via, via_kind: the indexed row (an ingestion strategy's text) through which the
            search reached this row, and its kind; None for a direct hit.
        stored_sentences: the child's sentences and their vectors as stored at ingest with
            late chunking (:mod:`parrot_parents.stores.records.sentences`), for the packer's
            sentence trimming (not in ``metadata``), decoded on first use
            (:attr:`sentences`). None when the row has none.
    """

    id: str
    text: str
    metadata: dict[str, Any]
    score: float | None
    rank: int
    rerank_score: float | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    via: str | None = None
    via_kind: str | None = None
    dense_score: float | None = None
    lexical_score: float | None = None
    stored_sentences: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_result(cls, result: SearchResult, rank: int) -> Hit:
        # In hybrid mode the rows come in fused order: their fused value is the score.
        score = result.fused_score if result.fused_score is not None else result.score
        return cls(
            result.id,
            result.content,
            dict(result.metadata),
            score,
            rank,
            dense_rank=result.dense_rank,
            lexical_rank=result.lexical_rank,
            via=result.via,
            via_kind=result.via_kind,
            dense_score=result.dense_score,
            lexical_score=result.lexical_score,
            stored_sentences=result.stored_sentences,
        )

    @functools.cached_property
    def sentences(self) -> SentenceVectors | None:
        """The child's sentences and their vectors (decoded once); None without them."""
        return SentenceVectors.decode(self.stored_sentences)

    def to_document(self) -> Document:
        """The child as a LangChain ``Document`` (what a reranker scores)."""
        return Document(id=self.id, page_content=self.text, metadata=dict(self.metadata))

    @property
    def parent_id(self) -> str | None:
        value = self.metadata.get(PARENT_DOCUMENT_ID)
        return None if value in (None, "") else str(value)

    @property
    def document_id(self) -> str | None:
        value = self.metadata.get(DOCUMENT_ID)
        return None if value is None else str(value)

    @property
    def start_index(self) -> int | None:
        value = self.metadata.get(START_INDEX)
        return value if isinstance(value, int) else None

    @property
    def end_index(self) -> int | None:
        value = self.metadata.get(END_INDEX)
        return value if isinstance(value, int) else None


@dataclass
class Passage:
    """One unit of context handed to the LLM.

    Attributes:
        id: row id (child or parent), or a synthetic id for windows and merged spans.
        text: the passage text.
        kind: ``child``, ``parent`` (whole document), ``parent_chunk``, ``window``
            (neighbouring children around a hit) or ``merged`` (touching spans joined).
        score: the best hit's search score (:attr:`Hit.score`).
        rank: 0-based position in the context.
        document_id: source document; start_index/end_index: character offsets into it.
        source: a human-readable origin (file path) when known.
        child_ids: the hits this passage stands for.
        metadata: the row's metadata (for parents and children).
        section: where the passage lies in its document (:class:`Section`, read through
            :attr:`section_path`, :attr:`section_ordinal`, :attr:`ordinal`, :attr:`layer`,
            :attr:`page` and :attr:`page_end`).
        dense_rank, dense_score, lexical_rank, lexical_score: the best hit's (:class:`Hit`).
    """

    id: str
    text: str
    kind: PassageKind
    score: float | None
    rank: int
    document_id: str | None = None
    start_index: int | None = None
    end_index: int | None = None
    source: str | None = None
    child_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    section: Section = field(default_factory=Section)
    dense_rank: int | None = None
    dense_score: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None

    @property
    def section_path(self) -> list[str]:
        """Heading titles from the document's root to the passage's section."""
        return list(self.section.path)

    @property
    def section_ordinal(self) -> int | None:
        """The number in the section's heading ("4. Pay and Payroll" → 4)."""
        return self.section.section_ordinal

    @property
    def ordinal(self) -> int | None:
        """Position of the section in its document (1-based; 0 before any heading)."""
        return self.section.ordinal

    @property
    def layer(self) -> str | None:
        """``section``, ``table_row``, ``table`` or ``document``; None when unrecorded."""
        return self.section.layer

    @property
    def page(self) -> int | None:
        """First page of the passage (1-based), for paged sources (PDF)."""
        return self.section.page

    @property
    def page_end(self) -> int | None:
        """Last page of the passage (1-based), for paged sources (PDF)."""
        return self.section.page_end

    @classmethod
    def from_hit(cls, hit: Hit) -> Passage:
        kind = row_kind(hit.metadata)
        return cls(
            id=hit.id,
            text=hit.text,
            # A hit is a child, unless an indexed row (a summary) resolved to a parent.
            kind="child" if kind == "indexed" else kind,
            score=hit.score,
            rank=hit.rank,
            document_id=hit.document_id,
            start_index=hit.start_index,
            end_index=hit.end_index,
            source=_source(hit.metadata),
            child_ids=[hit.id],
            metadata=dict(hit.metadata),
            section=Section.from_metadata(hit.metadata),
            **branch_scores(hit),
        )

    @classmethod
    def from_parent(
        cls, parent_id: str, text: str, metadata: dict[str, Any], hits: list[Hit]
    ) -> Passage:
        best = hits[0]
        start, end = metadata.get(START_INDEX), metadata.get(END_INDEX)
        kind = row_kind(metadata)
        return cls(
            id=parent_id,
            text=text,
            # Read as a parent: a child or indexed row standing in for one is still a parent.
            kind="parent" if kind == "child" or kind == "indexed" else kind,
            score=best.score,
            rank=best.rank,
            document_id=str(metadata.get(DOCUMENT_ID) or best.document_id or "") or None,
            start_index=start if isinstance(start, int) else None,
            end_index=end if isinstance(end, int) else None,
            source=_source(metadata) or _source(best.metadata),
            child_ids=[h.id for h in hits],
            metadata=dict(metadata),
            # The parent's own section (where it starts), pages covering its hits too.
            section=Section.from_metadata(metadata).spanning(
                Section.from_metadata(h.metadata) for h in hits
            ),
            **branch_scores(best),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form used by the CLI and the HTTP service.

        Keys: ``id``, ``text``, ``source``, ``document_id``, ``start_index``/``end_index``,
        ``score``, ``dense_rank``, ``dense_score``, ``lexical_rank``, ``lexical_score``,
        ``kind``, ``child_ids``, then the section (:meth:`Section.to_dict`:
        ``section_path``, ``section_ordinal``, ``ordinal``, ``layer``, ``page``,
        ``page_end``); a value that does not apply is None.
        """
        return {
            "id": self.id,
            "text": self.text,
            "source": self.source or self.document_id,
            "document_id": self.document_id,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "score": self.score,
            **branch_scores(self),
            "kind": self.kind,
            "child_ids": list(self.child_ids),
            **self.section.to_dict(),
        }


def branch_scores(item: Hit | Passage) -> dict[str, Any]:
    """``dense_rank``, ``dense_score``, ``lexical_rank`` and ``lexical_score`` of a hit or
    a passage, as :class:`Passage` keyword arguments (what a passage built from it keeps)."""
    return {
        "dense_rank": item.dense_rank,
        "dense_score": item.dense_score,
        "lexical_rank": item.lexical_rank,
        "lexical_score": item.lexical_score,
    }


def _source(metadata: dict[str, Any]) -> str | None:
    value = metadata.get(SOURCE) or metadata.get(DOCUMENT_ID)
    return None if value is None else str(value)


ContextStyle = Literal["headers", "tags"]

# A line of passage text that could pass for a separator or a passage header.
_FORGED_LINE = re.compile(r"^(?=\s*(?:-{3,}\s*$|\[\d+\]\s))", re.MULTILINE)


def _escape_lines(text: str) -> str:
    # Most passages hold neither: skip the line-by-line scan (a hot path).
    if "---" not in text and "[" not in text:
        return text
    return _FORGED_LINE.sub(lambda _: "\\", text)


def _attr(value: object) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def passage_header(index: int, passage: Passage) -> str:
    """``[1] handbook.md, characters 120-4120 (parent_chunk)``: where a passage came from."""
    where = passage.source or passage.document_id or passage.id
    span = ""
    if passage.start_index is not None and passage.end_index is not None:
        span = f", characters {passage.start_index}-{passage.end_index}"
    return f"[{index}] {where}{span} ({passage.kind})"


def _tagged(index: int, passage: Passage, citations: bool) -> str:
    attrs = [
        f'n="{index}"',
        f'source="{_attr(passage.source or passage.document_id or passage.id)}"',
    ]
    if passage.start_index is not None and passage.end_index is not None:
        attrs.append(f'chars="{passage.start_index}-{passage.end_index}"')
    attrs.append(f'kind="{_attr(passage.kind)}"')
    if citations and (cite := passage.section.citation()) is not None:
        attrs.append(f'cite="{_attr(cite)}"')
    text = passage.text.replace("</passage", "<\\/passage")
    return f"<passage {' '.join(attrs)}>\n{text}\n</passage>"


def _headed(index: int, passage: Passage, citations: bool) -> str:
    header = passage_header(index, passage)
    if citations and (cite := passage.section.citation()) is not None:
        # One line: a heading cannot hold a newline, but a title read from metadata might.
        header += "\nSection: " + " ".join(cite.split())
    return f"{header}\n{_escape_lines(passage.text)}"


def format_context(
    passages: Sequence[Passage], style: ContextStyle = "headers", *, citations: bool = False
) -> str:
    """The context string of ``passages``, numbered from 1 in order.

    Styles:

    * ``headers`` (default): each passage under :func:`passage_header`, separated by a
      blank line, ``---`` and a blank line. A line of passage text that looks like a
      separator or a header (``---``, ``[2] ...``) is prefixed with a backslash.
    * ``tags``: each passage between ``<passage n=".." source=".." chars=".." kind="..">``
      and ``</passage>``; ``</passage`` inside the text is written ``<\\/passage``.

    ``citations`` (default False): also name each passage's section and pages
    (:meth:`Section.citation`), on a ``Section: Employee Handbook › 4. Pay and Payroll``
    line under the header, or as a ``cite=".."`` attribute; a passage with neither gets
    none. Off, the string is exactly what it was without the option.

    Only the context string is escaped; ``Passage.text`` stays the exact source span.
    """
    if style == "tags":
        return "\n\n".join(_tagged(i, p, citations) for i, p in enumerate(passages, 1))
    return "\n\n---\n\n".join(_headed(i, p, citations) for i, p in enumerate(passages, 1))

"""``StrategyIndexer``: the indexed rows of a model-backed or extractive strategy.

It is the :class:`~parrot_parents.loaders.indexing.RowIndexer` a loader calls before
writing each batch of documents. Per strategy:

``contextual`` (model)
    one row per child: the model's note on where the child sits, a blank line, the child.
``contextual:extractive``
    one row per child: the document's title (else its file name) and the path of headings
    above the child (the structure tree's ``section_path`` when the child carries one),
    a blank line, the child. No model.
``hypothetical-questions:N`` / ``propositions:N``
    up to ``N`` rows per child, one question or fact each.
``summary``
    one row per parent of a document (the whole document, or each of its parent_chunks),
    all holding the document's summary; a hit on one returns that parent.

An enriched child (every child of an enriched document, for ``summary``) is marked
``searchable: false``: it is indexed only through its rows, and returned when they hit.
A chunk whose call failed keeps no row and stays indexed as itself. ``enriched`` counts
the chunks (documents, for ``summary``) that got rows, of ``of``; the indexed rows are
marked ``offsets_exact: false``, the rows they resolve to keep their exact offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.chunk_info import ChunkInfo
from parrot_parents.loaders.hierarchy import DocumentHierarchy
from parrot_parents.stores.markers import (
    DOCUMENT_ID,
    DOCUMENT_TYPE,
    INDEXED,
    INDEXES,
    IS_CHUNK,
    OFFSETS_EXACT,
    SEARCHABLE,
)
from parrot_parents.stores.resolve import INDEXED_KIND
from parrot_parents.strategies import prompts
from parrot_parents.strategies.guarded import GuardedModel
from parrot_parents.strategies.headings import HeadingIndex
from parrot_parents.strategies.spec import StrategySpec

__all__ = ["INGESTION_KEY", "StrategyIndexer"]

#: Key of the per-document ingestion record on parent rows.
INGESTION_KEY = "ingestion"

# Hierarchy keys an indexed row must not carry: it is no span, no sibling, no neighbour.
_NOT_COPIED = frozenset(
    {
        "is_chunk",
        "is_full_document",
        "document_type",
        "parent_document_id",
        "chunk_index",
        "start_index",
        "end_index",
        "content_sha256",
        SEARCHABLE,
        INGESTION_KEY,
        # Its own text already carries the heading path: a preamble would count it twice.
        "retrieval_preamble",
    }
)
# The structure keys (``layer``, ``section_path``, ``ordinal``, ``section_ordinal``) are
# copied, so that a filter on structure finds a child through its indexed rows.
_TAGS = {"context": "ctx", "question": "q", "proposition": "f", "summary": "sum"}
_KINDS = {
    "contextual": "context",
    "hypothetical-questions": "question",
    "propositions": "proposition",
    "summary": "summary",
}


class StrategyIndexer:
    """Indexed rows for one strategy (see the module docstring).

    Args:
        spec: a strategy that indexes rows (not one of the four free ones).
        model: the guarded model; required unless the strategy is extractive.

    Raises:
        ConfigurationError: a free strategy, or a model-backed one without a model.
    """

    def __init__(self, spec: StrategySpec, model: GuardedModel | None = None) -> None:
        if not spec.indexes_rows:
            raise ConfigurationError(
                f"strategy {str(spec)!r} stores no indexed rows: it is a query-time mode",
                hint="give its retrieval options instead (StrategySpec.retrieval_overrides)",
            )
        if spec.needs_model and model is None:
            raise ConfigurationError(
                f"strategy {str(spec)!r} needs a model",
                hint="set PARROT_PARENTS_LLM_BASE_URL and PARROT_PARENTS_LLM_MODEL "
                "(docs/strategies.md), or use contextual:extractive",
            )
        self.spec = spec
        self.model = model
        self.enriched = 0
        self.of = 0
        self.rows = 0
        self.searchable_children = 0
        self.retrievable = 0

    # -- the hook ------------------------------------------------------------------------

    async def index_rows(
        self, hierarchies: Sequence[DocumentHierarchy]
    ) -> dict[str, list[Document]]:
        """``{document_id: indexed rows}`` of a batch; children are marked in place."""
        results = await asyncio.gather(*(self._document(h) for h in hierarchies))
        return {h.document_id: rows for h, rows in zip(hierarchies, results, strict=True)}

    async def _document(self, h: DocumentHierarchy) -> list[Document]:
        if self.spec.name == "summary":
            enriched, rows = await self._summary(h)
            of = 1
        else:
            headings = HeadingIndex(h.text) if self.spec.context == "extractive" else None
            per_child = await asyncio.gather(*(self._child(h, c, headings) for c in h.children))
            rows = [row for found in per_child for row in found]
            enriched, of = sum(1 for found in per_child if found), len(per_child)
        self.enriched += enriched
        self.of += of
        self.rows += len(rows)
        self.searchable_children += sum(
            1 for c in h.children if c.metadata.get(SEARCHABLE) is not False
        )
        self.retrievable += len({str(r.metadata[INDEXES]) for r in rows})
        record = {
            "strategy": str(self.spec),
            "enriched": enriched,
            "of": of,
            "indexed_rows": len(rows),
            "model": None if self.model is None else self.model.model,
        }
        for parent in h.parents:
            parent.metadata[INGESTION_KEY] = record
        return rows

    async def _child(
        self, h: DocumentHierarchy, child: ChunkInfo, headings: HeadingIndex | None
    ) -> list[Document]:
        texts = await self._texts(h, child, headings)
        if not texts:
            return []
        child.metadata[SEARCHABLE] = False
        kind = _KINDS[self.spec.name]
        return [
            _row(child.chunk_id, child.metadata, text, kind, i, self.spec)
            for i, text in enumerate(texts)
        ]

    async def _texts(
        self, h: DocumentHierarchy, child: ChunkInfo, headings: HeadingIndex | None
    ) -> list[str]:
        spec = self.spec
        if headings is not None:
            return [_extractive(h, child, headings)]
        assert self.model is not None and spec.max_document_chars is not None
        if spec.name == "contextual":
            window = prompts.document_window(
                h.text, child.start_index, child.end_index, spec.max_document_chars
            )
            note = await self.model.ask(
                prompts.contextual_messages(window, child.text), prompts.parse_text
            )
            return [] if note is None else [f"{note}\n\n{child.text}"]
        count = spec.count or 1
        if spec.name == "hypothetical-questions":
            messages = prompts.questions_messages(child.text, count)
        else:
            messages = prompts.propositions_messages(child.text, count)
        items = await self.model.ask(messages, lambda r: prompts.parse_list(r, count))
        return items or []

    async def _summary(self, h: DocumentHierarchy) -> tuple[int, list[Document]]:
        assert self.model is not None and self.spec.max_document_chars is not None
        document = prompts.document_window(h.text, 0, 0, self.spec.max_document_chars)
        summary = await self.model.ask(prompts.summary_messages(document), prompts.parse_text)
        if summary is None or not h.parents:
            return 0, []
        for child in h.children:
            child.metadata[SEARCHABLE] = False
        return 1, [_row(str(p.id), p.metadata, summary, "summary", 0, self.spec) for p in h.parents]

    async def close(self) -> None:
        """Release the model (its cache file, and a client it owns). Safe to call twice."""
        if self.model is not None:
            await self.model.close()

    # -- what it did ---------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """``strategy``, ``enriched`` of ``of`` (``partial`` when fewer), ``indexed_rows``,
        ``expansion`` (searched units per retrievable unit) and, with a model, its
        ``model``, ``calls``, ``cache_hits``, ``tokens`` and ``failures`` by kind."""
        reachable = self.searchable_children + self.retrievable
        searched = self.searchable_children + self.rows
        out: dict[str, Any] = {
            "strategy": str(self.spec),
            "enriched": self.enriched,
            "of": self.of,
            "partial": self.enriched < self.of,
            "indexed_rows": self.rows,
            "expansion": round(searched / reachable, 4) if reachable else 0.0,
        }
        if self.model is not None:
            out["model"] = self.model.model
            out.update(self.model.stats.to_dict())
        else:
            out.update(calls=0, cache_hits=0, tokens={"prompt": 0, "completion": 0}, failures={})
        return out


def _row(
    target: str,
    metadata: dict[str, Any],
    text: str,
    kind: str,
    index: int,
    spec: StrategySpec,
) -> Document:
    meta = {k: v for k, v in metadata.items() if k not in _NOT_COPIED}
    meta.update(
        {
            DOCUMENT_ID: metadata[DOCUMENT_ID],
            DOCUMENT_TYPE: INDEXED,
            IS_CHUNK: False,
            INDEXES: target,
            INDEXED_KIND: kind,
            OFFSETS_EXACT: False,
            "strategy": str(spec),
        }
    )
    return Document(id=f"{target}~{_TAGS[kind]}{index}", page_content=text, metadata=meta)


def _extractive(h: DocumentHierarchy, child: ChunkInfo, headings: HeadingIndex) -> str:
    """Title (or file name) and heading path, a blank line, the child's text."""
    meta = child.metadata
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        source = meta.get("source")
        title = PurePath(source).name if isinstance(source, str) and source else h.document_id
    given = meta.get("section_path")
    if isinstance(given, list) and all(isinstance(s, str) for s in given):
        path = [s for s in given if s]
    elif isinstance(given, str) and given:
        path = [given]
    else:
        path = headings.path(child.start_index)
    lines = [f"Document: {title}"]
    if path:
        lines.append(f"Section: {' > '.join(path)}")
    return "\n".join(lines) + "\n\n" + child.text

"""``StrategyIndexer``: the indexed rows of a model-backed or extractive strategy.

It is the :class:`~parrot_parents.loaders.indexing.RowIndexer` a loader calls before
writing each batch of documents. What each strategy indexes: docs/strategies.md
("Indexed rows"); a ``table_row`` child's rows also name its table's caption and headers
(:func:`~parrot_parents.loaders.indexing.table_lines`). Markers, counts and the
failed-call rule: :class:`~parrot_parents.loaders.indexing.ChunkIndexer`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.chunk_info import ChunkInfo
from parrot_parents.loaders.extractive import extractive_text
from parrot_parents.loaders.headings import HeadingIndex
from parrot_parents.loaders.hierarchy import DocumentHierarchy
from parrot_parents.loaders.indexing import ChunkIndexer, IndexedKind, with_table
from parrot_parents.stores.records.markers import SEARCHABLE
from parrot_parents.strategies import prompts
from parrot_parents.strategies.guarded import GuardedModel
from parrot_parents.strategies.spec import StrategySpec

__all__ = ["StrategyIndexer"]

_KINDS: dict[str, IndexedKind] = {
    "contextual": "context",
    "hypothetical-questions": "question",
    "propositions": "proposition",
    "summary": "summary",
}


class StrategyIndexer(ChunkIndexer):
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
        super().__init__(str(spec), _KINDS[spec.name], None if model is None else model.model)
        self.spec = spec
        self.model = model

    async def document_rows(self, h: DocumentHierarchy) -> tuple[int, int, list[Document]]:
        if self.spec.name == "summary":
            return await self._summary(h)
        headings = HeadingIndex(h.text) if self.spec.context == "extractive" else None
        texts = await asyncio.gather(*(self._texts(h, c, headings) for c in h.children))
        rows = [
            row for c, own in zip(h.children, texts, strict=True) for row in self.child_rows(c, own)
        ]
        return sum(1 for own in texts if own), len(texts), rows

    async def _texts(
        self, h: DocumentHierarchy, child: ChunkInfo, headings: HeadingIndex | None
    ) -> list[str]:
        spec = self.spec
        if headings is not None:
            return [extractive_text(h, child, headings)]
        assert self.model is not None and spec.max_document_chars is not None
        if spec.name == "contextual":
            window = prompts.document_window(
                h.text, child.start_index, child.end_index, spec.max_document_chars
            )
            note = await self.model.ask(
                prompts.contextual_messages(window, child.text), prompts.parse_text
            )
            return [] if note is None else [f"{note}\n\n{with_table(child, child.text)}"]
        count = spec.count or 1
        if spec.name == "hypothetical-questions":
            messages = prompts.questions_messages(child.text, count)
        else:
            messages = prompts.propositions_messages(child.text, count)
        items = await self.model.ask(messages, lambda r: prompts.parse_list(r, count))
        return [with_table(child, item) for item in items or []]

    async def _summary(self, h: DocumentHierarchy) -> tuple[int, int, list[Document]]:
        assert self.model is not None and self.spec.max_document_chars is not None
        document = prompts.document_window(h.text, 0, 0, self.spec.max_document_chars)
        summary = await self.model.ask(prompts.summary_messages(document), prompts.parse_text)
        if summary is None or not h.parents:
            return 0, 1, []
        for child in h.children:
            child.metadata[SEARCHABLE] = False
        return 1, 1, [self.row(str(p.id), p.metadata, summary, 0) for p in h.parents]

    async def close(self) -> None:
        """Release the model (its cache file, and a client it owns). Safe to call twice."""
        if self.model is not None:
            await self.model.close()

    def usage(self) -> dict[str, Any]:
        """With a model: its name, ``calls``, ``cache_hits``, ``tokens`` and ``failures``."""
        if self.model is None:
            return super().usage()
        return {"model": self.model.model, **self.model.stats.to_dict()}

"""Optional abstractive summaries of a structured document, through the LLM client.

One overview call (at most ``max_document_chars`` characters of the document; if it fails,
the extractive overview stays), then section batches of ``batch_size`` sections, each
clipped to ``max_section_chars``; unknown ids are dropped, a repeated id keeps its first
summary, and a failed or malformed batch makes the result partial (``degraded``), never
raises. :func:`enrich_document` applies it to the stored ``document`` row (README,
"Document layer").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from parrot_parents.errors import ConfigurationError, LLMError
from parrot_parents.strict_json import InvalidJSON, loads_strict

__all__ = [
    "AbstractiveSummarizer",
    "AbstractiveSummary",
    "SectionInput",
    "enrich_document",
]


class _Completer(Protocol):
    async def complete(self, messages: Sequence[Mapping[str, str]]) -> Any: ...


@dataclass(frozen=True)
class SectionInput:
    """A section to summarise: its id (the ``ordinal``, as text), path and text."""

    id: str
    path: str
    text: str


@dataclass
class AbstractiveSummary:
    """What the model wrote, and how complete it is."""

    overview: str
    section_summaries: dict[str, str] = field(default_factory=dict)
    missing_section_ids: list[str] = field(default_factory=list)
    failed_batches: list[int] = field(default_factory=list)

    @property
    def degraded(self) -> bool:
        """True when a batch failed or a section got no summary."""
        return bool(self.failed_batches or self.missing_section_ids)

    def to_metadata(self) -> dict[str, Any]:
        """The ``abstractive_summary`` block with the partial-enrichment fields."""
        return {
            "overview": self.overview,
            "section_summaries": dict(self.section_summaries),
            "overview_present": bool(self.overview),
            "section_summary_count": len(self.section_summaries),
            "missing_section_ids": list(self.missing_section_ids),
            "failed_batches": list(self.failed_batches),
            "degraded_summary": self.degraded,
        }


_OVERVIEW = (
    "You summarise documents for a search index. In at most four sentences, say what the "
    "document is about and what it covers. Answer with the summary only."
)
_SECTIONS = (
    "You summarise sections of a document for a search index. For each section you are "
    'given, write one sentence. Answer with JSON only: {"sections": [{"id": "<the id '
    'given>", "summary": "<one sentence>"}]}.'
)


class AbstractiveSummarizer:
    """Calls the LLM as described in the module docstring.

    Args:
        client: anything with ``async complete(messages) -> answer with .text`` (the
            :class:`~parrot_parents.llm.client.ChatCompletionsClient` ``/ask`` uses).
        batch_size: sections per call, default 3.
        max_section_chars: each section's text is clipped to this many characters (2000).
        max_document_chars: the overview call reads at most this many characters (12000).

    Raises:
        ConfigurationError: a size below 1.
    """

    def __init__(
        self,
        client: _Completer,
        *,
        batch_size: int = 3,
        max_section_chars: int = 2000,
        max_document_chars: int = 12000,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("max_section_chars", max_section_chars),
            ("max_document_chars", max_document_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
        self.client = client
        self.batch_size = batch_size
        self.max_section_chars = max_section_chars
        self.max_document_chars = max_document_chars

    async def summarize(
        self, title: str, extractive: str, opening: str, sections: Sequence[SectionInput]
    ) -> AbstractiveSummary | None:
        """The abstractive summary, or None when the overview call fails."""
        prompt = f"Title: {title}\n\nOverview so far:\n{extractive}\n\nOpening:\n{opening}"
        try:
            answer = await self.client.complete(
                [
                    {"role": "system", "content": _OVERVIEW},
                    {"role": "user", "content": prompt[: self.max_document_chars]},
                ]
            )
        except LLMError:
            return None
        overview = " ".join(str(getattr(answer, "text", "") or "").split())
        if not overview:
            return None
        result = AbstractiveSummary(overview)
        valid = {s.id for s in sections}
        for number, start in enumerate(range(0, len(sections), self.batch_size)):
            batch = sections[start : start + self.batch_size]
            given = "\n\n".join(
                f'<section id="{s.id}" path="{s.path}">\n{s.text[: self.max_section_chars]}\n'
                "</section>"
                for s in batch
            )
            try:
                answer = await self.client.complete(
                    [{"role": "system", "content": _SECTIONS}, {"role": "user", "content": given}]
                )
                items = loads_strict(str(answer.text))["sections"]
                if not isinstance(items, list):
                    raise TypeError("sections is not a list")
            except (LLMError, InvalidJSON, KeyError, TypeError, json.JSONDecodeError):
                result.failed_batches.append(number)
                continue
            for item in items:
                if not isinstance(item, dict):
                    continue
                sid, text = str(item.get("id", "")), item.get("summary")
                # Only ids the model was given; a repeated id keeps its first summary.
                fresh = sid in valid and sid not in result.section_summaries
                if fresh and isinstance(text, str) and text.strip():
                    result.section_summaries[sid] = " ".join(text.split())
        result.missing_section_ids = sorted(
            valid - set(result.section_summaries), key=lambda x: (len(x), x)
        )
        return result


async def enrich_document(store: Any, summarizer: AbstractiveSummarizer, document_id: str) -> bool:
    """Summarise one stored document and rewrite its ``document`` row; False when there
    is no such row or the overview call failed (the extractive row then stays as it was).
    """
    from langchain_core.documents import Document

    from parrot_parents.loaders.structure.reading import structure_of
    from parrot_parents.loaders.structure.sections import segments
    from parrot_parents.loaders.structure.summary import is_back_matter

    engine, table = await store.ready()
    row_id = f"{document_id}#document"
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                table.select()
                .with_only_columns(table.c.document, table.c.cmetadata)
                .where(table.c.id == row_id)
            )
        ).first()
        record = (await conn.execute(store.documents.read(document_id))).first()
    if row is None or record is None:
        return False
    source = str(record.source_text)
    segs = segments(source, structure_of(source, "markdown").headings)
    sections = [
        SectionInput(str(s.ordinal), s.section_path, source[s.start : s.end])
        for s in segs
        if s.level and not is_back_matter(s)
    ]
    text = str(row.document)
    head, sep, guide = text.partition("\n\nSections:\n")
    title = head.split("\n\n", 1)[0]
    summary = await summarizer.summarize(title, head, source[:4000], sections)
    if summary is None:
        return False
    meta = dict(row.cmetadata)
    meta.setdefault("extractive_summary", head)
    meta["abstractive_summary"] = summary.to_metadata()
    new_text = f"{title}\n\n{summary.overview}" + (f"{sep}{guide}" if sep else "")
    await store.add_documents([Document(id=row_id, page_content=new_text, metadata=meta)])
    return True

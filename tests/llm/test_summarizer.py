"""Abstractive summaries with a scripted LLM (the client's interface, answers from a list)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parrot_parents.errors import ConfigurationError, LLMError
from parrot_parents.llm.client import ChatCompletion
from parrot_parents.llm.summarizer import AbstractiveSummarizer, SectionInput, enrich_document
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import REPO_ROOT


class ScriptedLLM:
    """Answers each call with the next scripted item; an exception item is raised."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.calls: list[list[dict[str, str]]] = []

    async def complete(self, messages: Any) -> ChatCompletion:
        self.calls.append([dict(m) for m in messages])
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return ChatCompletion(item, "scripted", "stop", {}, 1.0)


SECTIONS = [SectionInput(str(i), f"Doc > Part {i}", f"Text of part {i}.") for i in range(1, 6)]


def sections_answer(*pairs: tuple[str, str]) -> str:
    return json.dumps({"sections": [{"id": i, "summary": s} for i, s in pairs]})


async def test_run_overview_then_sections_in_batches_of_three() -> None:
    llm = ScriptedLLM(
        [
            "An overview.",
            sections_answer(("1", "One."), ("2", "Two."), ("3", "Three.")),
            sections_answer(("4", "Four."), ("5", "Five.")),
        ]
    )
    result = await AbstractiveSummarizer(llm).summarize("Doc", "extractive", "opening", SECTIONS)
    assert result is not None and result.overview == "An overview."
    assert result.section_summaries == {str(i): w for i, w in enumerate(
        ["One.", "Two.", "Three.", "Four.", "Five."], start=1)}  # fmt: skip
    assert not result.degraded and len(llm.calls) == 3
    assert 'id="3"' in llm.calls[1][1]["content"] and 'id="4"' not in llm.calls[1][1]["content"]


async def test_unknown_ids_are_dropped_and_duplicates_keep_the_first() -> None:
    llm = ScriptedLLM(
        [
            "Overview.",
            sections_answer(("1", "First."), ("1", "Again."), ("99", "Invented."), ("2", "Two.")),
            sections_answer(("4", "Four."), ("5", "Five.")),
        ]
    )
    result = await AbstractiveSummarizer(llm).summarize("Doc", "e", "o", SECTIONS)
    assert result is not None
    assert result.section_summaries == {"1": "First.", "2": "Two.", "4": "Four.", "5": "Five."}
    assert result.missing_section_ids == ["3"] and result.degraded
    meta = result.to_metadata()
    assert meta["section_summary_count"] == 4 and meta["degraded_summary"] is True


async def test_failed_batches_are_recorded_as_partial_enrichment() -> None:
    llm = ScriptedLLM(["Overview.", "not json at all", LLMError("timeout")])
    result = await AbstractiveSummarizer(llm).summarize("Doc", "e", "o", SECTIONS)
    assert result is not None and result.overview == "Overview."
    assert result.failed_batches == [0, 1]
    assert result.missing_section_ids == ["1", "2", "3", "4", "5"]
    assert result.to_metadata()["overview_present"] is True


@pytest.mark.parametrize("first", [LLMError("down"), "   "])
async def test_a_failed_overview_keeps_the_extractive_summary(first: Any) -> None:
    llm = ScriptedLLM([first])
    assert await AbstractiveSummarizer(llm).summarize("Doc", "e", "o", SECTIONS) is None
    assert len(llm.calls) == 1  # no section batch after a failed overview


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="batch_size must be a positive int"):
        AbstractiveSummarizer(ScriptedLLM([]), batch_size=0)


async def test_enrich_document_rewrites_the_document_row(store: PgVectorStore, embeddings) -> None:
    loader = TextLoader(
        REPO_ROOT / "examples" / "corpus", embedding=embeddings, document_layer=True
    )
    await loader.ingest(store)
    answers = ["The handbook of a cooperative: pay, leave, conduct and safety."]
    answers += [sections_answer()] * 10  # no section summary: partial, still applied
    llm = ScriptedLLM(answers)
    assert await enrich_document(store, AbstractiveSummarizer(llm), "employee-handbook.md")
    only = {"layer": "document", "document_id": "employee-handbook.md"}
    (hit,) = await store.similarity_search("What is this handbook about?", limit=1, filter=only)
    assert "The handbook of a cooperative" in hit.content and "- 4. Pay and Payroll" in hit.content
    block = hit.metadata["abstractive_summary"]
    assert block["overview_present"] and block["degraded_summary"]
    assert hit.metadata["extractive_summary"].startswith("employee-handbook")
    failing = ScriptedLLM([LLMError("down")])
    assert not await enrich_document(store, AbstractiveSummarizer(failing), "benefits-faq.md")

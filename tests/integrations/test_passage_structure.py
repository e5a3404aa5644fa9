"""The adapters' metadata names each passage's section and pages, and the branch scores
behind its score: a LangChain ``Document`` and a LlamaIndex node alike."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore, TextLoader
from parrot_parents.integrations.langchain import ParentChildRetriever
from parrot_parents.loaders.structure.pdf import read_pdf
from parrot_parents.sync import run_sync
from tests.conftest import unique_table

fpdf = pytest.importorskip("fpdf")

# Long enough that each chapter (one page each) is cut into children of its own.
PAY = "You are paid twice a month, on the 15th and the last business day. " * 6
LEAVE = "Vacation accrues at 1.25 days for each full month worked. " * 6
CHAPTERS = [("Chapter 1: Pay", PAY), ("Chapter 2: Leave", LEAVE)]
QUESTION = "How many vacation days accrue each month?"
KEYS = {
    "section_path",
    "section_ordinal",
    "ordinal",
    "layer",
    "page",
    "page_end",
    "dense_rank",
    "dense_score",
    "lexical_rank",
    "lexical_score",
}


def _pdf() -> bytes:
    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.set_title("Staff Handbook")
    for title, body in CHAPTERS:
        pdf.add_page()
        pdf.start_section(title)
        pdf.cell(text=title, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 10, text=body)
    return bytes(pdf.output())


async def _store(pg_dsn: str, embeddings: Any) -> PgVectorStore:
    text, structure = read_pdf(_pdf())
    doc = Document(
        page_content=text,
        metadata={"document_id": "staff.pdf", "structure": structure.to_dict()},
    )
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("pg"), embedding=embeddings)
    await TextLoader(embedding=embeddings, section_parents=True).chunk_documents(
        [doc], vector_store=store
    )
    return store


def _check(meta: dict[str, Any]) -> None:
    assert set(meta) >= KEYS
    assert meta["section_path"] == ["Chapter 2: Leave"] and meta["section_ordinal"] == 2
    assert (meta["page"], meta["page_end"]) == (2, 2) and meta["layer"] == "section"
    assert meta["dense_rank"] is not None and meta["lexical_rank"] is not None


def test_langchain_and_llamaindex_metadata_carry_section_pages_and_branches(
    pg_dsn: str, embeddings: Any
) -> None:
    store = run_sync(_store(pg_dsn, embeddings))
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    try:
        docs = ParentChildRetriever(bot=bot, limit=1, search_mode="hybrid").invoke(QUESTION)
        _check(docs[0].metadata)

        retrieval = run_sync(bot.retrieve(QUESTION))
        assert "Section: Chapter 2: Leave, page 2" in retrieval.format(citations=True)
        assert "Section:" not in retrieval.context

        llama = pytest.importorskip("parrot_parents.integrations.llamaindex")
        nodes = llama.ParentChildLlamaRetriever(bot, limit=1, search_mode="hybrid").retrieve(
            QUESTION
        )
        _check(nodes[0].node.metadata)
        assert nodes[0].score == docs[0].metadata["score"]
    finally:
        run_sync(store.drop())
        bot.close_sync()

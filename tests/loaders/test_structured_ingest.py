"""Structure-aware ingest on the real database and model: section parents, filters on
structure, the retrieval preamble, skip-unchanged and ``reindex --stale``."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders.reindex import reindex_stale
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.outline import document_outline
from tests.conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "corpus"
HANDBOOK = (EXAMPLES / "employee-handbook.md").read_text(encoding="utf-8")


async def _ingest(store: PgVectorStore, embeddings, paths=EXAMPLES, **kwargs):  # type: ignore[no-untyped-def]
    loader = TextLoader(paths, embedding=embeddings, **kwargs)
    return loader, await loader.ingest(store)


async def test_pay_question_returns_the_pay_section_heading_to_heading(
    example_store: PgVectorStore,
) -> None:
    store = example_store  # the defaults: section parents, as section_parents=True
    bot = Chatbot(
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=True,
        context_search_limit=5,
    )
    retrieval = await bot.retrieve("How will I be paid, and when?")
    first = retrieval.passages[0]
    start = HANDBOOK.index("## 4. Pay and Payroll")
    end = HANDBOOK.index("## 5. Leave")
    assert first.document_id == "employee-handbook.md"
    assert (first.start_index, first.end_index) == (
        start,
        len(HANDBOOK[start:end].rstrip()) + start,
    )
    assert first.text == HANDBOOK[start:end].rstrip()
    assert "Rest breaks" not in first.text  # the previous section stays out


async def test_filters_on_structure(example_store: PgVectorStore) -> None:
    store = example_store  # the defaults: section parents, as section_parents=True
    # `section_ordinal` is the number in a row's own heading: "4. Pay and Payroll" is 4
    # ("5. Leave" holds only its heading, which opens the first "Vacation" child).
    hits = await store.similarity_search("when is payday", limit=5, filter={"section_ordinal": 4})
    assert hits and all(h.metadata["section_ordinal"] == 4 for h in hits)
    like = {"section_path": {"$like": "%5. Leave > Vacation%"}}
    hits = await store.similarity_search("carry over", limit=3, filter=like)
    assert hits and all("Vacation" in h.metadata["section_path"] for h in hits)
    hits = await store.similarity_search("pay", limit=3, filter={"layer": "table_row"})
    assert hits == []  # the example corpus has no table


async def test_table_rows_are_found_by_their_headers(
    store: PgVectorStore, embeddings, tmp_path: Path
) -> None:
    rows = "\n".join(f"| {name} | {cost} |" for name, cost in [("Basic", 40), ("Gold", 95)])
    (tmp_path / "plans.md").write_text(
        "# Health plans\n\nMonthly premium per plan:\n\n| Plan | Premium |\n|---|---|\n"
        f"{rows}\n\n## Enrolment\n\nEnrol through the portal within 30 days.\n",
        encoding="utf-8",
    )
    # Plain children: their preamble (the table's header) is what is searched here
    # (tests/loaders/test_table_headers.py checks every strategy).
    await _ingest(store, embeddings, tmp_path, section_parents=True, indexer=None)
    hits = await store.similarity_search(
        "premium", limit=3, filter={"layer": "table_row"}, search_mode="lexical"
    )
    assert [h.content for h in hits] == ["| Basic | 40 |\n| Gold | 95 |"]
    assert hits[0].metadata["parent_table_id"].startswith("plans.md#table:")
    assert "| Plan | Premium |" in hits[0].metadata["retrieval_preamble"]


async def test_preamble_is_indexed_but_never_returned(
    store: PgVectorStore, embeddings, tmp_path: Path
) -> None:
    body = "Staff receive the allowance once a year. " * 15
    (tmp_path / "guide.md").write_text(f"# Zephyrine handbook\n\n## Uniforms\n\n{body}\n")
    await _ingest(store, embeddings, tmp_path, section_parents=True, preamble=True)
    hits = await store.similarity_search("zephyrine uniforms", limit=5, search_mode="lexical")
    allowance = [h for h in hits if h.content.startswith("Staff receive")]
    assert allowance, "the child is found by words of its headings"
    assert "Zephyrine" not in allowance[0].content
    assert allowance[0].metadata["retrieval_preamble"] == "Zephyrine handbook > Uniforms"


async def test_ingest_skips_unchanged_and_says_so(store: PgVectorStore, embeddings) -> None:
    _, first = await _ingest(store, embeddings, section_parents=True)
    assert first.documents == 5 and first.unchanged == []
    _, again = await _ingest(store, embeddings, section_parents=True)
    assert again.documents == 0 and len(again.unchanged) == 5
    _, other_policy = await _ingest(store, embeddings, section_parents=False)
    assert other_policy.documents == 5 and other_policy.unchanged == []


async def test_a_document_whose_metadata_alone_changed_is_written_again(
    store: PgVectorStore, embeddings
) -> None:
    text = "Payroll is paid on the 15th of every month. " * 3

    async def ingest(tenant: str):  # type: ignore[no-untyped-def]
        doc = Document(text, metadata={"source": "policy.txt", "tenant": tenant})
        return await TextLoader(embedding=embeddings).ingest(
            store, documents=[doc], skip_unchanged=True
        )

    await ingest("acme")
    again = await ingest("acme")
    assert again.documents == 0 and again.unchanged == ["policy.txt"]
    moved = await ingest("globex")
    assert moved.documents == 1 and moved.unchanged == []
    for tenant, found in (("globex", 1), ("acme", 0)):
        hits = await store.similarity_search("payroll", filter={"tenant": tenant})
        assert len(hits) == found, tenant


async def test_reindex_stale_after_a_policy_change(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings, section_parents=False)  # fixed parent_chunks
    rows = await store.document_rows("employee-handbook.md")
    assert rows and not any(r.id.endswith("#p:4317-8378") for r in rows)
    loader = TextLoader(embedding=embeddings, section_parents=True)
    report = await reindex_stale(loader, store, batch_size=2, max_batches=1)
    assert (report.reindexed, report.batches, report.finished) == (2, 1, False)
    report = await reindex_stale(loader, store, batch_size=2)
    assert report.reindexed == 3 and report.finished
    rows = await store.document_rows("employee-handbook.md")
    assert any(r.id == "employee-handbook.md#p:4317-8378" for r in rows)
    assert (await reindex_stale(loader, store)).reindexed == 0
    # reindex reads no file: the rows point into the stored text, exactly
    outline = await document_outline(store, "employee-handbook.md")
    assert any(e.section_path.endswith("4. Pay and Payroll") for e in outline)


@pytest.mark.parametrize("kind", ["html", "pdf"])
async def test_html_and_pdf_files_ingest_with_sections(
    store: PgVectorStore, embeddings, tmp_path: Path, kind: str
) -> None:
    chapters = [
        ("Chapter 1: Pay", "You are paid twice a month, on the 15th. " * 12),
        ("Chapter 2: Leave", "Vacation accrues at 1.25 days a month. " * 12),
    ]
    if kind == "html":
        body = "".join(f"<h2>{t}</h2><p>{b}</p>" for t, b in chapters)
        (tmp_path / "h.html").write_text(f"<html><body>{body}</body></html>")
    else:
        from tests.loaders.structure.test_pdf import make_pdf

        (tmp_path / "h.pdf").write_bytes(make_pdf(chapters))
    loader = TextLoader(tmp_path, embedding=embeddings, section_parents=True)
    loader.processor.section_parents = True
    docs = loader.load()
    await loader.chunk_documents(docs, vector_store=store, parent_chunk_threshold_tokens=100)
    hits = await store.similarity_search("vacation", limit=2, filter={"section_ordinal": 2})
    assert hits and all(h.metadata["section_path"] == "Chapter 2: Leave" for h in hits)
    if kind == "pdf":
        assert all(h.metadata["page"] == 2 for h in hits)


async def test_documents_table_keeps_the_source(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings, section_parents=True)
    records = await store.stale_documents(["none"], limit=10)
    by_id = {r.document_id: r for r in records}
    assert by_id["employee-handbook.md"].source_text == HANDBOOK
    assert by_id["employee-handbook.md"].metadata["reader"] == "markdown"
    await store.delete("employee-handbook.md")
    assert "employee-handbook.md" not in await store.document_states(["employee-handbook.md"])


def test_docs_given_in_code_need_no_structure(embeddings) -> None:  # type: ignore[no-untyped-def]
    loader = TextLoader(embedding=embeddings, section_parents=True)
    doc = Document(page_content="# T\n\nbody", metadata={"document_id": "d"})
    (h,) = [loader.processor.build_hierarchy(doc.page_content, "d")]
    assert "layer" not in h.children[0].metadata  # no structure given: plain rows


async def test_document_layer_row_is_embedded_and_found(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings, document_layer=True)
    hits = await store.similarity_search(
        "What is the employee handbook about?", limit=1, filter={"layer": "document"}
    )
    assert [h.id for h in hits] == ["employee-handbook.md#document"]
    assert hits[0].score is not None  # it has a vector
    assert "- 4. Pay and Payroll" in hits[0].content
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
    retrieval = await bot.retrieve(
        "What is the employee handbook about?", budget=1500, filter={"layer": "document"}
    )
    # One overview per document; no span, no parent: packed as loose text in the budget.
    first = retrieval.passages[0]
    assert first.id == "employee-handbook.md#document" and first.start_index is None
    assert hits[0].content.startswith(first.text)
    assert sum(len(p.text) for p in retrieval.passages) <= 1500


async def test_a_markdown_text_given_as_a_document_is_the_same_document_as_its_file(
    store: PgVectorStore, embeddings, tmp_path: Path
) -> None:
    body = "# Handbook\n\n" + "\n\n".join(
        f"## {title}\n\n"
        + "\n\n".join(f"{title} note {i}: the code is in the log." for i in range(4))
        for title in ("Public A", "Confidential", "Public B")
    )
    (tmp_path / "hb.md").write_text(body, encoding="utf-8")

    async def rows() -> list[object]:
        found = await store.document_rows("hb.md")
        outline = await document_outline(store, "hb.md")
        return [sorted((r.id, r.kind, r.parent_document_id) for r in found), outline]

    await TextLoader(tmp_path, embedding=embeddings).ingest(store)
    from_file = await rows()
    outline = from_file[1]
    assert isinstance(outline, list)
    assert any(e.section_path.endswith("Confidential") for e in outline)
    await store.delete("hb.md")
    await TextLoader(embedding=embeddings).ingest(
        store, documents=[Document(body, metadata={"source": "hb.md"})]
    )
    assert await rows() == from_file

"""Sentence trimming end to end: the loader stores each child's sentences with their
late-chunked vectors, and a budgeted call hands over the sentences that answer."""

from __future__ import annotations

from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.sentences import SENTENCES

FILLER = (
    "The office plants are watered on Mondays. Visitors sign in at the front desk. "
    "The kitchen is cleaned every evening. "
)
TEXT = "\n\n".join(
    [
        FILLER + "Salaries are paid by direct deposit on the last working day of the month.",
        FILLER + "Parking permits are issued by the facilities team.",
        FILLER + "Holiday requests go to your manager two weeks ahead.",
    ]
)


async def test_a_budgeted_answer_is_cut_to_its_best_sentences(
    store: PgVectorStore,
) -> None:
    loader = TextLoader(child_chunk_size=200, embedding=store.embedding)
    await loader.chunk_documents(
        [Document(page_content=TEXT, metadata={"source": "handbook.md"})], store
    )
    bot = Chatbot(store=store)
    # Room for one child whole and one sentence more, not for two children.
    retrieval = await bot.retrieve("When are salaries paid?", budget=300)
    packing = retrieval.meta.packing
    assert packing is not None and packing["trim"] == "sentences", packing
    assert retrieval.meta.context_chars <= 300
    texts = [p.text for p in retrieval.passages]
    assert any("Salaries are paid by direct deposit" in t for t in texts), texts
    for p in retrieval.passages:
        assert p.start_index is not None and p.end_index is not None
        assert TEXT[p.start_index : p.end_index] == p.text
        assert SENTENCES not in p.metadata  # internal: never handed over
    (trimmed,) = packing["trimmed"][:1]
    assert trimmed["dropped_chars"] == sum(len(t) for t in trimmed["dropped_text"]) > 0
    # The store's own search results keep the key out of the metadata too.
    (row,) = await store.similarity_search("salaries", limit=1)
    assert SENTENCES not in row.metadata and row.sentences is not None

    # Off, the same call hands over whole children (and cuts the last one).
    whole = await bot.retrieve("When are salaries paid?", budget=300, trim=False)
    assert whole.meta.packing is not None and whole.meta.packing["trim"] == "off"

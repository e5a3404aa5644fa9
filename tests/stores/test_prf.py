"""Pseudo-relevance feedback (RM3) in the lexical branch, on the real database."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.search_options import PRF, Fusion

# "dividend payout" is in the first two; the answer shares none of the query's words,
# only the words those two have in common with it (shareholders, board, resolution).
DOCS = {
    "d1": "Dividend payout: shareholders receive the dividend each quarter, after the "
    "board resolution.",
    "d2": "The dividend payout to shareholders follows the board resolution of the quarter.",
    "answer": "Shareholders are paid their distribution once the board resolution is filed.",
    "kitchen": "Kitchen staff clean the fridge every Friday afternoon before they leave.",
    "cars": "Company cars are assigned to field staff; mileage is reimbursed monthly.",
    "badge": "Visitors collect a badge at reception and return it when they leave.",
}


async def _ingest(store: PgVectorStore, embeddings: Any) -> None:
    await TextLoader(child_chunk_size=200, embedding=embeddings, indexer=None).chunk_documents(
        [Document(page_content=t, metadata={"document_id": d}) for d, t in DOCS.items()],
        vector_store=store,
    )


def _docs(rows: list[Any]) -> list[str]:
    return [r.metadata["document_id"] for r in rows]


async def test_feedback_finds_a_child_that_shares_no_word_with_the_query(
    store: PgVectorStore, embeddings: Any
) -> None:
    await _ingest(store, embeddings)
    plain = await store.similarity_search("dividend payout", limit=5, search_mode="lexical")
    assert "answer" not in _docs(plain)
    assert all(r.lexical_expansion is None for r in plain)

    prf = Fusion(prf=PRF(fb_docs=2, fb_terms=5))
    fed = await store.similarity_search(
        "dividend payout", limit=5, search_mode="lexical", fusion=prf
    )
    assert _docs(fed)[:2] == _docs(plain)[:2]  # the query's own terms still lead
    assert "answer" in _docs(fed)
    assert "kitchen" not in _docs(fed)
    expansion = fed[0].lexical_expansion
    assert expansion is not None and len(expansion) <= 5
    assert "resolut" in expansion and "dividend" not in expansion  # lexemes, query's left out
    assert all(r.lexical_expansion == expansion for r in fed)
    assert all(r.lexical_score is not None and math.isfinite(r.lexical_score) for r in fed)

    hybrid = await store.similarity_search(
        "dividend payout", limit=6, search_mode="hybrid", fusion=prf
    )
    assert hybrid[0].lexical_expansion == expansion  # on dense-only rows too
    assert all(r.lexical_expansion == expansion for r in hybrid)


async def test_feedback_is_bounded_and_respects_the_filter(
    store: PgVectorStore, embeddings: Any
) -> None:
    await _ingest(store, embeddings)
    one = Fusion(prf=PRF(fb_docs=1, fb_terms=1, original_weight=1.0))
    rows = await store.similarity_search(
        "dividend payout", limit=5, search_mode="lexical", fusion=one
    )
    # All the weight on the query: feedback adds a term that scores nothing.
    plain = await store.similarity_search("dividend payout", limit=5, search_mode="lexical")
    assert _docs(rows) == _docs(plain)
    assert rows[0].lexical_expansion == ()  # its one term was the query's own
    lexical, both = [
        await store.similarity_search(
            "dividend payout",
            limit=5,
            search_mode=mode,
            filter={"document_id": "answer"},
            fusion=Fusion(prf=PRF()),
        )
        for mode in ("lexical", "hybrid")
    ]
    assert lexical == []  # feedback reads only children the filter lets through
    # Hybrid, ranked exactly over the children the filter keeps: the dense rows alone.
    assert both and {r.metadata["document_id"] for r in both} == {"answer"}
    assert all(r.lexical_rank is None and r.dense_rank is not None for r in both)
    assert all(r.lexical_expansion == () for r in both)
    assert both[0].filter_plan is not None and both[0].filter_plan.exact
    nothing = await store.similarity_search(
        "zzzz qqqq", limit=5, search_mode="lexical", fusion=Fusion(prf=PRF())
    )
    assert nothing == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fb_docs": 0}, "fb_docs must be an int in"),
        ({"fb_terms": 101}, "fb_terms must be an int in"),
        ({"fb_docs": True}, "fb_docs must be an int in"),
        ({"original_weight": 1.5}, "original_weight must be in"),
        ({"original_weight": math.nan}, "original_weight must be in"),
    ],
)
def test_bad_feedback_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PRF(**kwargs)


async def test_meta_reports_that_feedback_ran_and_its_terms(
    store: PgVectorStore, embeddings: Any
) -> None:
    await _ingest(store, embeddings)
    bot = Chatbot(store=store, owns_store=False, search_mode="lexical")
    plain = await bot.retrieve("dividend payout", limit=5)
    assert "prf" not in plain.meta
    fed = await bot.retrieve("dividend payout", limit=5, prf=True)
    terms = fed.meta["prf"]["terms"]
    assert "resolut" in terms and "dividend" not in terms and len(terms) <= PRF().fb_terms
    assert "answer" in {c["document_id"] for c in fed.meta["children"]}
    hybrid = await bot.retrieve("dividend payout", limit=5, prf=True, search_mode="hybrid")
    assert hybrid.meta["prf"]["terms"] == terms
    dense = await bot.retrieve("dividend payout", limit=5, prf=True, search_mode="dense")
    assert "prf" not in dense.meta
    assert dense.meta["notes"] == ["prf ignored: search_mode is 'dense'"]

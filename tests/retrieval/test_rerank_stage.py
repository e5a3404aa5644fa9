"""The reranker scores children, the top ``limit`` are kept, then expansion runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from langchain_core.documents import Document
from transformers import AutoModelForSequenceClassification

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders import TextLoader
from parrot_parents.rerankers import AbstractReranker, CrossEncoderReranker
from parrot_parents.rerankers.testing import build_tiny_cross_encoder
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

DOCS = {
    f"doc{i}.md": " ".join(f"Section {i} sentence {j} about payroll and leave." for j in range(30))
    for i in range(3)
}


class RecordingReranker(AbstractReranker):
    """Scores by reversed vector rank and records what it was shown."""

    type_name = "recording"

    def __init__(self) -> None:
        self.seen: list[str] = []

    @property
    def model_name(self) -> str:
        return "recording"

    async def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        self.seen = [d.page_content for d in documents]
        return [float(i) for i in range(len(documents))]  # the last candidate wins

    def to_dict(self) -> dict:
        return {"type": "recording"}


@pytest.fixture
async def filled(store: PgVectorStore, embeddings) -> PgVectorStore:
    await TextLoader(child_chunk_size=150, embedding=embeddings)._chunk_with_late_chunking(
        [Document(page_content=t, metadata={"document_id": k}) for k, t in DOCS.items()],
        vector_store=store,
    )
    return store


async def test_reranker_sees_children_and_expansion_follows_truncation(
    filled: PgVectorStore,
) -> None:
    reranker = RecordingReranker()
    bot = Chatbot(
        store=filled,
        parent_searcher=InTableParentSearcher(store=filled),
        expand_to_parent=True,
        context_search_limit=2,
        reranker=reranker,
        rerank_candidates=8,
    )
    retrieval = await bot.retrieve("payroll and leave")
    meta = retrieval.meta
    assert meta["candidates"] == 8 and len(reranker.seen) == 8
    assert all(len(t) <= 150 for t in reranker.seen)  # children, never 4000-char parents
    assert len(meta["children"]) == 2  # truncated to the limit before expansion
    assert [c["rerank_score"] for c in meta["children"]] == [7.0, 6.0]
    folded = [c for ids in meta["folded"].values() for c in ids]
    assert sorted(folded) == sorted(c["id"] for c in meta["children"])
    assert meta["reranked"] is True and "rerank" in meta["timings_ms"]


async def test_a_failing_reranker_falls_back_to_vector_order_truncated(
    filled: PgVectorStore, tmp_path: Path
) -> None:
    missing = CrossEncoderReranker(str(tmp_path / "no-such-model"))
    # Dense search, so that the search order is the cosine order checked below.
    bot = Chatbot(store=filled, context_search_limit=3, reranker=missing, search_mode="dense")
    retrieval = await bot.retrieve("payroll")
    assert len(retrieval.passages) == 3  # never all 12 candidates
    (fallback,) = retrieval.meta["fallbacks"]
    assert fallback["stage"] == "rerank" and "ModelLoadError" in fallback["error"]
    scores = [c["score"] for c in retrieval.meta["children"]]
    assert scores == sorted(scores, reverse=True)


async def test_nan_scores_fall_back(filled: PgVectorStore, tmp_path: Path) -> None:
    path = build_tiny_cross_encoder(tmp_path / "tiny")
    model = AutoModelForSequenceClassification.from_pretrained(str(path))
    with torch.no_grad():
        model.classifier.bias.fill_(float("nan"))
    model.save_pretrained(str(tmp_path / "nan"))
    for f in path.iterdir():  # keep the tokenizer files beside the NaN weights
        if f.name.startswith(("tokenizer", "vocab", "special")):
            (tmp_path / "nan" / f.name).write_bytes(f.read_bytes())
    bot = Chatbot(
        store=filled, context_search_limit=2, reranker=CrossEncoderReranker(str(tmp_path / "nan"))
    )
    retrieval = await bot.retrieve("payroll")
    assert len(retrieval.passages) == 2
    assert "NaN" in retrieval.meta["fallbacks"][0]["error"]


async def test_tiny_cross_encoder_reorders_children(filled: PgVectorStore, tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(str(build_tiny_cross_encoder(tmp_path / "m")))
    bot = Chatbot(store=filled, context_search_limit=3, reranker=reranker)
    retrieval = await bot.retrieve("payroll")
    assert retrieval.meta["reranked"] is True and not retrieval.meta["fallbacks"]
    scores = [c["rerank_score"] for c in retrieval.meta["children"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3

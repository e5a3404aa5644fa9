"""The parrot-parents rows of the ``ai_parrot`` benchmark: ``parrot-parents eval`` with its
defaults (the reference), our own ``Chatbot`` on the same collection, and the two routes of
the ai-parrot integration inside a stock ai-parrot bot.

Every row of this module reads one collection: the reference row's, ingested once by
``run_eval`` (``EvalConfig(keep=True)``), so the rows differ only in what asks it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import CHUNKING_EVAL
from benchmarks.quality._ai_parrot.harness import (
    BUDGETS,
    RUNS,
    Passage,
    Route,
    RowResult,
    p50,
    score,
)
from benchmarks.quality._ai_parrot.native import MODEL_NAME, ask_bot, bot_notes, observe_bot

#: ``context_score_threshold`` that keeps every child in our store (the lowest cosine
#: similarity); ai-parrot reads a 0 argument as "use the bot's".
KEEP_ALL = -1.0


@dataclass
class Collection:
    """The collection every row here reads, and the bots over it."""

    dsn: str | None
    name: str = field(default_factory=lambda: f"aiparrot_pp_{uuid.uuid4().hex[:8]}")
    store: Any = None

    async def open(self) -> Any:
        from parrot_parents import PgVectorStore
        from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

        if self.store is None:
            embedding = SentenceTransformerEmbeddings()
            embedding.warm_up()
            self.store = PgVectorStore(
                dsn=self.dsn, table=self.name, embedding=embedding, create=False
            )
            await self.store.connect()
        return self.store

    async def drop(self) -> None:
        if self.store is None:
            from parrot_parents import PgVectorStore

            self.store = PgVectorStore(dsn=self.dsn, table=self.name, create=False)
        await self.store.drop()
        await self.store.close()
        self.store = None


def spans(passages: Sequence[Any]) -> list[Passage]:
    """Our passages as corpus spans (their offsets are exact by construction)."""
    return [(p.document_id, p.start_index, p.end_index) for p in passages]


async def reference_row(
    questions: Sequence[Any], questions_csv: Path, collection: Collection
) -> RowResult:
    """parrot-parents defaults: ``run_eval`` with ``EvalConfig()`` (what ``parrot-parents
    eval`` runs with no options), scored by the shared scorer from its run file; its
    collection is kept for the other rows. Query vector: ``aembed_query`` alone."""
    from parrot_parents.eval.runner import EvalConfig, run_eval

    print("[parrot-parents defaults] eval", flush=True)
    path = RUNS / "parrot_parents_defaults.jsonl"
    config = EvalConfig(dsn=collection.dsn, collection=collection.name, keep=True)
    result = await run_eval(questions_csv, CHUNKING_EVAL / "corpora", path, config, log=print)
    run = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        run[row["qid"]] = row["passages"]
    store = await collection.open()
    vector = []
    for q in questions:
        started = time.perf_counter()
        await store.embedding.aembed_query(q.question)
        vector.append((time.perf_counter() - started) * 1000.0)
    metrics = score(questions_csv, path)
    ingest = result.ingest
    return RowResult(
        "parrot-parents defaults (`parrot-parents eval`)",
        {b: float(metrics[f"recall@{b}c"]) for b in BUDGETS},
        sum(1 for q in questions if not run.get(q.qid)),
        len(questions),
        float(result.timings["query_p50_ms"]),
        p50(vector),
        f"`parrot-parents eval` defaults: {ingest.get('children')} children, "
        f"{ingest.get('parents')} parents, strategy "
        f"{(ingest.get('strategy') or {}).get('strategy', 'plain')}; "
        f"{result.diagnostics.get('text_mismatches', 0)} text mismatches",
        path,
    )


async def _embed(bot: Any, question: str) -> Any:
    return await bot.store.embedding.aembed_query(question)


def chatbot_row(name: str, collection: Collection, **options: Any) -> Route:
    """Our own ``Chatbot`` on the collection, with ``options`` on every call."""

    async def setup(corpora: Mapping[str, str]) -> Any:
        from parrot_parents import Chatbot, InTableParentSearcher

        store = await collection.open()
        bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
        await bot.retrieve("What is this about?", **options)
        return bot

    async def query(bot: Any, question: str) -> list[Passage]:
        return spans((await bot.retrieve(question, **options)).passages)

    return Route(name, setup, query, _embed)


def stock_bot_row(name: str, collection: Collection, *, threshold: float | None) -> Route:
    """Route 3: a stock ``BasicBot`` over ``ParrotParentsStore``, its parent searcher built
    by ai-parrot's factory from ``{"type": "parrot_parents"}``, expanding; ``threshold``
    None leaves the bot its catalogue default (what a user who sets nothing gets)."""

    async def setup(corpora: Mapping[str, str]) -> Any:
        from parrot.bots import BasicBot
        from parrot.stores.parents.factory import create_parent_searcher

        from parrot_parents.integrations.ai_parrot import ParrotParentsStore

        store = ParrotParentsStore(await collection.open())
        kwargs: dict[str, Any] = {
            "name": "bench",
            "embedding_model": {"model_name": MODEL_NAME, "model_type": "huggingface"},
            "expand_to_parent": True,
            "parent_searcher": create_parent_searcher({"type": "parrot_parents"}, store=store),
        }
        if threshold is not None:
            kwargs["context_score_threshold"] = threshold
        bot = BasicBot(**kwargs)
        bot.store = store
        return await observe_bot(name, bot, store, corpora)

    async def embed(h: Any, question: str) -> Any:
        return await h.store.collection_store.embedding.aembed_query(question)

    return Route(name, setup, ask_bot, embed, None, bot_notes)


def mixin_bot_class() -> Any:
    """``Bot(ParentChildMixin, BasicBot)`` that keeps its last retrieval, so the row reads
    the passages ``get_vector_context`` joined (the benchmark's only addition)."""
    from parrot.bots import BasicBot

    from parrot_parents.integrations.ai_parrot import ParentChildMixin

    class Bot(ParentChildMixin, BasicBot):  # type: ignore[misc]
        last: Any = None

        async def parrot_parents_retrieve(self, question: str, **kwargs: Any) -> Any:
            self.last = await super().parrot_parents_retrieve(question, **kwargs)
            return self.last

    return Bot


def mixin_row(name: str, collection: Collection, *, expand: bool) -> Route:
    """Route 4: ``Bot(ParentChildMixin, BasicBot)``, asked ``get_vector_context(question)``
    with ai-parrot's defaults (and ``expand_to_parent`` set on the bot)."""

    async def setup(corpora: Mapping[str, str]) -> Any:
        bot = mixin_bot_class()(
            name="bench",
            embedding_model={"model_name": MODEL_NAME, "model_type": "huggingface"},
            expand_to_parent=expand,
            parrot_parents_store=await collection.open(),
        )
        await bot.get_vector_context("What is this about?")
        return bot

    async def query(bot: Any, question: str) -> list[Passage]:
        context, _ = await bot.get_vector_context(question)
        passages = bot.last.passages
        if context != "\n\n".join(p.text for p in passages):
            raise RuntimeError("the context is not the passages joined")
        return spans(passages)

    async def embed(bot: Any, question: str) -> Any:
        return await bot.store.collection_store.embedding.aembed_query(question)

    return Route(name, setup, query, embed)


@dataclass
class Overhead:
    """p50 of our ``Chatbot.retrieve`` and of the mixin's ``get_vector_context`` on the same
    questions, interleaved question by question, and the p50 of their paired difference."""

    chatbot_ms: float
    mixin_ms: float
    difference_ms: float
    vector_ms: float
    questions: int


async def overhead(questions: Sequence[Any], collection: Collection) -> Overhead:
    """What the ai-parrot wrapping adds to our own ``Chatbot`` (package defaults on both),
    each question asked of both in turn, the order alternating.

    Each side reads the collection through a store and an embedding of its own: an
    embedding keeps the vectors of the questions it last embedded, so sharing one would
    hand the second caller of each question a free query vector.
    """
    from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    def own_store() -> Any:
        embedding = SentenceTransformerEmbeddings()
        embedding.warm_up()
        return PgVectorStore(
            dsn=collection.dsn, table=collection.name, embedding=embedding, create=False
        )

    mine, wrapped, fresh = own_store(), own_store(), SentenceTransformerEmbeddings()
    fresh.warm_up()
    ours = Chatbot(store=mine, parent_searcher=InTableParentSearcher(store=mine))
    theirs = mixin_bot_class()(
        name="bench",
        embedding_model={"model_name": MODEL_NAME, "model_type": "huggingface"},
        parrot_parents_store=wrapped,
    )
    try:
        await ours.retrieve("warm-up")
        await theirs.get_vector_context("warm-up")
        a: list[float] = []
        b: list[float] = []
        vector: list[float] = []
        for i, q in enumerate(questions):
            calls = [("a", ours.retrieve), ("b", theirs.get_vector_context)]
            for label, call in calls if i % 2 == 0 else reversed(calls):
                started = time.perf_counter()
                await call(q.question)
                (a if label == "a" else b).append((time.perf_counter() - started) * 1000.0)
            started = time.perf_counter()
            await fresh.aembed_query(q.question)
            vector.append((time.perf_counter() - started) * 1000.0)
    finally:
        await mine.close()
        await wrapped.close()
    differences = [y - x for x, y in zip(a, b, strict=True)]
    return Overhead(p50(a), p50(b), p50(differences), p50(vector), len(a))

from __future__ import annotations

import itertools

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.retrieval.modes import ExpansionMode, parse_mode
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("parent", ExpansionMode()),
        ("auto_merge:0.5", ExpansionMode("auto_merge", 0.5)),
        ("auto_merge:1", ExpansionMode("auto_merge", 1.0)),
        ("window:2", ExpansionMode("window", window=2)),
    ],
)
def test_parse_mode(text: str, mode: ExpansionMode) -> None:
    assert parse_mode(text) == mode
    assert parse_mode(str(mode)) == mode


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("auto_merge:0", r"must be in \(0, 1\], got 0"),
        ("auto_merge:1.5", r"in \(0, 1\]"),
        ("auto_merge", "needs a threshold"),
        ("window:0", "must be >= 1, got 0"),
        ("window:-2", ">= 1"),
        ("window:x", "whole number"),
        ("sideways", "unknown mode"),
        ("parent:3", "takes no parameter"),
    ],
)
def test_mode_errors_are_clear(text: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        parse_mode(text)


DOC = "\n\n".join(f"Paragraph {i}: facts about topic {i} only. " * 2 for i in range(12))


@pytest.fixture
async def bot(store: PgVectorStore, embeddings) -> Chatbot:
    await TextLoader(child_chunk_size=90, embedding=embeddings)._chunk_with_late_chunking(
        [Document(page_content=DOC, metadata={"document_id": "d"})], vector_store=store
    )
    return Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=True,
        context_search_limit=1,
    )


async def test_window_is_symmetric_in_the_middle_and_clipped_at_edges(
    bot: Chatbot, store: PgVectorStore
) -> None:
    (kids,) = (await store.fetch_children([f"d#doc:0-{len(DOC)}"])).values()
    spans = [(k.metadata["start_index"], k.metadata["end_index"]) for k in kids]
    for question, n in (
        ("facts about topic 6", 1),
        ("facts about topic 0", 2),
        ("facts about topic 11", 2),
    ):
        r = await bot.retrieve(question, mode=f"window:{n}")
        (p,) = r.passages
        hit = r.meta["children"][0]["id"]
        i = [k.id for k in kids].index(hit)
        lo, hi = max(0, i - n), min(len(kids) - 1, i + n)  # what exists near an edge
        assert p.kind == "window" and r.meta["mode"] == f"window:{n}"
        assert (p.start_index, p.end_index) == (spans[lo][0], spans[hi][1])
        assert p.text == DOC[p.start_index : p.end_index]


async def test_auto_merge_threshold_decides(bot: Chatbot, store: PgVectorStore) -> None:
    children = await store.fetch_children(["d#doc:0-" + str(len(DOC))])
    total = len(next(iter(children.values())))
    hits = 3
    merged = await bot.retrieve(
        "facts about topics", mode=f"auto_merge:{hits / total:.4f}", limit=hits
    )
    assert [p.kind for p in merged.passages] == ["parent"]
    kept = await bot.retrieve(
        "facts about topics", mode=f"auto_merge:{(hits + 1) / total:.4f}", limit=hits
    )
    assert [p.kind for p in kept.passages] == ["child"] * hits
    assert kept.meta["auto_merge"]["d#doc:0-" + str(len(DOC))]["children"] == total


async def test_budget_override_and_meta(bot: Chatbot) -> None:
    r = await bot.retrieve("facts about topic 3", budget=120, limit=3)
    assert r.meta["packing"]["budget"] == 120
    assert r.meta["packing"]["used"] == sum(len(p.text) for p in r.passages) <= 120
    assert r.meta["packing"]["substituted"]  # the whole document did not fit
    with pytest.raises(ConfigurationError, match="budget must be a positive int"):
        await bot.retrieve("x", budget=0)


def test_bot_mode_is_validated_at_construction(store: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError, match="unknown mode"):
        Chatbot(store=store, expansion_mode="sideways")


async def test_overlapping_windows_are_merged_without_a_budget(bot: Chatbot) -> None:
    r = await bot.retrieve("facts about topics", mode="window:2", limit=6)
    spans = sorted((p.start_index, p.end_index) for p in r.passages)
    for (_, e1), (s2, _) in itertools.pairwise(spans):
        assert e1 < s2  # no two windows of the document overlap or touch
    assert sum(len(p.child_ids) for p in r.passages) == 6
    for p in r.passages:
        assert p.text == DOC[p.start_index : p.end_index]


async def test_ignored_options_are_noted(bot: Chatbot) -> None:
    r = await bot.retrieve("facts", expand_to_parent=False, mode="window:1", rerank_candidates=9)
    assert r.meta["notes"] == [
        "mode 'window:1' ignored: expansion is off",
        "rerank_candidates ignored: the bot has no reranker",
    ]

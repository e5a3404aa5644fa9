"""Windows on the example corpus, whose section parents leave the text between sections
out of every parent: no passage handed over twice, whole or in part."""

from __future__ import annotations

import pytest

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore


@pytest.mark.parametrize("mode", ["window:1", "window:3", "window:5"])
async def test_no_window_holds_or_crosses_another_passage(
    example_store: PgVectorStore, mode: str
) -> None:
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=example_store), expand_to_parent=True)
    retrieval = await bot.retrieve("How will I be paid, and when?", mode=mode)
    passages = retrieval.passages
    assert any(p.kind == "window" for p in passages)
    for i, p in enumerate(passages):
        for q in passages[i + 1 :]:
            if p.document_id != q.document_id:
                continue
            assert p.start_index is not None and q.start_index is not None
            assert p.end_index is not None and q.end_index is not None
            apart = p.end_index < q.start_index or q.end_index < p.start_index
            assert apart, (mode, p.id, q.id)
    # No hit in two passages.
    held = [c for p in passages for c in p.child_ids]
    assert len(held) == len(set(held))

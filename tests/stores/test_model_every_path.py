"""Every path that embeds the question for a collection checks the collection's model.

The search embeds it (dense, hybrid) and so does sentence trimming under a budget (any
search mode, lexical included): each one compares the model with the collection's record
first. Only a call that embeds nothing (lexical without trimming) is answered.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.cli.main import main
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ModelMismatchError
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.backends import parent_searcher_for
from parrot_parents.stores.postgres import PgVectorStore
from tests.stores.tiny_embedder import build_tiny_embedder

FILLER = (
    "The office plants are watered on Mondays. Visitors sign in at the front desk. "
    "The kitchen is cleaned every evening. "
)
TEXT = "\n\n".join(
    [
        "# Handbook",
        "## Pay\n\n" + FILLER + "Salaries are paid by direct deposit on the last working day.",
        "## Parking\n\n" + FILLER + "Parking permits are issued by the facilities team.",
        "## Holidays\n\n" + FILLER + "Holiday requests go to your manager two weeks ahead.",
    ]
)
QUESTION = "When are salaries paid?"

#: Every option that decides whether, and where, the question is embedded.
COMBINATIONS = list(
    itertools.product(("dense", "hybrid", "lexical"), (None, 250), (True, False), (True, False))
)


def _embeds(search_mode: str, budget: int | None, trim: bool) -> bool:
    return search_mode != "lexical" or (budget is not None and trim)


@pytest.fixture(scope="module")
def others(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Two other models: one of the collection's dimension (384), one of another (256)."""
    root = tmp_path_factory.mktemp("other-models")
    return {d: build_tiny_embedder(root / str(d), seed=1, dimension=d) for d in (384, 256)}


@pytest.fixture
async def ingested(store: PgVectorStore) -> AsyncIterator[PgVectorStore]:
    """The store's collection, ingested with its own model (sentences stored for trimming)."""
    loader = TextLoader(child_chunk_size=200, embedding=store.embedding)
    await loader.chunk_documents([Document(TEXT, metadata={"source": "handbook.md"})], store)
    assert not loader.report.failed, loader.report.failed
    yield store


@pytest.mark.parametrize("dimension", [384, 256])
async def test_every_option_that_embeds_refuses_another_model(
    ingested: PgVectorStore, others: dict[int, Path], dimension: int
) -> None:
    # The collection's own model trims under a budget: the case the others must not reach.
    own = await Chatbot(store=ingested).retrieve(QUESTION, search_mode="lexical", budget=250)
    assert own.meta.packing is not None and own.meta.packing["trim"] == "sentences"
    model = SentenceTransformerEmbeddings(str(others[dimension]))
    other = PgVectorStore(dsn=ingested.connections.dsn, table=ingested.table, embedding=model)
    bot = Chatbot(store=other, parent_searcher=parent_searcher_for(other))
    try:
        for search_mode, budget, trim, expand in COMBINATIONS:
            case = f"{search_mode=} {budget=} {trim=} {expand=}"
            options = {
                "search_mode": search_mode,
                "budget": budget,
                "trim": trim,
                "expand_to_parent": expand,
            }
            if _embeds(search_mode, budget, trim):
                with pytest.raises(ModelMismatchError) as info:
                    await bot.retrieve(QUESTION, **options)  # type: ignore[arg-type]
                assert info.value.recorded != info.value.actual, case
                assert info.value.actual_dimension == dimension, case
            else:
                got = await bot.retrieve(QUESTION, **options)  # type: ignore[arg-type]
                assert got.passages, case
                packing = got.meta.packing
                assert packing is None or packing["trim"] != "sentences", case
    finally:
        await bot.close()


async def test_a_lexical_call_without_trimming_loads_no_model(
    ingested: PgVectorStore, others: dict[int, Path]
) -> None:
    model = SentenceTransformerEmbeddings(str(others[256]))
    other = PgVectorStore(dsn=ingested.connections.dsn, table=ingested.table, embedding=model)
    try:
        bot = Chatbot(store=other)
        got = await bot.retrieve(QUESTION, search_mode="lexical", budget=250, trim=False)
        assert got.passages and model.load_ms is None
    finally:
        await other.close()


@pytest.mark.parametrize("dimension", [384, 256])
def test_cli_ask_lexical_with_a_budget_refuses_another_model(
    tmp_path: Path,
    pg_dsn: str,
    others: dict[int, Path],
    dimension: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "handbook.md").write_text(TEXT, encoding="utf-8")
    common = ["--collection", f"every_path_{dimension}", "--dsn", pg_dsn]
    assert main(["ingest", str(tmp_path), *common]) == 0
    try:
        capsys.readouterr()
        ask = ["ask", QUESTION, "--search-mode", "lexical", "--budget", "250", *common]
        assert main([*ask, "--model", str(others[dimension])]) != 0
        err = capsys.readouterr().err
        assert "was embedded with" in err and "--model" in err, err
        # Without trimming it embeds nothing, so any model answers.
        assert main([*ask, "--no-trim", "--model", str(others[dimension])]) == 0
    finally:
        assert main(["drop", common[1], "--yes", "--dsn", pg_dsn]) == 0

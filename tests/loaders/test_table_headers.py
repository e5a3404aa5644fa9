"""A table row is searched with its table's caption and column headers, whatever the
ingestion strategy: the default one (``contextual:extractive``, whose indexed row is what
is searched), ``plain`` (the child and its retrieval preamble) and the model-backed ones.
Checked on an HTML table and a Markdown pipe table, in the text embedded and in the
lexical index (a word found only in a header finds the row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.strategies import GuardedModel, PromptCache, StrategyIndexer, parse_strategy
from tests.strategies.conftest import ScriptedLLM

# "Role" and "Seniority" appear in no row and no heading: only the header names them.
HTML = (
    "<html><head><title>Crew</title></head><body><h1>Crew</h1>"
    "<p>Who does what on the ship.</p>"
    "<table><caption>Team</caption><thead><tr><th>Name</th><th>Role</th></tr></thead>"
    "<tbody><tr><td>Ada</td><td>Pilot</td></tr><tr><td>Grace</td><td>Engineer</td></tr>"
    "</tbody></table></body></html>"
)
MARKDOWN = (
    "# Planets\n\nWhat the survey found, planet by planet, over the last decades of "
    "observation from the ground and from orbit.\n\nOrbits of the inner planets:\n\n"
    "| Body | Seniority |\n|---|---|\n| Mars | 4 |\n| Venus | 2 |\n"
)
CASES = {
    # file, text, what the searched row must name, a header word, its lexeme
    "html": ("crew.html", HTML, ["Team", "Name | Role"], "role", "role"),
    "markdown": ("planets.md", MARKDOWN, ["Body | Seniority"], "seniority", "senior"),
}


async def _ingest(store: PgVectorStore, embeddings: Any, tmp: Path, case: str, **kw: Any) -> None:
    name, body, *_ = CASES[case]
    (tmp / name).write_text(body, encoding="utf-8")
    await TextLoader(tmp, embedding=embeddings, **kw).ingest(store)


async def _searched_rows(store: PgVectorStore) -> list[tuple[str, str, str | None]]:
    """``(document, lexical, retrieval_preamble)`` of every searched row standing for a
    table row: the child itself when it is searchable, else its indexed rows."""
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT document, lexical::text, cmetadata->>'retrieval_preamble'"
                f" FROM {store.qualified_name}"
                " WHERE embedding IS NOT NULL AND cmetadata->>'layer' = 'table_row'"
            )
        )
        return [(r[0], r[1], r[2]) for r in rows]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("strategy", ["default", "plain"])
async def test_a_table_row_is_searched_with_its_caption_and_headers(
    store: PgVectorStore, embeddings: Any, tmp_path: Path, case: str, strategy: str
) -> None:
    kw: dict[str, Any] = {} if strategy == "default" else {"indexer": None}
    await _ingest(store, embeddings, tmp_path, case, **kw)
    _, _, headers, word, lexeme = CASES[case]
    searched = await _searched_rows(store)
    assert searched, "the table row is searched"
    for document, lexical, preamble in searched:
        # What is embedded and BM25-indexed: the row's text, after its preamble if any.
        indexed = f"{preamble or ''}\n{document}"
        for header in headers:
            assert header in indexed, (header, indexed)
        assert f"'{lexeme}'" in lexical, lexical
    hits = await store.similarity_search(
        word, limit=3, filter={"layer": "table_row"}, search_mode="lexical"
    )
    assert hits, f"a lexical search for {word!r} finds the table row"
    assert hits[0].metadata["layer"] == "table_row"
    assert headers[-1].split(" | ")[-1] not in hits[0].content  # returned: the rows only


@pytest.mark.parametrize("spec", ["contextual", "hypothetical-questions:2", "propositions:2"])
async def test_model_backed_rows_of_a_table_row_name_its_headers(tmp_path: Path, spec: str) -> None:
    # No model is loaded to build rows; `object()` would fail loudly if one were.
    processor = LateChunkingProcessor(section_parents=True, embedding=object())  # type: ignore[arg-type]
    h = processor.build_hierarchy(MARKDOWN, "planets.md", {}, structure=read_markdown(MARKDOWN))
    llm = ScriptedLLM(
        lambda chunk, doc: (
            '["Which is fourth?", "Which is second?"]'
            if spec != "contextual"
            else "From the survey of the planets."
        )
    )
    model = GuardedModel(llm, cache=PromptCache(tmp_path / "replies.sqlite3"), backoff_s=0.0)
    indexer = StrategyIndexer(parse_strategy(spec), model)
    try:
        rows = (await indexer.index_rows([h]))["planets.md"]
    finally:
        await indexer.close()
    table = [r for r in rows if r.metadata["layer"] == "table_row"]
    assert table
    for row in table:
        assert "Columns: Body | Seniority" in row.page_content, row.page_content
        assert "Table: Orbits of the inner planets:" in row.page_content
    prose = [r for r in rows if r.metadata["layer"] != "table_row"]
    assert prose and not any("Columns:" in r.page_content for r in prose)

"""The spec's examples run unchanged but for the import root (``parrot.`` -> ``parrot_parents.``).

The snippets are read from the spec in ``../shared/seeds`` (skipped when it is absent), so
this test follows the spec's own text. The DSN placeholder ``postgresql://...`` is the one
other substitution: it becomes the test server's DSN.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from langchain_core.documents import Document

from tests.conftest import REPO_ROOT

SEED = REPO_ROOT.parent / "shared" / "seeds" / "parent-child-retrieval.txt"


def _block(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i)]


def _snippets() -> dict[str, str]:
    text = SEED.read_text(encoding="utf-8")
    opt1 = _block(text, "Option 1", "Option 2")
    opt1 = opt1[opt1.index("from parrot.") :]
    opt3 = _block(text, "Option 3", "Resolution order")
    opt3 = "\n".join(line for line in opt3.splitlines() if line.startswith(("ctx,", "#")))
    inc = text[text.index("results = await store.similarity_search(") :]
    inc = inc[: inc.index(")") + 1]
    return {"option1": opt1.strip(), "option3": opt3.strip(), "include_parents": inc}


def _port(code: str, dsn: str) -> str:
    code = re.sub(r"\bparrot\.", "parrot_parents.", code)
    return code.replace('"postgresql://..."', repr(dsn))


async def _run(code: str, env: dict) -> None:
    body = "async def __snippet():\n" + textwrap.indent(code, "    ") + "\n    return locals()"
    exec(compile(body, "<seed snippet>", "exec"), env)
    env.update(await env["__snippet"]())


@pytest.mark.skipif(not SEED.exists(), reason="../shared/seeds is not beside the checkout")
async def test_seed_options_1_and_3_and_include_parents_run(pg_dsn: str) -> None:
    snippets = _snippets()
    assert "InTableParentSearcher" in snippets["option1"]
    env: dict = {}
    await _run(_port(snippets["option1"], pg_dsn), env)
    bot, store = env["bot"], env["store"]
    try:
        from parrot_parents.loaders import TextLoader

        await store.connect()
        text = (
            "Payroll runs on the 15th and on the last business day. " * 5
            + "\n\n"
            + "Direct deposit forms are due within five days. " * 5
        )
        await TextLoader(embedding=store.embedding, child_chunk_size=120)._chunk_with_late_chunking(
            [Document(page_content=text, metadata={"document_id": "seed-handbook"})],
            vector_store=store,
        )
        env["question"] = "How will I be paid?"
        env["query"] = "payroll"
        await _run(_port(snippets["option3"], pg_dsn), env)
        # The last per-call override in the spec's Option 3 opts in to expansion.
        assert env["meta"]["expanded"] is True
        assert env["meta"]["expand_to_parent"] is True
        assert "Direct deposit" in env["ctx"]
        await _run(_port(snippets["include_parents"], pg_dsn), env)
        assert len(env["results"]) >= 1
        assert bot.expand_to_parent is True and bot.context_search_limit == 5
    finally:
        await store.drop()
        await store.close()

"""``ask --json`` on the shipped examples: every passage says where it lies (section path,
ordinals, layer) and, in hybrid search, shows the fused score that ordered it beside the
dense and lexical ranks and scores that made it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parrot_parents.cli.main import main
from parrot_parents.stores.search_options import Fusion
from tests.conftest import Ingested

QUESTION = "How will I be paid, and when?"
BRANCH_KEYS = {"dense_rank", "dense_score", "lexical_rank", "lexical_score"}
SECTION_KEYS = {"section_path", "section_ordinal", "ordinal", "layer", "page", "page_end"}


def _ask(capsys: pytest.CaptureFixture[str], common: list[str], *flags: str) -> dict[str, Any]:
    assert main(["ask", QUESTION, *common, "--json", *flags]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _rrf(item: dict[str, Any]) -> float:
    k = Fusion().rrf_k
    return sum(1.0 / (k + r) for r in (item["dense_rank"], item["lexical_rank"]) if r is not None)


def test_ask_shows_sections_and_the_scores_behind_the_hybrid_order(
    pg_dsn: str, example_corpus: Ingested, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--collection", example_corpus.collection, "--dsn", pg_dsn]

    expanded = _ask(capsys, common, "--expand")
    first = expanded["passages"][0]
    assert first["section_path"][-1] == "4. Pay and Payroll"
    assert first["section_ordinal"] == 4
    assert first["layer"] == "section" and isinstance(first["ordinal"], int)
    # Markdown has no pages.
    assert first["page"] is None and first["page_end"] is None
    assert all(set(p) >= SECTION_KEYS | BRANCH_KEYS for p in expanded["passages"])
    # The plain output says it too.
    assert main(["ask", QUESTION, *common, "--expand"]) == 0
    assert " › 4. Pay and Payroll\n" in capsys.readouterr().out

    children = _ask(capsys, common, "--no-expand")
    assert children["meta"]["search_mode"] == "hybrid"  # the default
    passages = children["passages"]
    assert len(passages) > 1
    scores = [p["score"] for p in passages]
    assert scores == sorted(scores, reverse=True), scores
    for p in passages:
        assert p["dense_rank"] is not None or p["lexical_rank"] is not None
        assert (p["dense_rank"] is None) == (p["dense_score"] is None)
        assert (p["lexical_rank"] is None) == (p["lexical_score"] is None)
        # The fused value, not a cosine similarity: what the ranks make.
        assert p["score"] == pytest.approx(_rrf(p), rel=1e-12)
        assert p["dense_score"] is None or -1.0 <= p["dense_score"] <= 1.0
        assert p["lexical_score"] is None or p["lexical_score"] > 0
    assert any(p["section_path"] for p in passages)
    kept = children["meta"]["children"]
    assert [c["score"] for c in kept] == scores
    assert all(set(c) >= BRANCH_KEYS for c in kept)

    # Dense search: the score is the cosine similarity, and the dense one.
    dense = _ask(capsys, common, "--no-expand", "--search-mode", "dense")["passages"]
    assert all(p["score"] == p["dense_score"] and p["lexical_rank"] is None for p in dense)
    assert [p["dense_rank"] for p in dense] == list(range(1, len(dense) + 1))

    # With a budget, a window cut from a parent holds only some of its hits: it shows the
    # score and ranks of the best hit it holds, never those of a hit elsewhere.
    packed = _ask(capsys, common, "--expand", "--budget", "1000")
    by_id = {c["id"]: c for c in packed["meta"]["children"]}
    for p in packed["passages"]:
        held = [by_id[c] for c in p["child_ids"] if c in by_id]
        if held:
            top = max(held, key=lambda c: c["score"])
            assert (p["score"], p["dense_rank"], p["lexical_rank"]) == (
                top["score"],
                top["dense_rank"],
                top["lexical_rank"],
            ), (p["id"], p["child_ids"])

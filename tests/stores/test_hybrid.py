"""Lexical (BM25 in SQL) and hybrid search over the children, on the real database."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.search.hybrid import (
    BM25_B,
    BM25_K1,
    CANDIDATES,
    EXACT_CANDIDATES,
    CandidateRule,
)
from parrot_parents.stores.search_options import MIN_FUSION_DEPTH, Fusion, fusion_depth
from parrot_parents.sync import run_sync
from tests.conftest import unique_table

DOCS = {
    "msa": "The master services agreement may be ended by either party. The notice period "
    "is thirty days, given in writing to the other party.",
    "pay": "Salaries are paid monthly on the last working day. Overtime is paid with the "
    "next salary at one and a half times the hourly rate.",
    "leave": "Employees have twenty-five days of paid leave a year. Unused leave days may "
    "be carried over until the end of March.",
    "cars": "Company cars are assigned to field staff. Mileage for private cars is "
    "reimbursed at thirty cents per kilometre.",
}


async def _ingest(store: PgVectorStore, embeddings: Any, docs: dict[str, str] = DOCS) -> None:
    # Plain children: the BM25 reference below scores the children's own text.
    await TextLoader(child_chunk_size=80, embedding=embeddings, indexer=None).chunk_documents(
        [Document(page_content=t, metadata={"document_id": d}) for d, t in docs.items()],
        vector_store=store,
    )


async def _stats(store: PgVectorStore) -> tuple[dict[str, int], tuple[int, int]]:
    engine, _ = await store.ready()
    lex = store.lexical
    async with engine.connect() as conn:
        df = dict(
            (await conn.execute(text(f"SELECT lexeme, df FROM {lex.q(lex.lexicon_name)}"))).all()
        )
        n, total = (
            await conn.execute(text(f"SELECT n, total_len FROM {lex.q(lex.stats_name)}"))
        ).one()
    return {k: int(v) for k, v in df.items()}, (int(n), int(total))


async def _recount(store: PgVectorStore) -> tuple[dict[str, int], tuple[int, int]]:
    """The statistics computed from scratch (what the triggers must keep)."""
    engine, _ = await store.ready()
    t = store.qualified_name
    async with engine.connect() as conn:
        df = dict(
            (
                await conn.execute(
                    text(
                        f"SELECT u.lexeme, count(*) FROM {t} r, unnest(r.lexical) u"
                        " WHERE r.lexical IS NOT NULL GROUP BY u.lexeme"
                    )
                )
            ).all()
        )
        n, total = (
            await conn.execute(
                text(
                    f"SELECT count(*), coalesce(sum(length(lexical)), 0) FROM {t}"
                    " WHERE lexical IS NOT NULL"
                )
            )
        ).one()
    return {k: int(v) for k, v in df.items()}, (int(n), int(total))


async def test_lexical_search_finds_the_rare_terms_first(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    (top, *_) = await store.similarity_search("notice period", limit=3, search_mode="lexical")
    assert "notice period" in top.content and top.metadata["document_id"] == "msa"
    assert top.lexical_rank == 1 and top.lexical_score and top.lexical_score > 0
    assert top.score is None  # no query vector in lexical mode


async def _reference(
    store: PgVectorStore, query: str, length: str = "lexemes"
) -> tuple[dict[str, float], dict[str, dict[str, int]], set[str]]:
    """BM25 of every child for ``query`` in Python (scores > 0), the children's tf and the
    query's lexemes. ``length``: a row's length in distinct ``lexemes`` (the SQL
    backend's) or in ``tokens``, its positions (pg_textsearch's)."""
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    f"SELECT id, lexical::text FROM {store.qualified_name}"
                    " WHERE lexical IS NOT NULL"
                )
            )
        ).all()
        tsquery = (
            await conn.execute(text("SELECT to_tsvector('english', :q)::text"), {"q": query})
        ).scalar_one()
    docs = {}
    for rid, tsv in rows:  # 'lexeme':1,4 'other':2
        docs[rid] = {m[0]: len(m[1].split(",")) for m in re.findall(r"'([^']+)':([\d,A-D]+)", tsv)}
    terms = set(re.findall(r"'([^']+)'", tsquery))
    n = len(docs)
    if not n:
        return {}, docs, terms

    def dl(tf: dict[str, int]) -> int:
        return len(tf) if length == "lexemes" else sum(tf.values())

    avgdl = sum(dl(d) for d in docs.values()) / n
    expected = {}
    for rid, tf in docs.items():
        score = 0.0
        for term in terms & tf.keys():
            df = sum(1 for d in docs.values() if term in d)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = 1 - BM25_B + BM25_B * dl(tf) / avgdl
            score += idf * tf[term] * (BM25_K1 + 1) / (tf[term] + BM25_K1 * norm)
        if score > 0:
            expected[rid] = score
    return expected, docs, terms


@pytest.mark.parametrize("rule", [CANDIDATES, EXACT_CANDIDATES], ids=["default", "exact"])
async def test_bm25_scores_match_a_python_reference(
    sql_store: PgVectorStore, embeddings, rule: CandidateRule
) -> None:
    store = sql_store
    # The default candidate rule is exact below 5,000 children.
    store.lexical_candidates = rule
    await _ingest(store, embeddings)
    expected, _, _ = await _reference(store, "paid leave days")
    got = await store.similarity_search("paid leave days", limit=50, search_mode="lexical")
    assert {r.id: pytest.approx(r.lexical_score, rel=1e-9) for r in got} == expected
    assert [r.lexical_score for r in got] == sorted((r.lexical_score for r in got), reverse=True)


async def test_a_bounded_rule_scores_the_rarest_lexemes_and_pairs_of_the_others(
    sql_store: PgVectorStore, embeddings
) -> None:
    store = sql_store
    await _ingest(store, embeddings)
    query = "paid leave days"
    expected, docs, terms = await _reference(store, query)
    df = {t: sum(1 for d in docs.values() if t in d) for t in terms}
    held = sorted((t for t in terms if df[t]), key=lambda t: (df[t], t))
    assert len(held) == 3 and df[held[0]] < df[held[-1]]

    def holding(test: Any) -> dict[str, float]:
        return {rid: s for rid, s in expected.items() if test(docs[rid].keys())}

    async def search(rule: CandidateRule, **kw: Any) -> list[Any]:
        store.lexical_candidates = rule
        return await store.similarity_search(query, limit=50, search_mode="lexical", **kw)

    def scores(got: list[Any]) -> dict[str, Any]:
        return {r.id: pytest.approx(r.lexical_score, rel=1e-9) for r in got}

    bounded = CandidateRule(budget=df[held[0]], pairs=0, exact_below=0, cap=None)
    # Alone: the rarest lexeme (its df within the budget); the candidates are scored with
    # all three lexemes, and the rows say the search was bounded.
    got = await search(bounded)
    rarest = holding(lambda t: held[0] in t)
    assert rarest and len(rarest) < len(expected)
    assert scores(got) == rarest and all(r.lexical_bounded for r in got)
    # The budget is a sum of document frequencies, rarest first.
    got = await search(replace(bounded, budget=df[held[0]] + df[held[1]]))
    assert scores(got) == holding(lambda t: bool(set(held[:2]) & t))
    # Of the lexemes not taken alone, the ``pairs`` rarest bring the children holding two.
    got = await search(replace(bounded, pairs=2))
    assert scores(got) == holding(lambda t: held[0] in t or set(held[1:]) <= t)
    got = await search(replace(bounded, budget=0, pairs=2))
    assert scores(got) == holding(lambda t: set(held[:2]) <= t)
    # Pairs are taken fewest expected children first (df_a * df_b), while their sum
    # stays within the pair budget, the first always.
    ordered = sorted(
        ((df[a] * df[b], a, b) for i, a in enumerate(held) for b in held[i + 1 :]),
    )
    got = await search(replace(bounded, budget=0, pairs=3, pair_budget=0))
    first = set(ordered[0][1:])
    assert scores(got) == holding(lambda t: first <= t)
    # No more than ``cap`` candidates are scored.
    got = await search(replace(bounded, cap=1))
    assert len(got) == 1 and got[0].id in rarest
    # Exact: a collection of at most ``exact_below`` children, or every lexeme within the
    # budget; the rows say so.
    for rule in (
        replace(bounded, exact_below=len(docs)),
        replace(bounded, budget=sum(df.values())),
    ):
        got = await search(rule)
        assert scores(got) == expected and not any(r.lexical_bounded for r in got)
    # A query with a single lexeme in the collection takes it alone whatever its frequency.
    store.lexical_candidates = replace(bounded, budget=0)
    got = await store.similarity_search(held[-1], limit=50, search_mode="lexical")
    assert {r.id for r in got} == set(holding(lambda t: held[-1] in t))
    # Under a metadata filter the search stays exact (the filter may leave only children
    # holding common lexemes).
    everything = await search(EXACT_CANDIDATES)
    owner = {r.id: r.metadata["document_id"] for r in everything}
    for doc in set(owner.values()):
        got = await search(replace(bounded, budget=0), filter={"document_id": doc})
        want = {rid: s for rid, s in expected.items() if owner.get(rid) == doc}
        assert want and scores(got) == want
    # ``meta.lexical`` says which ranking ran.
    bot = Chatbot(store=store)
    for rule, candidates in ((bounded, "bounded"), (CANDIDATES, "exact")):
        store.lexical_candidates = rule
        meta = (await bot.retrieve(query, search_mode="hybrid")).meta
        assert meta.lexical == {"backend": "sql", "candidates": candidates}


async def test_hybrid_fuses_both_ranks_and_filters_both_branches(
    store: PgVectorStore, embeddings
) -> None:
    await _ingest(store, embeddings)
    rows = await store.similarity_search("thirty", limit=4, search_mode="hybrid")
    assert len(rows) == 4
    assert any(r.lexical_rank is not None for r in rows)
    assert any(r.dense_rank is not None for r in rows)
    assert all(r.score is not None for r in rows)  # cosine similarity for every row
    only_cars = await store.similarity_search(
        "thirty", limit=2, search_mode="hybrid", filter={"document_id": "cars"}
    )
    assert len(only_cars) == 2  # exactly limit under a selective filter
    assert {r.metadata["document_id"] for r in only_cars} == {"cars"}
    with pytest.raises(ConfigurationError, match="search_mode must be one of"):
        await store.similarity_search("x", search_mode="pg_textsearch")  # type: ignore[arg-type]


async def test_fusion_weights_decide(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    dense = await store.similarity_search("kilometre money", limit=5)
    lexical = await store.similarity_search("kilometre money", limit=5, search_mode="lexical")
    only_dense = await store.similarity_search(
        "kilometre money", limit=5, search_mode="hybrid", fusion=Fusion(lexical_weight=0.0)
    )
    only_lexical = await store.similarity_search(
        "kilometre money", limit=5, search_mode="hybrid", fusion=Fusion(dense_weight=0.0)
    )
    assert [r.id for r in only_dense] == [r.id for r in dense]
    assert [r.id for r in only_lexical][: len(lexical)] == [r.id for r in lexical]


async def test_parents_stay_out_of_the_lexical_index(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        parents_indexed = (
            await conn.execute(
                text(
                    f"SELECT count(*) FROM {store.qualified_name}"
                    " WHERE embedding IS NULL AND lexical IS NOT NULL"
                )
            )
        ).scalar_one()
    assert parents_indexed == 0
    rows = await store.similarity_search("salaries", limit=50, search_mode="lexical")
    assert rows and all(r.metadata["is_chunk"] for r in rows)


_WORDS = st.sampled_from(
    [
        "notice",
        "period",
        "salary",
        "leave",
        "cars",
        "mileage",
        "paid",
        "days",
        "thirty",
        "the",
        "of",
        "agreement",
    ]
)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "delete"]),
        st.sampled_from(["a", "b", "c"]),
        st.lists(_WORDS, min_size=1, max_size=30).map(" ".join),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_statistics_stay_exact_under_writes_replaces_and_deletes(
    pg_dsn: str, embeddings, ops: list[tuple[str, str, str]]
) -> None:
    async def scenario() -> None:
        store = PgVectorStore(dsn=pg_dsn, table=unique_table("lex"), embedding=embeddings)
        await store.connect()  # a delete before any write finds the collection
        loader = TextLoader(child_chunk_size=40, embedding=embeddings, late_chunking=False)
        try:
            for op, doc, words in ops:
                if op == "put":
                    await loader.chunk_documents(
                        [Document(page_content=words, metadata={"document_id": doc})],
                        vector_store=store,
                    )
                else:
                    await store.delete(doc)
                assert await _stats(store) == await _recount(store)
            # an upsert of existing rows (same ids, new text) goes through the UPDATE path
            await store.add_documents(
                [
                    Document(
                        id="x#c:0-4",
                        page_content="leave leave",
                        metadata={
                            "document_id": "x",
                            "start_index": 0,
                            "end_index": 4,
                            "parent_document_id": "p",
                        },
                    )
                ]
            )
            await store.add_documents(
                [
                    Document(
                        id="x#c:0-4",
                        page_content="salary",
                        metadata={
                            "document_id": "x",
                            "start_index": 0,
                            "end_index": 4,
                            "parent_document_id": "p",
                        },
                    )
                ]
            )
            assert await _stats(store) == await _recount(store)
        finally:
            await store.drop()
            await store.close()

    run_sync(scenario())


async def test_an_old_collection_without_a_lexical_index_degrades_to_dense(
    store: PgVectorStore, embeddings, pg_dsn: str
) -> None:
    await _ingest(store, embeddings)
    engine, _ = await store.ready()
    async with engine.begin() as conn:  # what a collection created before hybrid search looks like
        await conn.execute(text(f"ALTER TABLE {store.qualified_name} DROP COLUMN lexical"))
    old = PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings, create=False)
    try:
        bot = Chatbot(store=old, owns_store=False)
        r = await bot.retrieve("notice period", search_mode="hybrid", limit=3)
        assert len(r.passages) == 3 and r.meta["search_mode"] == "dense"
        (fallback,) = r.meta["fallbacks"]
        assert fallback["stage"] == "lexical" and "no lexical index" in fallback["error"]
        # Opening it for writing gives it the index, statistics included.
        again = PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings)
        await again.connect()
        assert again.text_search_config == "english"
        assert await _stats(again) == await _recount(again)
        rows = await again.similarity_search("notice period", limit=1, search_mode="lexical")
        assert "notice period" in rows[0].content
        await again.close()
    finally:
        await old.close()


async def test_the_text_search_configuration_is_recorded(pg_dsn: str, embeddings) -> None:
    table = unique_table("simple")
    store = PgVectorStore(
        dsn=pg_dsn, table=table, embedding=embeddings, text_search_config="simple"
    )
    await store.connect()
    try:
        await _ingest(store, embeddings, {"x": "Les employés ont des congés payés."})
        reopened = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False)
        await reopened.connect()
        assert reopened.text_search_config == "simple"
        rows = await reopened.similarity_search("congés", limit=1, search_mode="lexical")
        assert rows and "congés" in rows[0].content  # 'simple' keeps the word as written
        await reopened.close()
        other = PgVectorStore(
            dsn=pg_dsn, table=table, embedding=embeddings, text_search_config="english"
        )
        with pytest.raises(ConfigurationError, match="'simple' configuration, not 'english'"):
            await other.connect()
        with pytest.raises(ConfigurationError, match="text search configuration"):
            PgVectorStore(dsn=pg_dsn, table=table, text_search_config="english; drop")
    finally:
        await store.drop()
        await store.close()


async def test_meta_reports_both_ranks(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    bot = Chatbot(store=store, owns_store=False, search_mode="hybrid")
    r = await bot.retrieve("notice period thirty days", limit=3)
    assert r.meta["search_mode"] == "hybrid"
    children = r.meta["children"]
    assert {"dense_rank", "lexical_rank"} <= set(children[0])
    assert any(c["lexical_rank"] == 1 for c in children)
    note = await bot.retrieve("x", search_mode="dense", rrf_k=10, limit=1)
    assert note.meta["notes"] == ["rrf_k ignored: search_mode is 'dense'"]


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
async def test_a_reused_statement_answers_each_question_afresh(
    store: PgVectorStore, embeddings, mode: str
) -> None:
    """Statements are built once per shape, a filter's once per structure; every run
    binds its own question, vector and filter values."""
    await _ingest(store, embeddings)
    first = await store.similarity_search("notice period thirty days", limit=2, search_mode=mode)
    second = await store.similarity_search("paid leave carried over", limit=2, search_mode=mode)
    assert first[0].metadata["document_id"] == "msa"
    assert second[0].metadata["document_id"] == "leave"
    cached = len(store.connections.statements)
    assert cached >= 1
    sizes = []
    for doc in ("pay", "cars"):
        hits = await store.similarity_search(
            "paid cars", limit=2, search_mode=mode, filter={"document_id": doc}
        )
        assert hits and {h.metadata["document_id"] for h in hits} == {doc}
        sizes.append(len(store.connections.statements))
    assert sizes[0] == sizes[1] > cached


async def test_a_store_reopened_on_a_recreated_collection_builds_its_statements_again(
    pg_dsn: str, embeddings
) -> None:
    """The statements a store built name its text-search configuration; a collection
    dropped and created again with another one must not be searched with the old one
    (unfiltered searches found nothing while filtered ones, built afresh, did)."""
    table = unique_table("recreated")
    texts = {"a": "The cat and the dog. " * 5, "b": "Payroll runs twice a month. " * 5}
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    await store.connect()
    try:
        await _ingest(store, embeddings, texts)
        assert not await store.similarity_search("the and", search_mode="lexical")  # stopwords
        await store.drop()
        await store.close()
        other = PgVectorStore(
            dsn=pg_dsn, table=table, embedding=embeddings, text_search_config="simple"
        )
        await other.connect()
        await _ingest(other, embeddings, texts)
        await other.close()
        await store.connect()
        assert store.text_search_config == "simple"
        unfiltered = await store.similarity_search("the and", search_mode="lexical")
        filtered = await store.similarity_search(
            "the and", search_mode="lexical", filter={"document_id": "a"}
        )
        assert filtered and {h.id for h in filtered} <= {h.id for h in unfiltered}
    finally:
        await store.drop()
        await store.close()


async def test_a_smaller_limit_returns_the_first_rows_of_the_same_fused_ranking(
    store: PgVectorStore, embeddings
) -> None:
    # Each branch gives the fusion at least MIN_FUSION_DEPTH candidates: a child's rank in
    # the other list is not lost to a short list at a small limit.
    more = {
        "travel": "Train tickets are booked by the office. Hotel nights are paid up to one "
        "hundred euros, and meals with the daily allowance.",
        "laptops": "Laptops are replaced every three years. A broken screen is repaired by "
        "the service desk within five working days.",
        "parking": "The car park opens at seven. Staff park on the upper deck and visitors "
        "on the ground floor near the entrance.",
    }
    await _ingest(store, embeddings, {**DOCS, **more})
    assert await store.count(include_parents=False) > MIN_FUSION_DEPTH
    for question in ("When is overtime paid?", "thirty days notice", "private car mileage"):
        full = await store.similarity_search(question, limit=MIN_FUSION_DEPTH, search_mode="hybrid")
        ranked = [(r.id, r.fused_score, r.dense_rank, r.lexical_rank) for r in full]
        for limit in range(1, MIN_FUSION_DEPTH):
            cut = await store.similarity_search(question, limit=limit, search_mode="hybrid")
            got = [(r.id, r.fused_score, r.dense_rank, r.lexical_rank) for r in cut]
            assert got == ranked[:limit], (question, limit)
    assert fusion_depth(3, None) == MIN_FUSION_DEPTH
    assert fusion_depth(30, None) == 30
    assert fusion_depth(3, Fusion(depth=5)) == 5


_WORDS = sorted(set(re.findall(r"[a-z]{3,}", " ".join(DOCS.values()).lower())))
_RULES = st.builds(
    CandidateRule,
    budget=st.integers(0, 12),
    pairs=st.integers(0, 4),
    pair_budget=st.integers(0, 3),
    exact_below=st.just(0),
    cap=st.none() | st.integers(1, 6),
)
_BOUNDED: dict[str, tuple[PgVectorStore, Any]] = {}


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5), rule=_RULES)
def test_a_bounded_search_scores_exactly_the_candidates_its_rule_names(
    pg_dsn: str, embeddings, words: list[str], rule: CandidateRule
) -> None:
    query = " ".join(words)

    async def scenario() -> None:
        # One collection for every example (ingesting it is the slow part).
        if pg_dsn not in _BOUNDED:
            store = PgVectorStore(
                dsn=pg_dsn,
                table=unique_table("bounded"),
                embedding=embeddings,
                lexical_backend="sql",
            )
            await _ingest(store, embeddings)
            _BOUNDED[pg_dsn] = (store, None)
        store = _BOUNDED[pg_dsn][0]
        expected, docs, terms = await _reference(store, query)
        df = {t: sum(1 for d in docs.values() if t in d) for t in terms}
        held = sorted((t for t in terms if df[t]), key=lambda t: (df[t], t))
        # The rule, in Python: lexemes alone within the budget (rarest first), then pairs.
        total, alone, rest = 0, set(), []
        for t in held:
            total += df[t]
            (alone.add(t) if total <= rule.budget or len(held) == 1 else rest.append(t))
        sized = sorted(
            (df[a] * df[b], a, b)
            for i, a in enumerate(rest[: rule.pairs])
            for b in rest[i + 1 : rule.pairs]
        )
        pairs, expected_children = [], 0.0
        for size, a, b in sized:
            expected_children += size / len(docs)
            if not pairs or expected_children <= rule.pair_budget:
                pairs.append({a, b})
        named = {
            rid
            for rid, tf in docs.items()
            if alone & tf.keys() or any(p <= tf.keys() for p in pairs)
        }
        store.lexical_candidates = rule
        got = await store.similarity_search(query, limit=50, search_mode="lexical")
        # Every row is a named candidate scored with every query lexeme, best first.
        assert {r.id for r in got} <= named
        for r in got:
            assert r.lexical_score == pytest.approx(expected[r.id], rel=1e-9)
            assert r.lexical_bounded is bool(rest)
        assert [r.lexical_score for r in got] == sorted(
            (r.lexical_score for r in got), reverse=True
        )
        if rule.cap is None:
            assert {r.id for r in got} == named & expected.keys()
        else:
            assert len(got) <= rule.cap

    run_sync(scenario())

"""A bot's scope: every search holds to it, a call's filter only narrows it, and expansion
(parents, windows, merges) and packing never return a row outside it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.retrieval.scope import scoped_filter, validate_scope
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.partition_keys import fixed_value, fixed_values, only_key
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.markers import INDEXES
from tests.conftest import unique_table

TOPICS = ["travel", "meal", "phone", "training", "parking", "book"]
DOCS = [
    Document(
        page_content="\n\n".join(
            f"Section {i}. The {w} policy of {name} says employees may claim {w} costs up to "
            f"{i * 10} euros. Claims for {w} need a receipt and a manager's approval within "
            f"{i} days."
            for i, w in enumerate(TOPICS * 2)
        ),
        metadata={"document_id": name},
    )
    for name in ("north", "south")
]

#: Every row gets a tenant and a tier of its own (an indexed row its target's), so that a
#: parent, its children and a window's neighbours often lie on different sides of a scope.
SPREAD = """
UPDATE {t} SET cmetadata = cmetadata || jsonb_build_object(
    'tenant', (ARRAY['a', 'b', 'c'])[1 + abs(hashtext(id)) % 3],
    'tier', 1 + abs(hashtext(id || ':tier')) % 3);
UPDATE {t} AS i SET cmetadata = i.cmetadata || jsonb_build_object(
    'tenant', c.cmetadata -> 'tenant', 'tier', c.cmetadata -> 'tier')
FROM {t} AS c WHERE c.id = i.cmetadata ->> '{indexes}';
"""


def _collection(pg_dsn: str, embeddings: Any, prefix: str, key: str | None) -> Iterator[str]:
    """Two documents in parents and children, each row in a tenant and a tier, and with
    ``key``, that partition key given after the rows were spread (as an existing
    collection gets one); built once for the module (on its own event loop), dropped
    after: the table's name."""
    table = unique_table(prefix)

    async def build() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await TextLoader(child_chunk_size=120, embedding=embeddings).chunk_documents(
                DOCS,
                vector_store=store,
                parent_chunk_threshold_tokens=300,
                parent_chunk_size_tokens=300,
                parent_chunk_overlap_tokens=0,
            )
            async with store.engine.begin() as conn:
                await spread_rows(conn, store.qualified_name)
        if key is not None:
            async with PgVectorStore(
                dsn=pg_dsn, table=table, embedding=embeddings, partition_key=key
            ):
                pass

    async def drop() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await store.drop()

    asyncio.run(build())
    yield table
    asyncio.run(drop())


@pytest.fixture(scope="module")
def spread(pg_dsn: str, embeddings: Any) -> Iterator[str]:
    yield from _collection(pg_dsn, embeddings, "scope", None)


@pytest.fixture(scope="module")
def keyed_spread(pg_dsn: str, embeddings: Any) -> Iterator[str]:
    """The same collection with the partition key ``tenant``: each tenant's rows with an
    HNSW and a GIN index of their own."""
    yield from _collection(pg_dsn, embeddings, "scopekey", "tenant")


@pytest.fixture
async def keyed_store(pg_dsn: str, embeddings: Any, keyed_spread: str) -> Any:
    s = PgVectorStore(dsn=pg_dsn, table=keyed_spread, embedding=embeddings, create=False)
    await s.connect()
    assert s.partition_key == "tenant"
    yield s
    await s.close()


@pytest.fixture
async def store(pg_dsn: str, embeddings: Any, spread: str) -> Any:
    s = PgVectorStore(dsn=pg_dsn, table=spread, embedding=embeddings, create=False)
    await s.connect()
    yield s
    await s.close()


def returned_ids(data: dict[str, Any]) -> set[str]:
    """Every row a retrieval (as ``/context`` answers it: ``passages``, ``meta``) handed
    over or read into a passage."""
    meta = data["meta"]
    ids = {c["id"] for c in meta["children"]}
    for p in data["passages"]:
        ids.update(p.get("child_ids") or [])
        if p["kind"] in ("child", "parent", "parent_chunk"):
            ids.add(p["id"])
    for window in (meta.get("windows") or {}).values():
        ids.update(window)
    ids.update(meta.get("folded") or {})
    return ids


async def spread_rows(conn: Any, table: str) -> None:
    """Give every row of ``table`` (quoted, qualified) a tenant and a tier (:data:`SPREAD`)."""
    for sql in SPREAD.format(t=table, indexes=INDEXES).split(";"):
        if sql.strip():
            await conn.exec_driver_sql(sql)


SCOPES = st.sampled_from(
    [
        {"tenant": "a"},
        {"tenant": {"$in": ["a", "b"]}},
        {"tier": {"$gte": 2}},
        {"tenant": {"$ne": "c"}},
        {"$or": [{"tenant": "b"}, {"tier": 1}]},
        {"$and": [{"tenant": {"$in": ["a", "c"]}}, {"tier": {"$lte": 2}}]},
    ]
)
FILTERS = st.none() | st.sampled_from(
    [
        {"tenant": "a"},
        {"tenant": "c"},
        {"tier": 3},
        {"document_id": "south"},
        {"$or": [{"tenant": "b"}, {"tenant": "c"}]},
        {"$not": {"tier": 2}},
    ]
)


#: A retrieval takes longer than hypothesis's deadline, from a module-scoped collection.
SLOW: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}
#: A retrieval's scope, call filter and options.
CASES: dict[str, Any] = {
    "scope": SCOPES,
    "flt": FILTERS,
    "expand": st.booleans(),
    "mode": st.sampled_from(["parent", "window:1", "window:3", "auto_merge:0.3"]),
    "budget": st.sampled_from([None, 700]),
    "search_mode": st.sampled_from(["hybrid", "dense", "lexical"]),
    "limit": st.integers(1, 8),
    "topic": st.sampled_from(TOPICS),
}


@settings(max_examples=20, **SLOW)
@given(case=st.fixed_dictionaries(CASES))
@example(
    case={
        "scope": {"tenant": "a"},
        "flt": {"tenant": "c"},
        "expand": True,
        "mode": "parent",
        "budget": None,
        "search_mode": "hybrid",
        "limit": 8,
        "topic": "phone",
    }
)
async def test_nothing_returned_lies_outside_the_scope(
    store: PgVectorStore, case: dict[str, Any]
) -> None:
    await check_scope(store, **case)


def _case(**given: Any) -> dict[str, Any]:
    """An explicit case: a hybrid, expanded retrieval of 8 about phones, but for ``given``."""
    case = {
        "expand": True,
        "mode": "window:1",
        "budget": 700,
        "search_mode": "hybrid",
        "limit": 8,
        "topic": "phone",
    }
    return {**case, **given}


#: A scope listing two tenants, whose indexes a dense branch scans each.
TWO_TENANTS = {"tenant": {"$in": ["a", "b"]}}


@settings(max_examples=8, **SLOW)
@given(case=st.fixed_dictionaries(CASES))
@example(case=_case(scope={"tenant": "a"}, flt={"tier": 3}))
@example(
    case=_case(
        scope=TWO_TENANTS,
        flt=None,
        expand=False,
        mode="parent",
        budget=None,
        search_mode="lexical",
        limit=5,
    )
)
@example(case=_case(scope=TWO_TENANTS, flt=None))
async def test_nothing_returned_lies_outside_the_scope_of_a_partitioned_collection(
    keyed_store: PgVectorStore, case: dict[str, Any]
) -> None:
    r = await check_scope(keyed_store, **case)
    # A scope or filter that fixes the tenant ranks through that tenant's own indexes, and
    # one that reads the tenant alone through those of the tenants it lists (a dense
    # branch's: lexical search alone has none to scan).
    both = scoped_filter(case["scope"], case["flt"])
    listed = case["search_mode"] != "lexical" and only_key(both, "tenant")
    through = fixed_value(both, "tenant") is not None or (
        listed and fixed_values(both, "tenant") is not None
    )
    plan = r.meta.to_dict().get("filter_plan") or {}
    assert plan.get("search", "").startswith("partition") == through, plan


def scoped_bot(store: PgVectorStore, *, expand: bool, scope: dict[str, Any] | None) -> Chatbot:
    """A bot over ``store`` that reads parents from its table, confined to ``scope``."""
    return Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=expand,
        scope=scope,
        owns_store=False,
    )


async def check_scope(
    store: PgVectorStore,
    scope: dict[str, Any],
    flt: dict[str, Any] | None,
    expand: bool,
    mode: str,
    budget: int | None,
    search_mode: str,
    limit: int,
    topic: str,
) -> Any:
    """One retrieval of a bot scoped to ``scope`` with the call's ``flt``: every row it
    returned lies in the scope, its children in the scope and the filter, and what
    expansion held back outside the scope; the retrieval."""
    bot = scoped_bot(store, expand=expand, scope=scope)
    r = await bot.retrieve(
        f"How long do I have to claim {topic} costs?",
        filter=flt,
        mode=mode,
        budget=budget,
        search_mode=search_mode,
        limit=limit,
    )
    ids = returned_ids({"meta": r.meta.to_dict(), "passages": [p.to_dict() for p in r.passages]})
    assert await store.ids_matching(list(ids), scope) == ids
    # The children also hold to the call's filter: it narrows.
    children = {c.id for c in r.meta.children}
    assert await store.ids_matching(list(children), scoped_filter(scope, flt) or {}) == children
    assert r.meta.to_dict()["scope"]["filter"] == scope
    # Whatever expansion held back is outside the scope, and was never handed over.
    withheld = set(r.meta.scope["withheld"]) if r.meta.scope else set()
    assert not await store.ids_matching(list(withheld), scope)
    assert not withheld & ids
    # A parent held back for a child outside the scope lies inside it, and is not handed
    # over either.
    partial = set(r.meta.scope["partial_parents"]) if r.meta.scope else set()
    assert await store.ids_matching(list(partial), scope) == partial
    assert not partial & ids
    # Nor is its text: no passage (a parent, a window, a merge) holds a child outside the
    # scope, though every row it was made of lies inside.
    spans = await child_spans(store)
    inside = await store.ids_matching(list(spans), scope)
    for p in r.passages:
        assert p.start_index is not None and p.end_index is not None
        for cid, (doc, start, end) in spans.items():
            if cid not in inside and doc == p.document_id:
                assert not p.start_index <= start < end <= p.end_index, (p.id, cid)
    return r


async def child_spans(store: PgVectorStore) -> dict[str, tuple[str, int, int]]:
    """Every child of ``store``'s collection: ``{id: (document id, start, end)}``."""
    async with store.engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            "SELECT id, cmetadata ->> 'document_id', (cmetadata ->> 'start_index')::int,"
            f" (cmetadata ->> 'end_index')::int FROM {store.qualified_name}"
            " WHERE (cmetadata ->> 'is_chunk')::boolean"
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


async def test_a_scope_narrowed_to_nothing_returns_nothing(store: PgVectorStore) -> None:
    bot = Chatbot(store=store, scope={"tenant": "a"}, owns_store=False)
    r = await bot.retrieve("phone costs", filter={"tenant": "b"})
    assert r.passages == [] and r.meta.children == []


async def test_a_parent_outside_the_scope_leaves_its_hits_as_themselves(
    store: PgVectorStore,
) -> None:
    # Every hit of tenant a whose parent is not: the hits stay, the parents are withheld.
    bot = scoped_bot(store, expand=True, scope={"tenant": "a"})
    r = await bot.retrieve("claim costs receipt approval", limit=8)
    parents = {c.parent_id for c in r.meta.children if c.parent_id}
    outside = parents - await store.ids_matching(list(parents), {"tenant": "a"})
    assert outside, "the spread should put some parents outside tenant a"
    assert outside <= set(r.meta.scope["withheld"])
    assert not outside & {p.id for p in r.passages}
    assert not r.meta.missing_parents  # held back is not missing


def test_a_scope_is_a_filter() -> None:
    assert validate_scope(None) is None
    with pytest.raises(ConfigurationError, match=r"empty scope.*--scope none"):
        validate_scope({})
    with pytest.raises(ConfigurationError, match="scope"):
        validate_scope(["tenant"])
    with pytest.raises(ConfigurationError, match=r"scope: .*\$regex"):
        validate_scope({"tenant": {"$regex": "a"}})
    with pytest.raises(ConfigurationError, match="scope"):
        Chatbot(scope={"$or": "a"})


def test_an_or_with_an_empty_clause_is_refused_as_a_whole_collection_scope() -> None:
    for widening in (
        {"$or": [{}]},
        {"$or": [{"tenant": "a"}, {}]},
        {"tenant": "a", "$and": [{"$or": [{"year": 1}, {}]}]},
    ):
        with pytest.raises(ConfigurationError, match="empty clause"):
            validate_scope(widening)
    assert validate_scope({"$or": [{"tenant": "a"}, {"tenant": "b"}]}) is not None


def test_a_call_filter_narrows_the_scope() -> None:
    scope = {"tenant": "a"}
    assert scoped_filter(None, None) is None
    assert scoped_filter(None, {"x": 1}) == {"x": 1}
    assert scoped_filter(scope, None) == scope
    assert scoped_filter(scope, {}) == scope
    # Keys of their own: one dict (every key holds), which any store's filters take.
    assert scoped_filter(scope, {"x": 1}) == {"tenant": "a", "x": 1}
    # A key of the scope's own asked again: both must hold.
    assert scoped_filter(scope, {"tenant": "b"}) == {"$and": [scope, {"tenant": "b"}]}
    assert scoped_filter({"$or": [{"a": 1}]}, {"$or": [{"b": 2}]}) == {
        "$and": [{"$or": [{"a": 1}]}, {"$or": [{"b": 2}]}]
    }
    held = validate_scope(scope)
    scope["tenant"] = "b"  # the caller's dict changes; the bot's scope does not
    assert held == {"tenant": "a"}


async def test_the_adapters_hold_to_the_bot_s_scope(store: PgVectorStore) -> None:
    from parrot_parents.integrations.langchain import ParentChildRetriever
    from parrot_parents.integrations.llamaindex import ParentChildLlamaRetriever

    bot = scoped_bot(store, expand=True, scope={"tenant": "b"})
    # A filter asking for another tenant narrows the scope to nothing.
    lc = ParentChildRetriever(bot=bot, limit=6)
    assert await lc.ainvoke("phone costs", filter={"tenant": "a"}) == []
    docs = await lc.ainvoke("phone costs")
    ids = {str(d.id) for d in docs}
    assert ids and await store.ids_matching(list(ids), {"tenant": "b"}) == ids
    li = ParentChildLlamaRetriever(bot=bot, limit=6)
    nodes = await li.aretrieve("phone costs")
    ids = {n.node.node_id for n in nodes}
    assert ids and await store.ids_matching(list(ids), {"tenant": "b"}) == ids


HANDBOOK = "# Handbook\n\n" + "\n\n".join(
    f"## {title}\n\n"
    + "\n\n".join(f"{word} note {i}: the vault code is kept in the log book." for i in range(4))
    for title, word in (
        ("Public A", "Alpha"),
        ("Confidential", "SECRETWORD"),
        ("Public B", "Bravo"),
    )
)


@pytest.mark.parametrize("mode", ["window:1", "window:2", "auto_merge:0.5", "parent"])
async def test_a_scope_on_a_section_never_hands_its_text_over(
    pg_dsn: str, embeddings: Any, tmp_path: Any, mode: str
) -> None:
    # One child per section; the scope hides the middle one, whose children's neighbours
    # and parent lie inside it.
    (tmp_path / "hb.md").write_text(HANDBOOK, encoding="utf-8")
    async with PgVectorStore(dsn=pg_dsn, table=unique_table("sect"), embedding=embeddings) as s:
        try:
            await TextLoader(str(tmp_path), embedding=embeddings).ingest(s)
            bot = scoped_bot(
                s, expand=True, scope={"$not": [{"section_path": {"$like": "%Confidential%"}}]}
            )
            r = await bot.retrieve("where is the vault code kept", mode=mode)
            assert r.passages
            if mode.startswith("window"):
                # The parent's text still serves the slices that span children inside.
                assert any(p.kind == "window" for p in r.passages)
            assert not any("SECRETWORD" in p.text for p in r.passages), [
                (p.kind, p.start_index, p.end_index) for p in r.passages
            ]
            assert r.meta.scope is not None
            hidden = r.meta.scope["withheld"] + r.meta.scope["partial_parents"]
            assert hidden, "the hidden section's child or parent was read and held back"
        finally:
            await s.drop()


async def test_a_parent_found_through_its_summary_holds_to_the_scope_too(
    pg_dsn: str, embeddings: Any, tmp_path: Any
) -> None:
    # A summary row's target is the whole document: reached by search, not by expansion,
    # it is held back all the same when one of its children lies outside the scope.
    from parrot_parents.strategies import GuardedModel, PromptCache, StrategyIndexer, parse_strategy
    from tests.strategies.conftest import ScriptedLLM

    text = (
        "# Handbook\n\n## Travel\n\nTravel is booked through the portal.\n\n"
        "## Confidential\n\nThe SECRETWORD vault code is kept by the director.\n\n"
        "## Meals\n\nMeals are paid up to thirty euros a day.\n"
    )
    llm = ScriptedLLM(lambda chunk, doc: "An employee handbook about travel and meals.")
    model = GuardedModel(llm, cache=PromptCache(tmp_path / "r.sqlite3"), backoff_s=0.0)
    indexer = StrategyIndexer(parse_strategy("summary"), model)
    async with PgVectorStore(dsn=pg_dsn, table=unique_table("sum"), embedding=embeddings) as s:
        try:
            loader = TextLoader(child_chunk_size=120, embedding=embeddings, indexer=indexer)
            await loader.chunk_documents(
                [Document(text, metadata={"source": "hb.md"})], vector_store=s
            )
            scope = {"$not": [{"section_path": {"$like": "%Confidential%"}}]}
            for expand in (False, True):
                bot = scoped_bot(s, expand=expand, scope=scope)
                r = await bot.retrieve("employee handbook about travel and meals", limit=3)
                assert not any("SECRETWORD" in p.text for p in r.passages)
                assert r.meta.scope is not None
                assert r.meta.scope["partial_parents"] == [f"hb.md#doc:0-{len(text)}"]
                assert not r.meta.missing_parents
                # Without the scope the same search hands the document over.
                unscoped = scoped_bot(s, expand=expand, scope=None)
                r = await unscoped.retrieve("employee handbook about travel and meals", limit=3)
                assert any("SECRETWORD" in p.text for p in r.passages)
        finally:
            await s.drop()

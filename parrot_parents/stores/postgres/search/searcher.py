"""A collection's searches: the statement of each request, its session settings, the plan
of a filtered one, and the context read with it, run on the read pool.

:class:`Searcher` is the search part of
:class:`~parrot_parents.stores.postgres.PgVectorStore`; it reads what it needs of the store
through :class:`SearchedStore`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from sqlalchemy import Table, Text, any_, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.errors import LexicalIndexMissingError
from parrot_parents.stores.context import Context, ContextPlan
from parrot_parents.stores.identifiers import CollectionName
from parrot_parents.stores.partition_keys import value_json
from parrot_parents.stores.postgres.collections.filter_keys import FilterKeyLookup
from parrot_parents.stores.postgres.collections.partitions import (
    FixedPartition,
    PartitionLookup,
    graphs_scale,
    partition_clause,
)
from parrot_parents.stores.postgres.connections.pools import Statements, through_catalog_change
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection, ReadPool
from parrot_parents.stores.postgres.connections.reads import Settings
from parrot_parents.stores.postgres.search.bm25_index import (
    LexicalBackend,
    LexicalChoice,
    bm25_index_name,
)
from parrot_parents.stores.postgres.search.context_sql import (
    Split,
    plan_key,
    scope_params,
    search_with_context,
    seeded_statement,
    split_rows,
)
from parrot_parents.stores.postgres.search.filter_plan import (
    FilterPlan,
    widened,
)
from parrot_parents.stores.postgres.search.filter_shapes import FilterShapes
from parrot_parents.stores.postgres.search.hybrid import (
    EXACT_CANDIDATES,
    CandidateRule,
    dense_statement,
    search_statement,
)
from parrot_parents.stores.postgres.search.kept import KEPT_LIMIT, kept_rows
from parrot_parents.stores.postgres.search.lexical import LexicalTables
from parrot_parents.stores.postgres.search.planning import plan_filter
from parrot_parents.stores.postgres.search.request import (
    MAX_LIMIT,
    SearchRequest,
    check_limit_and_filter,
)
from parrot_parents.stores.postgres.search.settings import GraphSize, search_settings
from parrot_parents.stores.postgres.search.target_filter import reads_hierarchy
from parrot_parents.stores.postgres.search.where import (
    compiled_where,
    filter_where,
    lexical_where,
)
from parrot_parents.stores.questions import check_question
from parrot_parents.stores.records.markers import INDEXED_CONTAINMENT
from parrot_parents.stores.resolve import resolve_indexed
from parrot_parents.stores.results import SearchResult, SearchResults
from parrot_parents.stores.search_options import (
    Fusion,
    HNSWQueryOptions,
    SearchMode,
    check_search_mode,
)

__all__ = ["SearchedStore", "Searcher"]


class SearchedStore(Protocol):
    """What a :class:`Searcher` reads of its store (at each search: a caller may change
    the options between searches)."""

    name: CollectionName
    search_options: HNSWQueryOptions
    lexical: LexicalTables
    lexical_candidates: CandidateRule
    text_search_config: str | None
    lexical_backend: LexicalBackend | None
    partition_key: str | None

    @property
    def dimension(self) -> int: ...

    @property
    def read_pool(self) -> ReadPool: ...

    async def ready(self) -> tuple[AsyncEngine, Table]: ...

    async def embed_question(self, question: str) -> list[float]: ...

    async def close(self) -> None: ...


class Searcher:
    """Runs a store's search requests.

    Args:
        store: the store searched.
        statements: where compiled statements are kept (the connections').
        wanted_backend: the ``lexical_backend`` the store was opened with.
    """

    def __init__(
        self, store: SearchedStore, statements: Statements, wanted_backend: LexicalChoice
    ) -> None:
        self._store = store
        self._statements = statements
        self._wanted_backend = wanted_backend
        self._indexed_rows_seen = False
        self._partitions = PartitionLookup()
        self._shapes = FilterShapes()
        self._graph = GraphSize()
        #: The collection's filter keys, read at most every ``LOOKUP_TTL_S`` seconds.
        self.filter_keys = FilterKeyLookup()

    async def question(
        self,
        query: str,
        search_mode: SearchMode,
        limit: int,
        filter: dict[str, Any] | None,
        vector: Sequence[float] | None,
    ) -> tuple[SearchMode, Sequence[float] | None]:
        """A search's mode and vector: every argument checked before the model loads or
        anything connects, then the collection opened, then ``query`` embedded (unless
        ``vector`` is given, or the search is lexical)."""
        check_question(query)
        mode = check_search_mode(search_mode)
        check_limit_and_filter(limit, filter)
        await self._store.ready()
        if vector is None and mode != "lexical":
            vector = await self._store.embed_question(query)
        return mode, vector

    async def run(
        self,
        mode: SearchMode,
        limit: int,
        vector: Sequence[float] | None,
        query: str | None,
        filter: dict[str, Any] | None,
        fusion: Fusion | None,
        include_parents: bool = False,
        plan: ContextPlan | None = None,
    ) -> tuple[list[SearchResult], Context | None]:
        """The results of the request of these arguments (checked), and its context when
        it has a ``plan``; after a change of the server's catalog, once more on fresh
        connections."""
        request = SearchRequest.build(
            mode=mode,
            limit=limit,
            dimension=self._store.dimension,
            vector=vector,
            text=query,
            filter=filter,
            fusion=fusion,
            plan=plan,
            include_parents=include_parents,
        )
        return await through_catalog_change(lambda: self._search(request), self._store.close)

    async def _search(self, request: SearchRequest) -> tuple[list[SearchResult], Context | None]:
        store = self._store
        engine, table = await store.ready()
        if request.mode != "dense" and store.text_search_config is None:
            raise LexicalIndexMissingError(
                f"collection {store.name.table!r} has no lexical index",
                hint=f"run `parrot-parents migrate --collection {store.name.table}`",
            )
        # A hit on an indexed row resolves to its retrievable row (read in the same
        # statement); several hits on one row keep the best. Dedup can leave fewer than
        # ``limit``: search deeper, then cut.
        fetch = request
        while True:
            split, plan = await self._ranked(engine, table, fetch)
            found = split.hits
            resolved = resolve_indexed(found, split.targets)
            exhausted = len(found) < fetch.limit or fetch.limit >= MAX_LIMIT
            if len(resolved) >= request.limit or exhausted:
                results = resolved[: request.limit]
                if plan is not None:
                    results = [replace(r, filter_plan=plan) for r in results]
                return SearchResults(results, filter_plan=plan), split.context
            fetch = replace(fetch, limit=min(MAX_LIMIT, fetch.limit * 4))

    def settings(
        self,
        request: SearchRequest,
        index_only: bool = False,
        partition: bool = False,
        bitmaps: bool = True,
        children: float | None = None,
    ) -> Settings:
        """:func:`search_settings` of the store's search options, for a collection graph
        of ``children`` vectors."""
        return search_settings(
            self._store.search_options, request, index_only, partition, bitmaps, children
        )

    async def _children(self, conn: ReadConnection, request: SearchRequest) -> float | None:
        """The vectors of the collection's graph, which a dense walk's ``ef_search``
        grows with; None for a lexical search, which walks none."""
        if request.mode == "lexical":
            return None
        return await self._graph.children(conn, self._store.name)

    async def _ranked(
        self, engine: AsyncEngine, table: Table, request: SearchRequest
    ) -> tuple[Split, FilterPlan | None]:
        """The ranked rows of one search statement, with the targets of indexed hits and
        the plan's reads; one round trip on the read pool. With a metadata filter, also
        how the search was planned (:mod:`~parrot_parents.stores.postgres.search.filter_plan`):
        the planner's estimate first, and an exact ranking after a dense or hybrid index
        search that came back short, on the same connection."""
        store = self._store
        # The text-search configuration and candidate rule are written into a lexical
        # statement, so they are part of its shape.
        key = request.shape(
            store.lexical_candidates,
            store.text_search_config,
            store.lexical_backend,
            plan=plan_key(request.plan),
        )
        params: dict[str, Any] = {}
        if request.vector is not None:
            params["query_vector"] = request.vector
        if request.mode != "dense":
            params["lexical_query"] = request.text
        if request.plan is not None and request.plan.window is not None:
            params["window_n"] = request.plan.window
        params.update(scope_params(request.plan))
        action = f"search in {store.name.qualified}"
        dense = request.mode == "dense"
        statements = self._statements
        if not request.filter:
            # Built once (building took longer than PostgreSQL took to plan and run it),
            # constants inline, run on the read pool.
            prepared = statements.get(key) or statements.compiled(
                key,
                search_with_context(table, self.statement(table, request), request.plan),
                engine.dialect,
            )
            args = prepared.args(params)

            async def ranked(conn: ReadConnection) -> Sequence[Any]:
                children = await self._children(conn, request)
                settings = self.settings(request, children=children)
                return await conn.fetch_with(prepared.sql, args, settings)

            rows = await store.read_pool.run(ranked, action=action)
            return split_rows(rows, request.plan, dense=dense), None
        # A filter's values are parameters under names its structure fixes, so its
        # statements are prepared once per structure: the filter's SQL is in their key.
        hierarchy = reads_hierarchy(request.filter)

        dense_free = request.mode == "lexical"

        async def work(conn: ReadConnection) -> tuple[Split, FilterPlan]:
            targets = hierarchy and await self._has_indexed_rows(conn)
            children = await self._children(conn, request)
            keyed = await self.filter_keys.keys(conn, store.name)
            # The values whose own graphs the search ranks through.
            graphs: tuple[FixedPartition, ...] = ()
            if not targets:
                graphs = await self._partitions.fixed(
                    conn, store.name, request.filter, store.partition_key, keyed
                )
            if len(graphs) > 1 and dense_free:
                # Several values' graphs serve the dense branch; lexical search has none.
                graphs = ()
            found = graphs[0] if len(graphs) == 1 else None
            part = found is not None
            # The filter's SQL (a statement's key), values, and long lists of values,
            # which its estimate reads a few of.
            where, compiled = compiled_where(
                table, request, engine.dialect, self._shapes, targets, keyed
            )
            shape, lists = compiled.sql, compiled.lists
            params.update(compiled.params)

            async def rank(
                exact: bool,
                index_only: bool = False,
                cap: int | None = None,
                widen: int = 1,
                anded: tuple[str, ...] = (),
            ) -> Split:
                capped = cap is not None
                # A value's own indexes rank its index search; an exact ranking is the
                # plain filter's (the kept rows read through the metadata index).
                through = part and not exact
                scale = found.scale if found is not None and through else 1
                half = found is not None and through and found.half
                # A value's own statement holds the value (as JSON: ``true`` is not ``1``).
                value = value_json(found.value) if found is not None and through else None
                # The candidate rule's size bound is read on the value's own children: a
                # value as small as a collection the rule ranks exactly is ranked exactly,
                # as the same filter without the key is, where a rule bounded by the
                # collection's size could leave out all of its few children.
                few = (
                    found is not None
                    and through
                    and found.rows <= store.lexical_candidates.exact_below
                )
                # An ``$in`` of values with graphs: the dense branch a scan of each.
                union = graphs if len(graphs) > 1 and not exact else ()
                half = half or (bool(union) and all(g.half for g in union))
                names = tuple(g.index for g in union)
                ranked_key = (
                    *key,
                    shape,
                    exact,
                    capped,
                    through,
                    scale,
                    half,
                    value,
                    few,
                    widen,
                    names,
                    anded,
                )
                prepared = statements.get(ranked_key)
                if prepared is None:
                    kept = None
                    if through:
                        assert found is not None
                        ranked = self.statement(
                            table,
                            request,
                            self.where(
                                table, request, partition=(found.key, found.value), keyed=keyed
                            ),
                            candidates=(
                                EXACT_CANDIDATES
                                if few
                                else found.candidates(store.lexical_candidates)
                            ),
                            half=found.half,
                            partition=True,
                        )
                    elif not exact:
                        # The dense branch checks the filter on what the HNSW scan yields;
                        # the lexical one on what the lexemes' index yields, ANDed with
                        # the indexes of the keys the plan names.
                        scanned = self.where(
                            table, request, targets, few=False, keyed=keyed, scanned=True
                        )
                        ranked = self.statement(
                            table,
                            request,
                            lexical_where(table, request, scanned, keyed, anded),
                            dense_where=scanned,
                            candidates=widened(store.lexical_candidates, widen),
                            half=half,
                            parts=[
                                partition_clause(table.c.cmetadata, g.key, g.value) for g in union
                            ],
                        )
                    else:
                        # The lexical branch alone is better served by the GIN index, the
                        # filter checked on the children holding a query lexeme, than by
                        # reading every child the filter keeps (measured: docs/performance.md).
                        if request.mode != "lexical":
                            kept = kept_rows(
                                table,
                                where,
                                lexical=request.mode != "dense",
                                vector=request.vector is not None,
                                capped=capped,
                            )
                        ranked = self.statement(table, request, where, exact=True, kept=kept)
                    statement = search_with_context(
                        table, ranked, request.plan, kept if capped else None
                    )
                    prepared = statements.compiled(ranked_key, statement, engine.dialect)
                run = params if cap is None else {**params, KEPT_LIMIT: cap + 1}
                # Whether a lexical branch is ranked in SQL, through the GIN index's bitmaps.
                bitmaps = not dense and (
                    exact
                    or through
                    or self.lexical_ranking(request.filter, request.fusion, False)[0] == "sql"
                )
                settings = self.settings(
                    request,
                    index_only,
                    partition=through or bool(union),
                    bitmaps=bitmaps,
                    children=children,
                )
                rows: Sequence[Any] = await conn.fetch_with(
                    prepared.sql, prepared.args(run), settings
                )
                return split_rows(rows, request.plan, dense=dense)

            if graphs:
                plan = FilterPlan.for_partition(", ".join(g.index for g in graphs))
            else:
                plan = await plan_filter(
                    conn,
                    statements,
                    store.search_options,
                    engine.dialect,
                    table,
                    request,
                    (where, shape, params),
                    targets,
                    keyed,
                    lists,
                    store.lexical_candidates,
                    self._shapes,
                )
            if plan.checked:
                checked = set(plan.checked)
                where, compiled = compiled_where(
                    table, request, engine.dialect, self._shapes, False, keyed, checked
                )
                shape = compiled.sql
            if plan.exact:
                # At most the threshold's rows read: the estimate may be a guess. (The
                # lexical branch alone reads the children holding a query lexeme.)
                cap = None if request.mode == "lexical" else plan.exact_below
                split = await rank(exact=True, cap=cap)
                if not split.over_cap:
                    return split, plan
                plan = plan.then_index()
            # The index plan is ours, not the planner's: the statement is kept off scans
            # that would rank every child the filter keeps (:meth:`settings`).
            widen = graphs_scale(graphs) if graphs else plan.lexical_scale
            split = await rank(exact=False, index_only=True, widen=widen, anded=plan.anded)
            # Only a dense ranking can come back short of what the filter keeps: the
            # lexical branch's candidates are every child holding a query lexeme.
            if request.mode != "lexical" and len(split.hits) < request.limit:
                plan = plan.then_exact()
                split = await rank(exact=True)
            return split, plan

        return await store.read_pool.run(work, action=action)

    where = staticmethod(filter_where)

    async def _has_indexed_rows(self, conn: ReadConnection) -> bool:
        """Whether the collection holds indexed rows (an ingestion strategy's): asked
        until the answer is yes (one lookup on the metadata GIN index), which then stays,
        as indexed rows are written by ingestion and rarely all deleted."""
        if self._indexed_rows_seen:
            return True
        found = await conn.fetch_with(
            f"SELECT EXISTS (SELECT 1 FROM {self._store.name.qualified}"
            f" WHERE {INDEXED_CONTAINMENT})",
            (),
            (),
        )
        self._indexed_rows_seen = bool(found[0][0])
        return self._indexed_rows_seen

    def statement(
        self,
        table: Table,
        request: SearchRequest,
        where: list[Any] | None = None,
        exact: bool = False,
        kept: Any | None = None,
        candidates: CandidateRule | None = None,
        half: bool = False,
        partition: bool = False,
        dense_where: list[Any] | None = None,
        parts: Sequence[Any] = (),
    ) -> Any:
        """The ranked search statement (columns :data:`HIT_COLUMNS`); binds
        ``query_vector`` and ``lexical_query``. ``where``: the search's predicates
        (:meth:`where`), when the caller has them already. ``exact``: the ranking of a
        selective filter (:mod:`~parrot_parents.stores.postgres.search.filter_plan`), never
        through an index but the GIN index of the query's lexemes; in dense and hybrid mode
        over ``kept``, the :func:`~parrot_parents.stores.postgres.search.kept.kept_rows` of
        ``where``, every one compared with the query. ``half``: the HNSW index the
        statement reads is over ``embedding::halfvec(d)`` (a partition key value's).
        ``partition``: ``where`` fixes a partition key's value, whose GIN index serves the
        lexical branch: ranked in SQL with the collection's statistics, as an exact
        ranking is, never by the collection's ``bm25`` index (which ranks every value's
        children first, with statistics of its own). ``parts``: predicates of values
        with graphs of their own; the dense branch then scans each one's and keeps the
        nearest of them all
        (:func:`~parrot_parents.stores.postgres.search.hybrid.dense_statement`)."""
        if where is None:
            where = self.where(table, request)
        if request.mode == "dense":
            assert kept is not None or not exact, "an exact dense ranking ranks the kept rows"
            return dense_statement(
                table,
                request.limit,
                where if dense_where is None else dense_where,
                kept,
                half,
                parts,
            )
        store = self._store
        assert store.text_search_config is not None
        # The qualified name of the ``bm25`` index when it ranks the lexical branch.
        bm25_index = None
        ranking = self.lexical_ranking(request.filter, request.fusion, exact or partition)
        if ranking[0] == "pg_textsearch":
            bm25_index = store.name.quoted(bm25_index_name(store.name.table))
        # A selective filter may leave only children holding common query lexemes: every
        # query lexeme then brings candidates (few, as the filter keeps few). The cap needs
        # the GIN index, and sequential scans are turned off for unfiltered searches only
        # (with a LIMIT, the planner could scan the table instead).
        if candidates is None:
            candidates = store.lexical_candidates
            if request.filter:
                candidates = EXACT_CANDIDATES if exact else replace(candidates, cap=None)
        return search_statement(
            table,
            mode=request.mode,
            limit=request.limit,
            where=where,
            with_vector=request.vector is not None,
            lexical=store.lexical,
            text_search_config=store.text_search_config,
            fusion=request.fusion,
            candidates=candidates,
            bm25_index=bm25_index,
            kept=kept,
            half=half,
            dense_where=dense_where,
            parts=parts,
        )

    def lexical_ranking(
        self, filter: Mapping[str, Any] | None, fusion: Fusion | None, exact_filter: bool = True
    ) -> tuple[str, str | None]:
        """``(backend, why)``: see the store's
        :meth:`~parrot_parents.stores.postgres.PgVectorStore.lexical_ranking`."""
        backend = self._store.lexical_backend or "sql"
        if backend == "pg_textsearch" and self._wanted_backend == "sql":
            return "sql", "the store was opened with lexical_backend='sql'"
        if backend == "pg_textsearch" and filter and exact_filter:
            # The index ranks first and filters after: a selective filter would walk it.
            return "sql", (
                "a metadata filter keeping few children, or a partition key's value, is"
                " ranked in SQL"
            )
        if backend == "pg_textsearch" and fusion is not None and fusion.prf is not None:
            return "sql", "prf reads the SQL statistics"
        return backend, None

    async def ids_matching(self, ids: Sequence[str], filter: Mapping[str, Any]) -> set[str]:
        """The ids among ``ids`` of rows ``filter`` keeps (a bot's scope check), on the read
        pool: one statement per filter structure, prepared once per connection.

        Raises:
            ConfigurationError: a bad filter (before any read).
        """
        engine, table = await self._store.ready()
        compiled = self._shapes.compile(table, filter, engine.dialect)
        wanted = list(dict.fromkeys(str(i) for i in ids))
        if not wanted:
            return set()
        key = ("ids_matching", compiled.sql)
        statements = self._statements
        prepared = statements.get(key) or statements.compiled(
            key,
            select(table.c.id).where(
                table.c.id == any_(bindparam("seed_ids", type_=ARRAY(Text))), compiled.where
            ),
            engine.dialect,
        )
        params = {"seed_ids": wanted, **compiled.params}
        action = f"read from {self._store.name.qualified}"
        return {str(r[0]) for r in await self._store.read_pool.fetch(action, prepared, params)}

    async def fetch_context(
        self, rows: Sequence[tuple[str, dict[str, Any]]], plan: ContextPlan
    ) -> Context:
        """``plan``'s reads for ``(id, metadata)`` rows already found, in one statement."""
        wanted = list(dict.fromkeys(str(i) for i, _ in rows))
        engine, table = await self._store.ready()
        if not wanted:
            return Context(plan=plan)
        key = ("seeded", plan_key(plan))
        statements = self._statements
        prepared = statements.get(key) or statements.compiled(
            key, seeded_statement(table, plan), engine.dialect
        )
        params: dict[str, Any] = {"seed_ids": wanted, **scope_params(plan)}
        if plan.window is not None:
            params["window_n"] = plan.window
        action = f"read from {self._store.name.qualified}"
        found = await self._store.read_pool.fetch(action, prepared, params)
        split = split_rows(found, plan, dense=True, seeds=[dict(m) for _, m in rows])
        assert split.context is not None
        return split.context

"""One SQL statement for dense, lexical (BM25) or hybrid search over the children.

* ``dense``: pgvector cosine kNN on the HNSW index;
* ``lexical``: BM25 (:mod:`~parrot_parents.stores.postgres.search.lexical`) over the
  children holding a candidate query lexeme, scored with every query lexeme; or the top-k
  of the collection's pg_textsearch index
  (:mod:`~parrot_parents.stores.postgres.search.bm25_index`);
* ``hybrid``: both, fused by weighted reciprocal rank fusion (Cormack, Clarke and
  Büttcher, SIGIR 2009): ``dense_weight / (k + dense_rank) + lexical_weight / (k +
  lexical_rank)``, a missing rank adding nothing.

Filters apply to both branches; every result carries its rank in each (None when absent).

The lexical branch in SQL is bounded in a large collection (:class:`CandidateRule`): it
scores, with every query lexeme, only the children holding one of the query's rarest
lexemes (rarest first, while their document frequencies add up to at most 500) or both
lexemes of a pair of the six next rarest (the pairs expected to hold the fewest children
first, about 500 children in all), at most 4,000 of them. Scoring every child that holds
a query lexeme reads a few thousand rows of the heap at 100k children and tens of
thousands at 1M; the children this rule skips hold no rare query lexeme and few common
ones, whose BM25 contributions are small (their idf is low). In a collection of at most
5,000 children, under a selective metadata filter and with :data:`EXACT_CANDIDATES`,
every child holding a query lexeme is scored (exact BM25). The rows say whether a search
was bounded (``lexical_bounded``); the measured agreement with exact BM25 and the recall
it keeps are in docs/benchmarks.md ("Bounded lexical search").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pgvector.sqlalchemy import HALFVEC, VECTOR
from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    Select,
    Table,
    Text,
    all_,
    any_,
    bindparam,
    cast,
    false,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, aggregate_order_by
from sqlalchemy.sql.elements import ColumnClause, ColumnElement

from parrot_parents.stores.postgres.connections.vector_codec import QueryVector
from parrot_parents.stores.postgres.search.bm25_index import BM25_COLUMN
from parrot_parents.stores.postgres.search.lexical import (
    BM25_B,
    BM25_K1,
    LexicalTables,
    validate_text_search_config,
)
from parrot_parents.stores.search_options import PRF, Fusion, SearchMode, branch_depth

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CANDIDATES",
    "EXACT_CANDIDATES",
    "RANK_TYPES",
    "CandidateRule",
    "dense_statement",
    "query_vector",
    "scaled_rule",
    "search_statement",
    "subset_scale",
    "unranked",
]


@dataclass(frozen=True)
class CandidateRule:
    """Which children the lexical branch in SQL scores (each with every query lexeme).

    In a collection of more than ``exact_below`` children (its BM25 statistics' count), a
    child is a candidate when it holds one of the query's rarest lexemes, taken rarest first
    while the sum of their document frequencies stays at most ``budget`` (children), or
    both lexemes of a pair of the ``pairs`` rarest of the query's other lexemes. The pairs
    are taken fewest expected children first (``df_a * df_b / n``, as if the two were
    independent) while that expectation, summed, stays at most ``pair_budget`` (children;
    the first pair always). At most ``cap`` candidates are scored (None: all). A query
    with a single lexeme in the collection takes it alone whatever its frequency.
    Otherwise every child holding a query lexeme is a candidate: exact BM25.
    """

    budget: int = 500
    pairs: int = 6
    pair_budget: int = 500
    exact_below: int = 5_000
    cap: int | None = 4_000
    #: Find the candidates in a materialised CTE, planned apart from their scoring (a
    #: filter ranked through the indexes,
    #: :func:`~parrot_parents.stores.postgres.search.filter_plan.widened`): left to
    #: combine the two, the planner read the whole table in key order for a filter it
    #: took to keep a fifth of it (110 ms against 13 at 100k children). Which of the
    #: search's predicates an index serves there is the form the caller writes them in:
    #: the searcher's reads only the keys its plan ANDs (``FilterPlan.anded``).
    fenced: bool = False


#: The product's rule (module docstring).
CANDIDATES = CandidateRule()
#: Every child holding a query lexeme is scored: the exact BM25 top-k.
EXACT_CANDIDATES = CandidateRule(budget=2**62, pairs=0, pair_budget=0, exact_below=2**62, cap=None)


def subset_scale(children: float, kept: float) -> int:
    """``children`` over ``kept`` (a subset of them: a partition key's value, a filter's
    estimate), rounded to a power of two, 1 to 1024 (1 when either is unknown): the
    factor :func:`scaled_rule` is given, in few distinct values (each a statement)."""
    if kept <= 0 or children <= 0:
        return 1
    return int(min(1024, 2 ** round(math.log2(max(1.0, children / kept)))))


def scaled_rule(rule: CandidateRule, scale: int) -> CandidateRule:
    """``rule`` for a subset holding one child in ``scale`` of the collection: its
    budgets of expected children times ``scale`` (kept within a bigint: the exact rule's
    are at its edge) and no cap, so that about as many of the subset's children are
    scored as ``rule`` scores of the whole collection (whose statistics it reads)."""
    most = EXACT_CANDIDATES.budget
    return replace(
        rule,
        budget=min(rule.budget * scale, most),
        pair_budget=min(rule.pair_budget * scale, most),
        cap=None,
    )


#: The types of the ranking columns of ``hits``.
RANK_TYPES: dict[str, Any] = {
    "distance": Float,
    "dense_rank": Integer,
    "lexical_rank": Integer,
    "lexical_score": Float,
    "fused_score": Float,
    "lexical_expansion": ARRAY(Text),
    "lexical_bounded": Boolean,
}


def unranked(*names: str) -> list[Any]:
    """The ranking columns ``names``, NULL (of their :data:`RANK_TYPES`)."""
    return [cast(null(), RANK_TYPES[name]).label(name) for name in names]


def query_vector(table: Table) -> Any:
    """The query embedding as a bound parameter (``query_vector``), so that a statement
    can be built once and run with any vector."""
    # Bound in pgvector's binary format (parrot_parents.stores.postgres.connections.vector_codec),
    # not as text.
    column_type = table.c.embedding.type
    if not isinstance(column_type, VECTOR):
        raise TypeError(f"{table.name}.embedding is {column_type!r}, not a pgvector VECTOR")
    return bindparam("query_vector", type_=QueryVector(column_type.dim))


#: Rows a half-precision index search yields beyond the ``limit`` it is asked for, ranked
#: again at full precision: the two precisions order only near-ties differently.
HALF_PRECISION_MARGIN = 10


def _nearest(
    table: Table,
    where: list[Any],
    limit: int,
    *columns: Any,
    half: bool = False,
    parts: Sequence[Any] = (),
) -> Select[Any]:
    """``columns`` and ``distance`` of the ``limit`` rows ``where`` keeps nearest
    ``query_vector``, nearest first (the kNN order of the HNSW index).

    ``half``: the rows are found through an index over ``embedding::halfvec(d)`` (a
    partition value's graph, :mod:`~parrot_parents.stores.postgres.collections.partitions`):
    its ``limit`` + :data:`HALF_PRECISION_MARGIN` nearest at half precision, ranked by
    their full-precision distance (the ``distance`` returned either way).

    ``parts``: predicates of values with graphs of their own (an ``$in`` of them): each
    value's nearest found through its graph, the nearest of them all kept."""
    if parts:
        scans = [_nearest(table, [*where, p], limit, *columns, half=half) for p in parts]
        every = union_all(*scans).subquery("graphs")
        named = [every.c[c.name] for c in columns]
        return select(*named, every.c.distance).order_by(every.c.distance).limit(limit)
    vector = query_vector(table)
    distance = table.c.embedding.cosine_distance(vector).label("distance")
    kept = (table.c.embedding.is_not(None), *where)
    if not half:
        return select(*columns, distance).where(*kept).order_by(distance).limit(limit)
    halfvec = HALFVEC(vector.type.dim)
    coarse = cast(table.c.embedding, halfvec).cosine_distance(cast(vector, halfvec))
    found = (
        select(*columns, distance)
        .where(*kept)
        .order_by(coarse)
        .limit(limit + HALF_PRECISION_MARGIN)
        .subquery("coarse")
    )
    named = [found.c[c.name] for c in columns]
    return select(*named, found.c.distance).order_by(found.c.distance).limit(limit)


def dense_statement(
    table: Table,
    limit: int,
    where: list[Any],
    kept: Any | None,
    half: bool = False,
    parts: Sequence[Any] = (),
) -> Any:
    """The dense search statement (the columns of :func:`search_statement`): the kNN of
    ``query_vector`` on the HNSW index, or over ``kept`` (the exact ranking of a selective
    filter, :func:`~parrot_parents.stores.postgres.search.kept.kept_rows`). ``half``: the
    index is over ``embedding::halfvec(d)``; ``parts``: the values whose graphs are
    scanned (:func:`_nearest`)."""
    # The kNN in a subquery, numbered outside it: a window function beside the
    # ORDER BY ... LIMIT would read every row before the limit.
    if kept is None:
        columns = (table.c.id, table.c.document, table.c.cmetadata)
        knn = _nearest(table, where, limit, *columns, half=half, parts=parts).subquery("knn")
    else:
        top = (
            select(kept.c.id, kept.c.distance)
            .order_by(kept.c.distance, kept.c.id)
            .limit(limit)
            .subquery("kept_top")
        )
        knn = (
            select(table.c.id, table.c.document, table.c.cmetadata, top.c.distance)
            .join(top, top.c.id == table.c.id)
            .subquery("knn")
        )
    return select(
        knn.c.id,
        knn.c.document,
        knn.c.cmetadata,
        knn.c.distance,
        *unranked(
            "dense_rank",
            "lexical_rank",
            "lexical_score",
            "fused_score",
            "lexical_expansion",
            "lexical_bounded",
        ),
        func.row_number().over(order_by=(knn.c.distance, knn.c.id)).label("ord"),
    )


def _dense(
    table: Table, where: list[Any], depth: int, kept: Any | None, half: bool, parts: Sequence[Any]
) -> Any:
    """The dense branch as a CTE ``(id, dense_rank)``: the kNN on the HNSW index (over
    half precision: ``half``, :func:`_nearest`), or the exact ranking of the
    :func:`~parrot_parents.stores.postgres.search.kept.kept_rows`."""
    if kept is None:
        top = _nearest(table, where, depth, table.c.id, half=half, parts=parts)
    else:
        top = (
            select(kept.c.id, kept.c.distance)
            .where(kept.c.distance.is_not(None))
            .order_by(kept.c.distance, kept.c.id)
            .limit(depth)
        )
    knn = top.subquery("knn")
    rank = func.row_number().over(order_by=(knn.c.distance, knn.c.id))
    return select(knn.c.id, rank.label("dense_rank")).cte("dense")


def _candidates(
    lx: Table, stats: Any, terms: Any, rule: CandidateRule, name: str
) -> tuple[list[Any], Any]:
    """The tsqueries of the children the lexical branch scores (:class:`CandidateRule`):
    the lexemes taken alone, then one per pair of the others (NULL when the query has no
    such pair), and whether the search is bounded (some query lexeme in the collection not
    taken alone). A lexeme absent from the lexicon is in no child, so leaving it out
    changes nothing."""
    order = (lx.c.df, lx.c.lexeme)
    qlex = (
        select(
            lx.c.lexeme,
            lx.c.df,
            func.sum(lx.c.df).over(order_by=order).label("cum_df"),
            func.count().over().label("held"),
        )
        .where(lx.c.lexeme == any_(terms))
        .subquery()
    )
    n = select(stats.c.n).scalar_subquery()
    alone = or_(qlex.c.cum_df <= rule.budget, qlex.c.held == 1, n <= float(rule.exact_below))
    marked = select(qlex.c.lexeme, qlex.c.df, qlex.c.cum_df, alone.label("alone")).subquery()
    # Materialised once: every tsquery and the flag read it.
    ranked = select(
        marked.c.lexeme,
        marked.c.df,
        marked.c.alone,
        func.row_number().over(partition_by=marked.c.alone, order_by=marked.c.cum_df).label("nth"),
    ).cte(name)
    singles = select(
        cast(func.string_agg(func.quote_literal(ranked.c.lexeme), literal(" | ")), TSQUERY)
    ).where(ranked.c.alone)
    tsqueries = [singles.scalar_subquery()]
    # The pairs of the ``pairs`` rarest other lexemes, fewest expected children first
    # (``df_a * df_b / n``, as if independent), while their sum stays within the
    # pair budget (the first always).
    a, b = ranked.alias(f"{name}_a"), ranked.alias(f"{name}_b")
    size = cast(a.c.df, Float) * b.c.df
    size_order = (size, a.c.lexeme, b.c.lexeme)
    pairs = (
        select(
            (
                func.quote_literal(a.c.lexeme)
                .op("||")(literal(" & "))
                .op("||")(func.quote_literal(b.c.lexeme))
            ).label("tsquery"),
            func.row_number().over(order_by=size_order).label("k"),
            (func.sum(size).over(order_by=size_order) / n).label("expected"),
        )
        .where(~a.c.alone, ~b.c.alone, a.c.nth < b.c.nth, b.c.nth <= rule.pairs)
        .cte(f"{name}_pairs")
    )
    # One GIN scan per pair, OR-ed by the planner (a BitmapOr): each is an AND that GIN
    # answers by skipping through the longer posting list, where one tsquery of all the
    # pairs read every posting of every lexeme (four times slower at 1M children).
    for k in range(1, rule.pairs * (rule.pairs - 1) // 2 + 1):
        taken = or_(pairs.c.k == 1, pairs.c.expected <= float(rule.pair_budget))
        found = select(cast(pairs.c.tsquery, TSQUERY)).where(pairs.c.k == k, taken)
        tsqueries.append(found.scalar_subquery())
    bounded = select(func.bool_or(~ranked.c.alone)).scalar_subquery()
    return tsqueries, func.coalesce(bounded, false())


def _idf(lx: Table, stats: Any) -> Any:
    """Lucene's BM25 idf of a lexicon row."""
    return func.ln(1.0 + (stats.c.n - lx.c.df + 0.5) / (lx.c.df + 0.5))


def _bm25(
    table: Any,
    stats: Any,
    terms: Any,
    tsqueries: list[Any],
    weights: Any,
    where: list[Any],
    depth: int,
    name: str,
    cap: int | None = None,
    fenced: bool = False,
) -> Any:
    """The top ``depth`` children by BM25 over ``terms``: rows ``id, lexical_score``.

    ``table``: the collection table, or the
    :func:`~parrot_parents.stores.postgres.search.kept.kept_rows`
    (columns ``id`` and ``lexical``). ``weights`` has a row ``(lexeme, idf)`` per scoring
    lexeme; its ``idf`` is the lexeme's idf, times its query weight under feedback.
    The candidates: the children matching any of ``tsqueries`` and ``where``, at most
    ``cap``; with ``fenced`` (:attr:`CandidateRule.fenced`), found in a materialised
    CTE."""
    matched = or_(*(table.c.lexical.op("@@")(q) for q in tsqueries))
    if fenced:
        hits = (
            select(table.c.id, table.c.lexical)
            .where(matched, *where)
            .cte(f"{name}_hits")
            .prefix_with("MATERIALIZED")
        )
        found = select(hits.c.id, hits.c.lexical)
    else:
        found = select(table.c.id, table.c.lexical).where(matched, *where)
    cand = (found if cap is None else found.limit(cap)).subquery(f"{name}_cand")
    # Only the query's lexemes of the row, cut in C before the unnest (about 30 lexemes a
    # row otherwise, unnested then filtered: twice the time at 100k children):
    # every position marked 'D', the query lexemes' marked 'A', the 'A' ones kept. The
    # positions of a kept lexeme are all its positions, so tf is unchanged.
    only_query = func.ts_filter(
        func.setweight(
            func.setweight(cand.c.lexical, literal_column("'D'::\"char\"")),
            literal_column("'A'::\"char\""),
            terms,
        ),
        literal_column("'{a}'::\"char\"[]"),
    )
    u = func.unnest(only_query).table_valued("lexeme", "positions", "weights", name="u")
    # tf: the positions of the lexeme in the row; the length is ``length(tsvector)``, the
    # number of distinct lexemes (see :mod:`parrot_parents.stores.postgres.search.lexical`).
    tf = cast(func.array_length(u.c.positions, 1), Float)
    norm = 1.0 - BM25_B + BM25_B * cast(func.length(cand.c.lexical), Float) / stats.c.avgdl
    score = func.sum(weights.c.idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm))
    return (
        select(cand.c.id, score.label("lexical_score"))
        .select_from(cand)
        .join(u, true())
        .join(weights, weights.c.lexeme == u.c.lexeme)
        .join(stats, true())
        .group_by(cand.c.id)
        .order_by(score.desc(), cand.c.id)
        .limit(depth)
        .subquery(name)
    )


#: Feedback lexemes are 2 to 20 characters long (Anserini's RM3 term filter, without its
#: ASCII rule, so that accented words stay).
_FEEDBACK_LEXEME_LENGTH = (2, 20)


def _feedback(
    table: Table, lx: Table, stats: Any, terms: Any, fb: Any, prf: PRF
) -> tuple[Any, Any]:
    """RM3 over the first pass's top children ``fb`` (:class:`PRF`): the CTE of weighted
    lexemes ``(lexeme, idf)`` (idf times the mixed weight) and the array of the lexemes
    added to the query, heaviest first."""
    row = table.alias("fb_row")
    u = func.unnest(row.c.lexical).table_valued("lexeme", "positions", "weights", name="fu")
    # Stripped positions read as one occurrence.
    tf = cast(func.coalesce(func.array_length(u.c.positions, 1), 1), Float)
    occ = (
        select(
            fb.c.lexical_score.label("s"),
            u.c.lexeme,
            # P(w|D): the lexeme's share of the child's lexeme occurrences.
            (tf / func.sum(tf).over(partition_by=fb.c.id)).label("p"),
        )
        .select_from(fb.join(row, row.c.id == fb.c.id).join(u, true()))
        .subquery("fb_occ")
    )
    # P(Q|D): the child's BM25 score over the feedback children's total.
    total = select(func.sum(fb.c.lexical_score)).scalar_subquery()
    rm_w = func.sum(occ.c.p * occ.c.s) / func.nullif(total, 0.0)
    lo, hi = _FEEDBACK_LEXEME_LENGTH
    rm = (
        select(occ.c.lexeme, rm_w.label("w"))
        .where(func.length(occ.c.lexeme).between(lo, hi))
        .group_by(occ.c.lexeme)
        .order_by(rm_w.desc(), occ.c.lexeme)
        .limit(prf.fb_terms)
        .cte("prf_rm")
    )
    lam = float(prf.original_weight)
    q = func.unnest(terms).column_valued("qu")
    qn = func.greatest(func.cardinality(terms), 1)
    mixed = union_all(
        select(q.label("lexeme"), (literal(lam, Float) / qn).label("w")),
        select(
            rm.c.lexeme,
            (literal(1.0 - lam, Float) * rm.c.w / func.sum(rm.c.w).over()).label("w"),
        ),
    ).subquery("prf_mixed")
    mix = (
        select(mixed.c.lexeme, func.sum(mixed.c.w).label("w"))
        .group_by(mixed.c.lexeme)
        .cte("prf_terms")
    )
    weights = (
        select(lx.c.lexeme, (_idf(lx, stats) * mix.c.w).label("idf"))
        .select_from(lx)
        .join(mix, mix.c.lexeme == lx.c.lexeme)
        .join(stats, true())
        .where(mix.c.w > 0.0)
        .cte("prf_idf")
    )
    # Empty, not NULL, when feedback ran and added nothing (every heavy lexeme was the
    # query's own, or the first pass found nothing).
    added = func.coalesce(
        cast(
            select(func.array_agg(aggregate_order_by(rm.c.lexeme, rm.c.w.desc(), rm.c.lexeme)))
            .where(rm.c.lexeme != all_(terms))
            .scalar_subquery(),
            ARRAY(Text),
        ),
        cast(literal_column("'{}'"), ARRAY(Text)),
    )
    return weights, added


def _lexical(
    table: Table,
    lex: LexicalTables,
    config: str,
    where: list[Any],
    depth: int,
    rule: CandidateRule,
    prf: PRF | None = None,
    kept: Any | None = None,
) -> tuple[Any, Any, Any]:
    """The lexical branch as a CTE ``(id, lexical_score, lexical_rank)``, the array of
    lexemes feedback added to the query (a NULL ``text[]`` without ``prf``), and whether
    its candidates were bounded (:class:`CandidateRule`). ``kept``:
    rank the :func:`~parrot_parents.stores.postgres.search.kept.kept_rows` (``where`` applied there)
    instead of the table's."""
    # Kept lean on purpose: planning dominated this statement's cost (2.5 ms of plan for
    # 1 ms of work with semi-joins on a CTE of query terms), so the query's lexemes are
    # one array, matched with ``= ANY`` (docs/benchmarks.md, "What hybrid search costs").
    cfg: ColumnClause[Any] = literal_column(f"'{validate_text_search_config(config)}'::regconfig")
    terms = func.tsvector_to_array(func.to_tsvector(cfg, bindparam("lexical_query")))
    q = select(terms.label("terms")).cte("qterms")
    # The query's lexemes, once per statement (an InitPlan: uncorrelated scalar subquery).
    # The ``@@`` operand must not reference a joined relation: as a join filter it could not
    # use the GIN index, and every child would be read and matched.
    terms_once = cast(select(q.c.terms).scalar_subquery(), ARRAY(Text))
    st = lex.stats
    stats = select(
        cast(st.c.n, Float).label("n"),
        (cast(st.c.total_len, Float) / func.greatest(st.c.n, 1)).label("avgdl"),
    ).cte("lexstats")
    lx = lex.lexicon
    idf = (
        select(lx.c.lexeme, _idf(lx, stats).label("idf"))
        .select_from(lx)
        .join(stats, true())
        .where(lx.c.lexeme == any_(terms_once))
        .cte("idf")
    )
    tsqueries, bounded = _candidates(lx, stats, terms_once, rule, "qlex")
    added: Any = cast(null(), ARRAY(Text))
    source, where = (table, where) if kept is None else (kept, [])
    cap = rule.cap
    # The kept rows are the filter's already (an exact ranking).
    fenced = rule.fenced and kept is None
    if prf is None:
        top = _bm25(
            source, stats, terms_once, tsqueries, idf, where, depth, "lexical_top", cap, fenced
        )
    else:
        first = _bm25(
            source, stats, terms_once, tsqueries, idf, where, prf.fb_docs, "fb_top", cap, fenced
        )
        first_cte = select(first.c.id, first.c.lexical_score).cte("prf_docs")
        weights, added = _feedback(table, lx, stats, terms_once, first_cte, prf)
        # The expanded query's lexemes, once per statement, as the query's are.
        expanded = cast(select(func.array_agg(weights.c.lexeme)).scalar_subquery(), ARRAY(Text))
        tsqueries2, bounded2 = _candidates(lx, stats, expanded, rule, "qlex_prf")
        bounded = or_(bounded, bounded2)
        top = _bm25(
            source, stats, expanded, tsqueries2, weights, where, depth, "lexical_top", cap, fenced
        )
    rank = func.row_number().over(order_by=(top.c.lexical_score.desc(), top.c.id))
    ranked = select(top.c.id, top.c.lexical_score, rank.label("lexical_rank")).cte("lexical")
    return ranked, added, bounded


def _bm25_index(table: Table, index: str, where: list[Any], depth: int) -> Any:
    """The lexical branch from a pg_textsearch ``bm25`` index: its top ``depth`` children
    as a CTE ``(id, lexical_score, lexical_rank)``. ``index`` is the schema-qualified
    index name (a validated derived name, written into the statement)."""
    column: ColumnClause[Any] = literal_column(f'"{table.name}"."{BM25_COLUMN}"')
    query = func.to_bm25query(bindparam("lexical_query"), literal(index))
    # ``<@>`` is the negated BM25 score, ascending, as an index can order by it. The ORDER
    # BY must be exactly that expression for the index to serve it: no tie-break here.
    distance = column.op("<@>", return_type=Float)(query)
    top = (
        select(table.c.id, (-distance).label("lexical_score"))
        .where(column.is_not(None), *where)
        .order_by(distance)
        .limit(depth)
        .subquery("lexical_top")
    )
    rank = func.row_number().over(order_by=(top.c.lexical_score.desc(), top.c.id))
    # A plan that scans instead (a tiny table) also yields rows matching no query term.
    return (
        select(top.c.id, top.c.lexical_score, rank.label("lexical_rank"))
        .where(top.c.lexical_score > 0.0)
        .cte("lexical")
    )


def search_statement(
    table: Table,
    *,
    mode: SearchMode,
    limit: int,
    where: list[ColumnElement[Any]],
    with_vector: bool,
    lexical: LexicalTables,
    text_search_config: str,
    fusion: Fusion | None = None,
    candidates: CandidateRule = CANDIDATES,
    bm25_index: str | None = None,
    kept: Any | None = None,
    half: bool = False,
    dense_where: list[ColumnElement[Any]] | None = None,
    parts: Sequence[Any] = (),
) -> Select[Any]:
    """The lexical or hybrid search statement (dense alone is :func:`dense_statement`); bind
    ``lexical_query`` (the question) and, ``with_vector``, ``query_vector``.

    Rows: ``id, document, cmetadata, distance, dense_rank, lexical_rank, lexical_score,
    fused_score, lexical_expansion, lexical_bounded, ord`` (the 1-based rank), best first.
    ``lexical_bounded``: whether the lexical branch in SQL scored a bounded set of
    candidates (:class:`CandidateRule`; NULL from a ``bm25`` index).
    ``lexical_expansion``: the lexemes pseudo-relevance feedback added (``fusion.prf``),
    heaviest first, NULL without it; ``distance``: the cosine distance when
    ``with_vector``; ``fused_score``: the weighted RRF value (None in ``lexical`` mode).
    ``where`` applies to both branches, unless ``dense_where`` (the same predicates in
    another form, with the same parameters) is given for the dense one. ``bm25_index``
    (the pg_textsearch index's qualified name) makes the lexical branch its top-k, not
    with ``fusion.prf``. ``kept``
    (:func:`~parrot_parents.stores.postgres.search.kept.kept_rows`) ranks those rows only,
    each compared and matched directly, never through the HNSW or GIN index. ``half``: the
    dense branch's HNSW index is over ``embedding::halfvec(d)`` (a partition value's,
    :func:`_nearest`); ``parts``: the dense branch scans these values' graphs.
    """
    fusion = fusion or Fusion()
    depth = branch_depth(mode, limit, fusion)
    distance: Any = literal(None, Float)
    if with_vector:
        distance = table.c.embedding.cosine_distance(query_vector(table))
    lex_depth = depth if mode == "lexical" else (fusion.lexical_depth or depth)
    if bm25_index is not None:
        assert fusion.prf is None, "feedback reads the SQL statistics"
        assert kept is None, "an exact search ranks the kept rows in SQL"
        lex = _bm25_index(table, bm25_index, where, lex_depth)
        added, bounded = cast(null(), ARRAY(Text)), cast(null(), Boolean)
    else:
        lex, added, bounded = _lexical(
            table, lexical, text_search_config, where, lex_depth, candidates, fusion.prf, kept
        )
    if mode == "lexical":
        ranked: Any = lex
        ranks = (literal(None, Float), lex.c.lexical_rank, lex.c.lexical_score)
        fused_score: Any = literal(None, Float)
        order: tuple[Any, ...] = (lex.c.lexical_rank,)
    else:
        assert with_vector
        dense_on = where if dense_where is None else dense_where
        dense = _dense(table, dense_on, depth, kept, half, parts)
        fid = func.coalesce(dense.c.id, lex.c.id)
        k = float(fusion.rrf_k)
        fused = fusion.dense_weight * func.coalesce(
            1.0 / (k + dense.c.dense_rank), 0.0
        ) + fusion.lexical_weight * func.coalesce(1.0 / (k + lex.c.lexical_rank), 0.0)
        ranked = (
            select(
                fid.label("id"),
                dense.c.dense_rank,
                lex.c.lexical_rank,
                lex.c.lexical_score,
                fused.label("fused"),
            )
            .select_from(dense.join(lex, dense.c.id == lex.c.id, full=True))
            .order_by(fused.desc(), dense.c.dense_rank.asc().nulls_last(), fid)
            .limit(limit)
            .subquery("fused")
        )
        ranks = (ranked.c.dense_rank, ranked.c.lexical_rank, ranked.c.lexical_score)
        fused_score = ranked.c.fused
        order = (ranked.c.fused.desc(), ranked.c.dense_rank.asc().nulls_last(), table.c.id)
    return (
        select(
            table.c.id,
            table.c.document,
            table.c.cmetadata,
            distance.label("distance"),
            ranks[0].label("dense_rank"),
            ranks[1].label("lexical_rank"),
            ranks[2].label("lexical_score"),
            fused_score.label("fused_score"),
            added.label("lexical_expansion"),
            bounded.label("lexical_bounded"),
            func.row_number().over(order_by=order).label("ord"),
        )
        .join(ranked, ranked.c.id == table.c.id)
        .order_by(*order)
        .limit(limit)
    )

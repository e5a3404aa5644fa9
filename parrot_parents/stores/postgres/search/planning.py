"""A filtered search's plan (:mod:`~parrot_parents.stores.postgres.search.filter_plan`),
read from the planner's estimate or a sample of the table, on the search's connection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect

from parrot_parents.stores.filters import (
    FILTER_PARAM_PREFIX,
    estimated_part,
    has_unestimated,
    named_keys,
)
from parrot_parents.stores.postgres.connections.pools import Statements
from parrot_parents.stores.postgres.connections.prepared import SAMPLE_PERCENT
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection
from parrot_parents.stores.postgres.search.filter_plan import (
    FilterPlan,
    checked_keys,
    estimate_statement,
    estimated_rows,
    lexical_anded,
    part_rows,
    sample_percent,
    sample_statement,
    sampled_rows,
    scan_ceiling,
    thinned,
    threshold,
    widened,
)
from parrot_parents.stores.postgres.search.filter_shapes import CompiledFilter, FilterShapes
from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, CandidateRule
from parrot_parents.stores.postgres.search.request import SearchRequest
from parrot_parents.stores.postgres.search.target_filter import targets_kept
from parrot_parents.stores.search_options import HNSWQueryOptions

__all__ = ["DOUBT", "DOUBT_SAMPLE_ROWS", "conjoined_keys", "key_conditions", "plan_filter"]

#: How many times the threshold the planner's estimate of conditions on several keys may
#: be and still be checked on a sample (:func:`plan_filter`).
DOUBT = 2
#: About how many rows that sample reads: at the threshold's share of the children (4 %
#: at 100k), about 20 of them pass, enough to tell a conjunction keeping a few from one
#: keeping the threshold's share.
DOUBT_SAMPLE_ROWS = 500


def conjoined_keys(filter: Mapping[str, Any]) -> set[str]:
    """The metadata keys that ``filter`` ANDs conditions on at its top level (its own
    keys, and those of the filters in a top-level ``$and``, at any depth of ``$and``)."""
    keys: set[str] = set()
    for key, value in filter.items():
        if key == "$and" and isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    keys |= conjoined_keys(item)
        elif not key.startswith("$"):
            keys.add(key)
    return keys


def key_conditions(filter: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The conditions on ``key`` that ``filter`` ANDs at its top level (as
    :func:`conjoined_keys` finds them), as one filter; ``{}`` when there are none."""
    found: list[dict[str, Any]] = []

    def walk(f: Mapping[str, Any]) -> None:
        for k, value in f.items():
            if k == "$and" and isinstance(value, list):
                for item in value:
                    if isinstance(item, Mapping):
                        walk(item)
            elif k == key:
                found.append({k: value})

    walk(filter)
    return found[0] if len(found) == 1 else {"$and": found} if found else {}


async def plan_filter(
    conn: ReadConnection,
    statements: Statements,
    opts: HNSWQueryOptions,
    dialect: Dialect,
    table: Table,
    request: SearchRequest,
    compiled: tuple[list[Any], str, Mapping[str, Any]],
    targets: bool,
    keyed: AbstractSet[str] = frozenset(),
    lists: Mapping[str, int] | None = None,
    candidates: CandidateRule = CANDIDATES,
    shapes: FilterShapes | None = None,
) -> FilterPlan:
    """How to rank a filtered search
    (:mod:`~parrot_parents.stores.postgres.search.filter_plan`): the planner's estimate
    of the children the filter keeps; for a range or a pattern it would rank exactly, a
    sample's count instead, unless the filter's other ANDed conditions bound it; for
    estimated conditions on several keys (:func:`conjoined_keys`) that it puts above the
    threshold by at most :data:`DOUBT` times, a sample's count too, which ranks them
    exactly when it is under half the threshold.
    ``compiled``: the search's predicates (the compiled filter last), the filter's SQL
    and the parameters' values; ``statements``: where the estimate's and the sample's
    statements are kept; ``opts``: the store's search options; ``targets``: the filter
    is judged on indexed rows' targets (never sampled); ``keyed``: the collection's
    filter keys, whose ranges the planner estimates; ``lists``: the long lists of the
    compiled filter (``compile_filter``'s), estimated from a few of their values
    (:func:`~parrot_parents.stores.postgres.search.filter_plan.thinned`). For estimated
    conditions on several filter keys, the planner also estimates each key's conditions
    alone, in the same statement, and the plan names the keys an exact ranking checks
    instead of reading their index (``FilterPlan.checked``). (A containment on another
    key is estimated from no statistics of its own: at 1,200 children, a value a third
    of them hold was estimated at one row.) An index plan of a hybrid or lexical search
    names the filter keys its lexical branch reads through their index
    (``FilterPlan.anded``: :func:`~parrot_parents.stores.postgres.search.filter_plan.lexical_anded`
    of ``candidates``, the store's candidate rule, widened as the search widens it), from
    each key's estimate: the estimates of several keys' conditions alone, or the
    filter's own when it names one filter key and ANDs nothing else. ``shapes``: where
    those conditions' compilations are kept (the searcher's; default: a new one)."""
    where, shape, params = compiled
    flt = dict(request.filter or {})
    unestimated = has_unestimated(flt, keyed)
    several = not targets and not unestimated and len(conjoined_keys(flt)) > 1
    keys = sorted(conjoined_keys(flt) & keyed) if several else []
    if len(keys) < 2:
        keys = []
    shapes = shapes or FilterShapes()
    # Each filter key's conditions alone, under parameter names of their own, with the
    # long lists of values each holds.
    parts = [
        shapes.compile(
            table, key_conditions(flt, k), dialect, keyed, f"{FILTER_PARAM_PREFIX}part{i}_"
        )
        for i, k in enumerate(keys)
    ]

    async def estimate(
        kept: list[Any],
        shape: str,
        args: Mapping[str, Any],
        alone: Sequence[CompiledFilter] = (),
        listed: Mapping[str, int] | None = None,
    ) -> tuple[int, int, list[int] | None]:
        # The planner's ``(kept, children)`` for ``kept`` (the last one's SQL ``shape``,
        # its long lists ``listed``), and its estimates of the conditions ``alone`` (None
        # without them).
        key = ("estimate", request.include_parents, shape, len(alone))
        statement = statements.get(key) or statements.remember(
            key,
            estimate_statement(
                table,
                targets_kept(table, flt, request.include_parents, keyed) if targets else kept,
                dialect,
                with_vector=not targets,
                parts=[part.where for part in alone],
            ),
        )
        # A long list of values is estimated from a few of them (:func:`thinned`).
        run, scale = thinned(args, listed or {})
        scales = []
        for part in alone:
            values, times = thinned(part.params, part.lists)
            run.update(values)
            scales.append(times)
        explained = await conn.fetch_with(statement.sql, statement.args(run), ())
        rows = part_rows(explained, len(alone)) if alone else None
        found, children = estimated_rows(explained, len(alone))
        alone_rows = (
            None if rows is None else [round(r * t) for r, t in zip(rows, scales, strict=True)]
        )
        return min(round(found * scale), children), children, alone_rows

    async def sample(rows: int | None = None) -> int | None:
        # A count of the rows the filter keeps in a sample of about ``rows`` (default
        # ``SAMPLE_ROWS``), scaled.
        key = ("sample", request.include_parents, shape)
        statement = statements.get(key) or statements.remember(
            key, sample_statement(table, where, dialect)
        )
        percent = (
            sample_percent(children)
            if rows is None
            else min(100.0, 100.0 * rows / max(children, 1))
        )
        run = {**params, SAMPLE_PERCENT: percent}
        counted = await conn.fetch_with(statement.sql, statement.args(run), ())
        return sampled_rows(counted, children)

    below = opts.filter_exact_below
    kept, children, key_rows = await estimate(where, shape, params, parts, lists)
    most = threshold(below, children)
    rows = {} if key_rows is None else dict(zip(keys, key_rows, strict=True))
    listed = {k: sum(parts[i].lists.values()) for i, k in enumerate(keys)}
    checked = checked_keys(rows)
    named = named_keys(flt)
    if not targets and not unestimated and len(named) == 1 and named <= keyed & conjoined_keys(flt):
        rows = {k: kept for k in named}
        listed = {k: sum((lists or {}).values()) for k in named}

    def _checking(plan: FilterPlan) -> FilterPlan:
        # An exact ranking reads the rows through the metadata indexes; an index plan's
        # lexical branch reads through those of the keys it ANDs.
        if plan.exact:
            return replace(plan, checked=checked)
        if request.mode == "dense" or not rows:
            return plan
        budget = widened(candidates, plan.lexical_scale).budget
        return replace(plan, anded=lexical_anded(rows, budget, listed))

    if several and most < kept <= DOUBT * most:
        # The planner multiplies the shares of conditions on different keys as if they
        # were independent. Where they are not (a scope, and a range of documents inside
        # it), the conjunction keeps far fewer: a sample counts it. On real text, a scope
        # ANDed with a range keeping 107 children was estimated at 4,400 to 6,800, and
        # ranked through the HNSW index (recall@10 0.87, 14 times the unfiltered search).
        # Only near the threshold, and a small sample: one of 2,000 big rows cost 16 ms
        # at 100k real children, and an estimate far above it is rarely that wrong.
        sampled = await sample(DOUBT_SAMPLE_ROWS)
        # Trusted over the planner only when clearly under: near the threshold, a
        # sample this small is as often wrong (at 100k synthetic children, a scope
        # keeping 5 % was sent to an exact attempt that read past the threshold in 24
        # of 65 searches, 2.9 times the unfiltered search, 2.1 through the indexes).
        if sampled is not None and sampled <= most // 2:
            return _checking(FilterPlan.for_estimate(sampled, children, below, sampled=True))
    if several:
        return _checking(FilterPlan.for_estimate(kept, children, below))
    if targets or not unestimated or kept > most:
        return _checking(FilterPlan.for_estimate(kept, children, below))
    # The planner's share for a range or a pattern is a constant: count a sample,
    # unless the conditions it does estimate keep few enough on their own.
    part = estimated_part(flt, keyed)
    if part:
        bound = shapes.compile(table, part, dialect, keyed)
        bounded, _, _ = await estimate([*where[:-1], bound.where], bound.sql, bound.params)
        if bounded <= most:
            return FilterPlan.for_estimate(kept, children, below)
    sampled = await sample()
    if sampled is None:
        return FilterPlan.for_estimate(kept, children, below)
    # Nothing bounds the filter, so a dense or hybrid exact ranking would read the
    # whole table: in a table larger than the threshold, that pays only where the
    # HNSW scan would come back short. (Lexical search alone reads the children
    # holding a query lexeme, never the table: it keeps the threshold.)
    scanned = children > most and request.mode != "lexical"
    # The scan's bound: the tuples an iterative scan may visit, else the candidate list.
    visits = opts.max_scan_tuples if opts.iterative_scan != "off" else opts.ef_search
    ceiling = scan_ceiling(children, request.limit, visits) if scanned else None
    return FilterPlan.for_estimate(sampled, children, below, sampled=True, ceiling=ceiling)

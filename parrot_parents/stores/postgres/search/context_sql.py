"""One statement for a search and everything its expansion reads.

The ranked hits become the CTE ``hits``; the same statement reads ``targets`` (what indexed
hits stand for), ``res`` (each hit as returned), ``w``/``nb`` (a window's neighbours),
``parents`` and ``kids`` (auto_merge), by primary key and the expression indexes. The rows
come back as one result tagged by ``kind``, sorted out by :func:`split_rows`; a read for
hits already in hand starts from their ids (:func:`seeded_statement`). A plan with a bot's
scope (:attr:`~parrot_parents.stores.context.ContextPlan.scope`) has each row judged
against it in the same statement (column ``in_scope``), by the SQL a scope check
(``ids_matching``) runs: the scoped bot's expansion needs no read of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.documents import Document
from sqlalchemy import (
    Integer,
    Select,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    column,
    func,
    literal_column,
    null,
    select,
    text,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter, ColumnElement

from parrot_parents.stores.context import Context, ContextPlan
from parrot_parents.stores.filters import SCOPE_PARAM_PREFIX, compile_filter, filter_params
from parrot_parents.stores.postgres.collections.schema import meta_field
from parrot_parents.stores.postgres.search.hybrid import RANK_TYPES, unranked
from parrot_parents.stores.postgres.search.kept import over_cap
from parrot_parents.stores.records.markers import (
    CHILD_PREDICATE,
    INDEXES,
    NOT_INDEXED_PREDICATE,
    PARENT_PREDICATE,
    is_indexed,
    is_parent,
)
from parrot_parents.stores.results import SearchResult

__all__ = [
    "HIT_COLUMNS",
    "Split",
    "plan_key",
    "scope_params",
    "search_with_context",
    "seeded_statement",
    "split_rows",
]

T = TypeVar("T")

#: Columns of ``hits`` (the ranked statement must provide them, in any order).
HIT_COLUMNS = ("id", "document", "cmetadata", *RANK_TYPES, "ord")


def _key(column: Any, key: str) -> Any:
    """``column ->> 'key'`` with a literal key (small CTEs: no index to match)."""
    return column.op("->>", return_type=Text)(literal_column(f"'{key}'"))


def _rows(kind: str, source: Any) -> Select[Any]:
    """``source``'s rows in the shape of the union (kind, ord, id, ... fused_score)."""
    return select(
        literal_column(f"'{kind}'", Text).label("kind"),
        cast(null(), Integer).label("ord"),
        source.c.id,
        source.c.document,
        source.c.cmetadata,
        *unranked(*RANK_TYPES),
    )


def _context(table: Table, res: Any, plan: ContextPlan | None) -> list[Select[Any]]:
    """The parts of the union that read ``plan`` for the hits in ``res`` (column meta)."""
    if plan is None:
        return []
    parts: list[Select[Any]] = []
    pid_sources: list[Select[Any]] = [select(_key(res.c.meta, "parent_document_id").label("pid"))]
    if plan.window is not None:
        index = _key(res.c.meta, "chunk_index")
        w = (
            select(
                _key(res.c.meta, "document_id").label("d"),
                (cast(index, Integer) - bindparam("window_n", type_=Integer)).label("lo"),
                (cast(index, Integer) + bindparam("window_n", type_=Integer)).label("hi"),
            )
            .where(
                func.jsonb_typeof(res.c.meta.op("->")(literal_column("'chunk_index'"))) == "number"
            )
            .where(index.op("~")(literal_column("'^-?[0-9]+$'")))
            .where(_key(res.c.meta, "document_id").is_not(None))
            # a parent (reached through a summary) is its own context: no window
            .where(text(f"NOT coalesce({PARENT_PREDICATE.replace('cmetadata', 'meta')}, false)"))
            .distinct()
            .cte("w")
        )
        chunk = meta_field(table, "chunk_index").cast(Integer)
        nb = (
            select(table.c.id, table.c.document, table.c.cmetadata)
            .select_from(
                table.join(
                    w,
                    and_(meta_field(table, "document_id") == w.c.d, chunk.between(w.c.lo, w.c.hi)),
                )
            )
            .where(text(CHILD_PREDICATE))
            .cte("nb")
        )
        parts.append(_rows("n", nb))
        pid_sources.append(select(_key(nb.c.cmetadata, "parent_document_id").label("pid")))
    pids = union(*pid_sources).cte("pids") if len(pid_sources) > 1 else pid_sources[0].cte("pids")
    parents = (
        select(table.c.id, table.c.document, table.c.cmetadata)
        .where(table.c.id.in_(select(pids.c.pid).where(pids.c.pid.is_not(None))))
        .where(text(PARENT_PREDICATE))
        .cte("parents")
    )
    if plan.parents or plan.children:
        parts.append(_rows("p", parents))
    if plan.children:
        kids = (
            select(table.c.id, table.c.document, table.c.cmetadata)
            .where(meta_field(table, "parent_document_id").in_(select(parents.c.id)))
            .cte("kids")
        )
        parts.append(_rows("c", kids))
    return parts


def _scope_condition(cmetadata: Any, plan: ContextPlan | None) -> ColumnElement[bool] | None:
    """``plan``'s scope over ``cmetadata`` (parameters ``scope_<i>``); None without one."""
    if plan is None or plan.scope is None:
        return None
    return compile_filter(cmetadata, json.loads(plan.scope), prefix=SCOPE_PARAM_PREFIX)


@functools.lru_cache(maxsize=512)
def _scope_compiled(scope: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A scope's SQL (its structure: the values are parameters) and its values, by name;
    remembered per scope, as a bot asks with the same one every time."""
    condition = compile_filter(
        column("cmetadata", JSONB), json.loads(scope), prefix=SCOPE_PARAM_PREFIX
    )
    # The SQL and the type of each parameter (which decides its cast on PostgreSQL).
    types = ",".join(
        f"{e.key}:{e.type!r}" for e in visitors.iterate(condition) if isinstance(e, BindParameter)
    )
    return f"{condition} [{types}]", tuple(filter_params(condition).items())


def scope_params(plan: ContextPlan | None) -> dict[str, Any]:
    """The values a statement of ``plan`` binds for its scope, by name (none without)."""
    if plan is None or plan.scope is None:
        return {}
    return dict(_scope_compiled(plan.scope)[1])


def plan_key(plan: ContextPlan | None) -> ContextPlan | None:
    """``plan`` as a statement's key holds it: a scope by its SQL, not its values, so
    bots scoped to different values of one key (a tenant each) share one statement."""
    if plan is None or plan.scope is None:
        return plan
    return dataclasses.replace(plan, scope=_scope_compiled(plan.scope)[0])


def _judged(rows: Any, plan: ContextPlan | None) -> Any:
    """``rows`` (a union of :func:`_rows`' shape) with ``in_scope`` beside each row,
    when ``plan`` has a scope; else ``rows`` as they are."""
    if plan is None or plan.scope is None:
        return rows
    union_rows = rows.subquery("read")
    condition = _scope_condition(union_rows.c.cmetadata, plan)
    assert condition is not None
    # NULL (a row without metadata, a comparison with a missing key) is outside, as a
    # WHERE clause would have it.
    return select(*union_rows.c, func.coalesce(condition, False).label("in_scope"))


def search_with_context(
    table: Table, ranked: Select[Any], plan: ContextPlan | None, capped: Any | None = None
) -> Any:
    """``ranked`` (columns :data:`HIT_COLUMNS`) with its targets and ``plan``'s reads.

    Binds what ``ranked`` binds, plus ``window_n`` for a window plan. ``capped``: the capped
    :func:`~parrot_parents.stores.postgres.search.kept.kept_rows` that ``ranked`` ranks; one
    more row, of kind ``x``, says that they reached their cap (:attr:`Split.over_cap`).
    """
    hits = ranked.cte("hits")
    indexes = _key(hits.c.cmetadata, INDEXES)
    targets = (
        select(table.c.id, table.c.document, table.c.cmetadata)
        .where(
            table.c.id.in_(
                select(indexes).where(_key(hits.c.cmetadata, "document_type") == "indexed")
            )
        )
        .where(text(NOT_INDEXED_PREDICATE))
        .cte("targets")
    )
    first = select(
        literal_column("'h'", Text).label("kind"),
        hits.c.ord,
        hits.c.id,
        hits.c.document,
        hits.c.cmetadata,
        *(hits.c[name] for name in RANK_TYPES),
    )
    parts: list[Select[Any]] = [first, _rows("t", targets)]
    if capped is not None:
        over = select(
            cast(null(), Text).label("id"),
            cast(null(), Text).label("document"),
            cast(null(), JSONB).label("cmetadata"),
        ).where(over_cap(capped))
        parts.append(_rows("x", over.subquery("over")))
    if plan is not None:
        res = (
            select(func.coalesce(targets.c.cmetadata, hits.c.cmetadata).label("meta"))
            .select_from(hits.outerjoin(targets, targets.c.id == indexes))
            .cte("res")
        )
        parts += _context(table, res, plan)
    return _judged(union_all(*parts), plan)


def seeded_statement(table: Table, plan: ContextPlan) -> Any:
    """``plan``'s reads for the rows whose ids are bound as ``seed_ids`` (a text array)."""
    res = (
        select(table.c.cmetadata.label("meta"))
        .where(table.c.id == any_(bindparam("seed_ids", type_=ARRAY(Text))))
        .cte("res")
    )
    parts = _context(table, res, plan)
    return _judged(union_all(*parts) if len(parts) > 1 else parts[0], plan)


@dataclass
class Split:
    """The rows of one statement, sorted out by kind."""

    hits: list[SearchResult] = field(default_factory=list)
    targets: dict[str, SearchResult] = field(default_factory=dict)
    context: Context | None = None
    #: The capped rows an exact attempt ranked reached their cap: the filter keeps more
    #: than the threshold, and these hits are not its exact top.
    over_cap: bool = False


def _result(r: Mapping[str, Any], mode_dense: bool) -> SearchResult:
    distance = _opt(float, r["distance"])
    return SearchResult(
        id=r["id"],
        content=r["document"],
        metadata=dict(r["cmetadata"] or {}),
        score=None if distance is None else 1.0 - distance,
        distance=distance,
        dense_rank=int(r["ord"]) if mode_dense else _opt(int, r["dense_rank"]),
        lexical_rank=None if mode_dense else _opt(int, r["lexical_rank"]),
        lexical_score=None if mode_dense else _opt(float, r["lexical_score"]),
        fused_score=None if mode_dense else _opt(float, r["fused_score"]),
        lexical_expansion=_opt(tuple, r["lexical_expansion"]),
        lexical_bounded=None if mode_dense else _opt(bool, r["lexical_bounded"]),
    )


def _opt(convert: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else convert(value)


def _plain(r: Mapping[str, Any]) -> SearchResult:
    return SearchResult(id=r["id"], content=r["document"], metadata=dict(r["cmetadata"] or {}))


def split_rows(
    rows: Sequence[Mapping[str, Any]],
    plan: ContextPlan | None,
    *,
    dense: bool,
    seeds: list[dict[str, Any]] | None = None,
) -> Split:
    """Sort a statement's rows into hits (by rank), targets and a :class:`Context`.

    Args:
        rows: rows of :func:`search_with_context` or :func:`seeded_statement`, as
            mappings (asyncpg records, or SQLAlchemy's ``row._mapping``).
        plan: the plan the statement read (None: hits and targets only).
        dense: the search was dense only (the dense rank is the hit's rank).
        seeds: for a seeded read, the metadata of the seed rows (else from the hits).
    """
    out = Split()
    hit_rows = sorted((r for r in rows if r["kind"] == "h"), key=lambda r: r["ord"])
    out.hits = [_result(r, dense) for r in hit_rows]
    out.targets = {r["id"]: _plain(r) for r in rows if r["kind"] == "t"}
    out.over_cap = any(r["kind"] == "x" for r in rows)
    if plan is None:
        return out
    if seeds is None:
        seeds = []
        for hit in out.hits:
            target = out.targets.get(str(hit.metadata.get(INDEXES)), hit)
            seeds.append(target.metadata if is_indexed(hit.metadata) else hit.metadata)
    ctx = Context(plan=plan)
    if plan.scope is not None:
        ctx.judged = {str(r["id"]): bool(r["in_scope"]) for r in rows if r["id"] is not None}
    neighbours: dict[str, dict[str, SearchResult]] = {}
    for r in rows:
        kind = r["kind"]
        if kind == "p":
            ctx.parents[r["id"]] = Document(
                id=r["id"], page_content=r["document"], metadata=dict(r["cmetadata"] or {})
            )
        elif kind == "n":
            row = _plain(r)
            neighbours.setdefault(str(row.metadata.get("document_id")), {})[row.id] = row
        elif kind == "c":
            row = _plain(r)
            ctx.children.setdefault(str(row.metadata.get("parent_document_id")), []).append(row)
    for d, by_id in neighbours.items():
        ctx.neighbours[d] = sorted(by_id.values(), key=lambda x: int(x.metadata["chunk_index"]))
    for kids in ctx.children.values():
        kids.sort(key=lambda x: (_start(x), x.id))
    # What the statement looked for, computed from the same rows it used.
    looked = [*seeds, *(n.metadata for rows_ in ctx.neighbours.values() for n in rows_)]
    ctx.parent_ids = {
        str(m["parent_document_id"]) for m in looked if m.get("parent_document_id") is not None
    }
    if plan.window is not None:
        n = plan.window
        for m in seeds:
            index, doc = m.get("chunk_index"), m.get("document_id")
            # A JSON integer (not a bool).
            if type(index) is int and doc is not None and not is_parent(m):
                ctx.windows.setdefault(str(doc), set()).add((index - n, index + n))
    out.context = ctx
    return out


def _start(row: SearchResult) -> int:
    value = row.metadata.get("start_index")
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0

"""Statements compiled once with their constants inline
(:mod:`parrot_parents.stores.postgres.connections.prepared`)."""

from __future__ import annotations

import pytest
from sqlalchemy import MetaData, bindparam, select
from sqlalchemy.dialects import postgresql

from parrot_parents.stores.postgres.collections.schema import collection_table
from parrot_parents.stores.postgres.connections.prepared import Prepared

DIALECT = postgresql.asyncpg.dialect()  # type: ignore[attr-defined]


def _table():
    return collection_table("docs", 4, metadata=MetaData())


def test_constants_are_inline_and_runtime_values_stay_bound() -> None:
    t = _table()
    q = bindparam("query_vector")
    stmt = (
        select(t.c.id)
        .where(t.c.cmetadata["kind"].astext == "it's")
        .order_by(t.c.embedding.cosine_distance(q))
        .limit(7)
    )
    prepared = Prepared.compile(stmt, DIALECT)
    assert "LIMIT CAST(7 AS INTEGER)" in prepared.sql
    assert "'it''s'" in prepared.sql  # escaped by the dialect, not pasted
    assert "$1" in prepared.sql and "$2" not in prepared.sql
    assert prepared.names == ("query_vector",)
    assert prepared.args({"query_vector": [1.0], "other": 1}) == [[1.0]]


def test_a_runtime_parameter_used_twice_is_bound_each_time() -> None:
    t = _table()
    n = bindparam("window_n")
    stmt = select(t.c.id).where(t.c.id == "a").limit(3).offset(n).where(n > 0)
    prepared = Prepared.compile(stmt, DIALECT)
    assert prepared.names.count("window_n") == len(prepared.names)
    assert prepared.args({"window_n": 2}) == [2] * len(prepared.names)


def test_a_missing_runtime_value_is_a_key_error() -> None:
    t = _table()
    prepared = Prepared.compile(select(t.c.id).where(t.c.id == bindparam("seed_ids")), DIALECT)
    with pytest.raises(KeyError):
        prepared.args({})


def test_inline_constants_keep_their_types() -> None:
    """A NULL float in a UNION stays a float (it read as text and the UNION failed), and
    a float weight given as 1 stays a float (integer division otherwise)."""
    from sqlalchemy import Float, literal, union_all

    t = _table()
    stmt = union_all(
        select(t.c.id, literal(None, Float).label("x")),
        select(t.c.id, (literal(1, Float) / 3).label("x")),
    )
    sql = Prepared.compile(stmt, DIALECT).sql
    assert "CAST(NULL AS FLOAT)" in sql
    assert "CAST(1 AS FLOAT)" in sql


def test_the_statements_remembered_are_the_most_recently_used() -> None:
    from parrot_parents.stores.postgres.connections.pools import Statements

    class Few(Statements):
        LIMIT = 3

    statements = Few()
    made = {k: Prepared(f"SELECT {k}", ()) for k in range(5)}
    for k in range(3):
        statements.remember((k,), made[k])
    assert statements.get((0,)) is made[0]  # used: now the most recent
    statements.remember((3,), made[3])
    assert set(statements) == {(0,), (2,), (3,)}
    statements.remember((4,), made[4])
    assert set(statements) == {(0,), (3,), (4,)}
    assert statements.get((1,)) is None and statements.get((1,), "x") == "x"

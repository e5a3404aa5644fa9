"""The store's hot statements, built with SQLAlchemy Core and run by the driver.

A search statement without a filter depends only on its shape, so :class:`Prepared`
compiles it once with its constants inline (:func:`inline_constants`: a bound ``LIMIT``
keeps PostgreSQL re-planning every execution) and only the runtime values bound
(:data:`RUNTIME_PARAMS`), and runs it on the read pool's asyncpg connections
(:mod:`~parrot_parents.stores.postgres.connections.read_pool`), skipping SQLAlchemy's
execution layer. A filter's values are runtime values too, bound under names fixed by its
structure (:func:`~parrot_parents.stores.filters.compile_filter`), so a filtered statement
is prepared once per filter structure. Measured: docs/performance.md, "Does the planner
use the HNSW index?".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, Float, Integer, Numeric, String, cast, null
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter

from parrot_parents.stores.filters import FILTER_PARAM_PREFIX, SCOPE_PARAM_PREFIX

__all__ = [
    "KEPT_LIMIT",
    "RUNTIME_PARAMS",
    "SAMPLE_PERCENT",
    "ConnectionDropped",
    "Prepared",
    "inline_constants",
    "is_runtime",
]

#: The most rows an exact attempt reads (:mod:`~parrot_parents.stores.postgres.search.kept`):
#: bound at each run, as the threshold follows the collection's size.
KEPT_LIMIT = "kept_limit"
#: The share of the table's blocks a sampled estimate reads, in percent
#: (:func:`~parrot_parents.stores.postgres.search.filter_plan.sample_statement`).
SAMPLE_PERCENT = "sample_percent"

#: Parameters whose values change from one execution to the next, besides a filter's
#: (:func:`is_runtime`); every other bound value of a :class:`Prepared` statement is a
#: constant of its shape.
RUNTIME_PARAMS = frozenset(
    {
        "query_vector",
        "lexical_query",
        "window_n",
        "seed_ids",
        KEPT_LIMIT,
        SAMPLE_PERCENT,
    }
)


def is_runtime(name: str) -> bool:
    """Whether the parameter ``name`` is bound at each execution: one of
    :data:`RUNTIME_PARAMS`, or a metadata filter's or a scope's value."""
    return name in RUNTIME_PARAMS or name.startswith((FILTER_PARAM_PREFIX, SCOPE_PARAM_PREFIX))


#: Types an inline constant is cast to, as its bind was (others: JSON keys, say, need none).
_CAST = (Boolean, Float, Integer, Numeric, String)


class ConnectionDropped(ConnectionError):
    """The server closed a pooled connection under a read (a restart, a crashed backend):
    the pool replaces its connections, and the read may run once more on a fresh one."""


def inline_constants(statement: Any) -> Any:
    """A copy of ``statement`` whose bound values, except the runtime ones
    (:func:`is_runtime`), render as SQL literals (SQLAlchemy's ``literal_execute``,
    escaped by the dialect).

    Only for statements built from the product's own constants and a compiled filter
    (whose values stay parameters): never one holding a caller's values otherwise.
    """

    def swap(element: Any, **_: Any) -> Any:
        if (
            not isinstance(element, BindParameter)
            or is_runtime(element.key)
            or element.literal_execute
        ):
            return None
        # Typed as the bound parameter was ($2::FLOAT): a bare NULL in a UNION reads as
        # text, and a weight of 1 written as an integer would divide as one.
        value = null() if element.value is None else element.render_literal_execute()
        return cast(value, element.type) if isinstance(element.type, _CAST) else value

    return visitors.replacement_traverse(statement, {}, swap)


@dataclass(frozen=True)
class Prepared:
    """A Core statement compiled once for repeated execution.

    Attributes:
        sql: its SQL text for the asyncpg dialect, constants inline, runtime values as
            ``$1..$n``.
        names: the runtime parameter behind each ``$i``, in order.
    """

    sql: str
    names: tuple[str, ...]

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> Prepared:
        """Inline ``statement``'s constants and compile it for ``dialect``.

        Raises:
            ValueError: the statement binds a parameter that is not a runtime one
                (:func:`is_runtime`) and could not be inlined.
        """
        inlined = inline_constants(statement)
        # Placeholder values: rendering the inline constants needs every bind to have one;
        # the runtime ones stay ``$i`` whatever their value.
        placeholders = inlined.params(dict.fromkeys(RUNTIME_PARAMS))
        compiled = placeholders.compile(
            dialect=dialect, compile_kwargs={"render_postcompile": True}
        )
        names = tuple(compiled.positiontup or ())
        unknown = sorted(name for name in set(names) if not is_runtime(name))
        if unknown:
            raise ValueError(f"statement binds non-runtime parameters: {unknown}")
        return cls(str(compiled), names)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments for ``params``.

        Raises:
            KeyError: a runtime parameter of the statement is missing from ``params``.
        """
        return [params[name] for name in self.names]

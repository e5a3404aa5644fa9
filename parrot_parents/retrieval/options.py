"""Retrieval options: every per-call option, its default and its limits, stated once.

The same definitions serve every surface: keyword arguments of
``Chatbot.get_vector_context`` / ``retrieve`` / ``ask``, a row of the ``bots`` table
(:class:`~parrot_parents.bots.settings.BotSettings`), the HTTP body of ``/context`` and
``/ask``, the CLI flags of ``ask`` and ``eval``, and :class:`~parrot_parents.eval.EvalConfig`.
So a value accepted (or refused) on one surface is accepted (or refused) on all of them.

Resolution order, for every option (spec FEAT-128, "Resolution order"): the per-call value,
then the bot's setting, then :data:`DEFAULTS`. ``None`` means "not set here". One default
depends on another option: a ``limit`` set nowhere is :data:`BUDGETED_LIMIT` (20) when a
``budget`` is set, so that the budget can be filled, and 10 otherwise.

=====================  ============  =================================================
option                 default       meaning (unit)
=====================  ============  =================================================
``expand_to_parent``   ``False``     widen hits per ``mode``
``limit``              10 (20 with   children kept after search and rerank, 1..100;
                       a budget)     with a budget the packer keeps what fits
``filter``             none          metadata filter on the children (store syntax)
``rerank_candidates``  4 x limit     children searched before reranking, 1..1000
``budget``             none          context budget in characters of passage text,
                                     1..10,000,000 (see :mod:`.packing`)
``mode``               ``parent``    expansion mode (:mod:`.modes`)
``search_mode``        ``hybrid``    ``dense``, ``lexical`` (BM25) or ``hybrid`` (both,
                                     fused by weighted RRF)
``rrf_k``              60            the RRF constant, 1..1000
``dense_weight``       1.0           weight of the dense ranks in the fusion, 0..10
``lexical_weight``     1.0           weight of the lexical ranks in the fusion, 0..10
``trim``               ``True``      with a budget, hand over the hits that do not fit
                                     whole as their best sentences (:mod:`.trimming`)
``prf``                ``False``     pseudo-relevance feedback (RM3) in the lexical
                                     branch (``lexical``/``hybrid``; PostgreSQL stores
                                     only: a Milvus store refuses it)
=====================  ============  =================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from parrot_parents.errors import ConfigurationError
from parrot_parents.retrieval.modes import ExpansionMode
from parrot_parents.stores.filters import validate_filter
from parrot_parents.stores.search_options import SearchMode

__all__ = [
    "BUDGETED_LIMIT",
    "BUDGET_MAX",
    "DEFAULTS",
    "LIMIT_MAX",
    "RERANK_CANDIDATES_MAX",
    "Budget",
    "Filter",
    "Limit",
    "RerankCandidates",
    "ResolvedOptions",
    "RetrievalOptions",
    "RetrievalOverrides",
    "RrfK",
    "SearchMode",
    "Weight",
    "echo_value",
    "option_problem",
]

LIMIT_MAX = 100
#: The default ``limit`` when a budget is set (the packer keeps what fits).
BUDGETED_LIMIT = 20
RERANK_CANDIDATES_MAX = 1000
BUDGET_MAX = 10_000_000
FILTER_MAX_KEYS = 20

#: Children kept after search and rerank.
Limit = Annotated[int, Field(ge=1, le=LIMIT_MAX, description="children kept after rerank")]
#: Children searched before reranking.
RerankCandidates = Annotated[
    int,
    Field(ge=1, le=RERANK_CANDIDATES_MAX, description="children searched before reranking"),
]
#: Context budget in characters of passage text.
Budget = Annotated[
    int, Field(ge=1, le=BUDGET_MAX, description="context budget in characters of passage text")
]
#: A JSON scalar allowed as a plain (equality) metadata filter value; null matches a
#: stored null, as in the Python API (a store that cannot hold one says so).
Scalar = str | int | float | bool | None


def _checked_filter(value: dict[str, Any]) -> dict[str, Any]:
    try:
        validate_filter(value)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None  # the message and its hint, as the store says them
    return value


#: A filter value: a scalar (equality), an operator object, or a list (``$and``/``$or``/
#: ``$not``). Checked in full by :func:`~parrot_parents.stores.filters.validate_filter`,
#: whose message is the one every surface gives.
FilterValue = Scalar | dict[str, Any] | list[Any]
#: Metadata filter on the children: langchain-postgres operators, e.g.
#: ``{"source": "handbook.md"}`` or ``{"year": {"$gte": 2022}}``.
Filter = Annotated[
    dict[str, FilterValue],
    Field(
        max_length=FILTER_MAX_KEYS,
        description="metadata filter (langchain-postgres operators), e.g. "
        "{'source': 'x.md'} or {'year': {'$gte': 2022}}",
    ),
    AfterValidator(_checked_filter),
]


#: The RRF constant k.
RrfK = Annotated[int, Field(ge=1, le=1000, description="reciprocal rank fusion constant k")]
#: Weight of one branch in the fusion.
Weight = Annotated[float, Field(ge=0.0, le=10.0, description="weight of a branch in the fusion")]


class RetrievalOverrides(TypedDict, total=False):
    """The keyword arguments every retrieval entry point takes (all optional).

    The fields of :class:`RetrievalOptions`, spelled out because a type checker reads a
    ``TypedDict`` only from its source (a test holds the two to the same names).
    """

    expand_to_parent: bool | None
    limit: int | None
    filter: dict[str, Any] | None
    rerank_candidates: int | None
    budget: int | None
    mode: str | ExpansionMode | None
    search_mode: SearchMode | None
    rrf_k: int | None
    dense_weight: float | None
    lexical_weight: float | None
    trim: bool | None
    prf: bool | None


class RetrievalOptions(BaseModel):
    """Retrieval options; ``None`` means "not set at this level". Frozen and strict.

    Build one from keyword arguments with :meth:`from_overrides` (which raises
    :class:`ConfigurationError`), or with ``model_validate`` (pydantic errors, as the
    HTTP layer wants them). :meth:`resolve` applies the resolution order.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    expand_to_parent: bool | None = Field(None, description="fold hits into their parents")
    limit: Limit | None = None
    filter: Filter | None = None
    rerank_candidates: RerankCandidates | None = None
    budget: Budget | None = None
    mode: ExpansionMode | None = Field(
        None, description="'parent', 'auto_merge:T' (0 < T <= 1) or 'window:N' (N >= 1)"
    )
    search_mode: SearchMode | None = Field(
        None, description="'dense', 'lexical' (BM25) or 'hybrid' (both, fused by RRF)"
    )
    rrf_k: RrfK | None = None
    dense_weight: Weight | None = None
    lexical_weight: Weight | None = None
    trim: bool | None = Field(
        None,
        description="with a budget, hand over the hits that do not fit whole as their best "
        "sentences",
    )
    prf: bool | None = Field(
        None,
        description="pseudo-relevance feedback (RM3) in the lexical branch: a second BM25 "
        "pass with the strongest terms of the first pass's top 10 children; PostgreSQL only",
    )

    @classmethod
    def from_overrides(
        cls, overrides: Mapping[str, Any] | None = None, *, names: Mapping[str, str] | None = None
    ) -> RetrievalOptions:
        """Validate keyword arguments (unset or None ones stay unset; an unknown one is
        refused whatever its value, None too).

        Args:
            overrides: option name -> value.
            names: how each option is called on the caller's surface, for the message
                (e.g. ``{"limit": "context_search_limit"}``).

        Raises:
            ConfigurationError: an unknown option or a bad value; the message names it.
        """
        values = {
            k: v for k, v in (overrides or {}).items() if v is not None or k not in cls.model_fields
        }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for err in exc.errors(include_url=False):
                key = str(err["loc"][0]) if err["loc"] else ""
                shown = (names or {}).get(key, key)
                if err["type"] == "extra_forbidden":
                    known = ", ".join(sorted(cls.model_fields))
                    problems.append(f"unknown option {shown!r} (known: {known})")
                else:
                    problems.append(option_problem(err, key, shown))
            raise ConfigurationError("; ".join(problems)) from None

    def over(self, base: RetrievalOptions | None) -> RetrievalOptions:
        """These options where set, else ``base``'s (per call over the bot's settings)."""
        if base is None:
            return self
        return base.model_copy(update=self.set_fields())

    def set_fields(self) -> dict[str, Any]:
        """The options that are set, as Python values."""
        return {k: v for k, v in self if v is not None}

    def resolve(self, base: RetrievalOptions | None = None) -> ResolvedOptions:
        """Apply the resolution order: these options, then ``base``, then :data:`DEFAULTS`."""
        # Merged as plain dicts of the set values: the same order as ``over``, without
        # copying models on every query (a hot path).
        o = {**(base.set_fields() if base is not None else {}), **self.set_fields()}
        if o.get("limit") is None and o.get("budget") is not None:
            # With a budget the packer decides how much fits, so search deeper: 20 children
            # fill 4,000 characters of 400-character children (docs/benchmarks.md).
            o["limit"] = BUDGETED_LIMIT
        o = {**DEFAULTS.set_fields(), **o}
        if o.get("filter") is not None:
            o["filter"] = dict(o["filter"])  # the caller's copy: the model's stays frozen
        values: dict[str, Any] = {name: o.get(name) for name in RetrievalOptions.model_fields}
        return ResolvedOptions(**values)


@dataclass(frozen=True)
class ResolvedOptions:
    """Options after resolution: what one query runs with.

    The fields of :class:`RetrievalOptions`, none of them optional but ``filter``,
    ``rerank_candidates`` and ``budget``; they have no defaults here, since
    :data:`DEFAULTS` is the one place defaults live. ``rerank_candidates`` None means
    4 x ``limit`` (used only when a reranker is set); ``budget`` None means no budget.
    """

    expand_to_parent: bool
    limit: int
    filter: dict[str, Any] | None
    rerank_candidates: int | None
    budget: int | None
    mode: ExpansionMode
    search_mode: SearchMode
    rrf_k: int
    dense_weight: float
    lexical_weight: float
    trim: bool
    prf: bool

    def candidates(self, reranking: bool) -> int:
        """Children to search: ``limit``, or the rerank candidates (at least ``limit``)."""
        if not reranking:
            return self.limit
        wanted = self.rerank_candidates if self.rerank_candidates is not None else 4 * self.limit
        return max(wanted, self.limit)


#: The defaults of every option (the last level of the resolution order).
DEFAULTS = RetrievalOptions(
    expand_to_parent=False,
    limit=10,
    mode=ExpansionMode(),
    # Hybrid wins at the default child size at every budget on the dev set, and lexical
    # matching is what transfers to text full of numbers and names (docs/benchmarks.md).
    search_mode="hybrid",
    rrf_k=60,
    dense_weight=1.0,
    lexical_weight=1.0,
    # Sentences of late-chunked children beat whole children at every budget of the dev
    # set, most where the budget is small (docs/benchmarks.md).
    trim=True,
    # Measured on the dev set (docs/benchmarks.md, "Pseudo-relevance feedback").
    prf=False,
)

_INT_BOUNDS = {"limit": LIMIT_MAX, "rerank_candidates": RERANK_CANDIDATES_MAX, "budget": BUDGET_MAX}
#: The words of a value outside a bounded option's range (NaN included: it compares
#: false with both bounds, so pydantic names whichever bound it tried first).
_RANGES = {
    "rrf_k": "an int from 1 to 1,000",
    "dense_weight": "a number from 0 to 10",
    "lexical_weight": "a number from 0 to 10",
}
_OUT_OF_RANGE = {"greater_than_equal", "less_than_equal", "finite_number"}
_ECHO_MAX = 80


def echo_value(value: Any, *, as_json: bool = False) -> str:
    """``value`` as an error message shows it: ``repr`` (Python, the CLI) or JSON (HTTP,
    so that ``true`` comes back as ``true``), cut to 80 characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr) if as_json else repr(value)
    return text if len(text) <= _ECHO_MAX else text[: _ECHO_MAX - 3] + "..."


def option_problem(err: ErrorDetails, option: str, shown: str, *, as_json: bool = False) -> str:
    """The message of one pydantic error on ``option``, called ``shown`` on the caller's
    surface (``context_search_limit`` in a bot row): the words every surface gives.

    The message names the option itself, e.g. ``limit must be a positive int (at most
    100), got 0``; a filter's is the filter compiler's own. ``as_json`` echoes values as
    JSON (see :func:`echo_value`).
    """
    top = len(err["loc"]) == 1
    msg = err["msg"].removeprefix("Value error, ")
    value = echo_value(err["input"], as_json=as_json)
    if option in _INT_BOUNDS and top:
        return f"{shown} must be a positive int (at most {_INT_BOUNDS[option]:,}), got {value}"
    if option in _RANGES and top and err["type"] in _OUT_OF_RANGE:
        return f"{shown} must be {_RANGES[option]}, got {value}"
    if option == "filter" and top and err["type"] == "value_error":
        # The compiler's words name the filter's key or operator.
        return msg
    if option == "mode" and top:
        return f"{shown} {value}: {msg}"
    where = ".".join([shown, *(str(p) for p in err["loc"][1:])])
    return f"{where}: {err['msg']}, got {value}"

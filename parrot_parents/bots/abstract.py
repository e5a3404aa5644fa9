"""Base class of the bots: the retrieval settings every bot has, validated once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from parrot_parents.bots.settings import SETTING_NAMES
from parrot_parents.errors import ConfigurationError
from parrot_parents.retrieval.modes import ExpansionMode
from parrot_parents.retrieval.options import DEFAULTS, RetrievalOptions, SearchMode
from parrot_parents.retrieval.pipeline import Retriever
from parrot_parents.retrieval.scope import validate_scope

if TYPE_CHECKING:
    from parrot_parents.bots.settings import BotSettings
    from parrot_parents.rerankers.abstract import AbstractReranker
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher

__all__ = ["AbstractBot"]


class AbstractBot:
    """Holds a bot's retrieval configuration; validated at construction.

    Attributes:
        name: the bot's name.
        store: the vector store searched for children.
        parent_searcher: every read expansion needs; default None (spec FEAT-128).
        expand_to_parent, context_search_limit, ..., prf: the bot's defaults of the
            per-call options (every one but ``filter``, named as in
            :data:`~parrot_parents.bots.settings.SETTING_NAMES`), with their limits and
            units (:mod:`parrot_parents.retrieval.options`); None: the package default.
        reranker: optional cross-encoder reranker applied to the children.
        scope: a metadata filter (:mod:`parrot_parents.stores.filters`) that every search
            of the bot holds to, on every surface: a call's ``filter`` narrows it, never
            widens or removes it, and expansion never returns a row outside it
            (:mod:`parrot_parents.retrieval.scope`). None (default): the whole collection.
        owns_store: :meth:`close` closes the store (True unless a manager shares it).
        settings: the validated ``bots`` row the bot was built from; None (default) for a
            bot made in code. :attr:`description` and :attr:`collection` come from it.

    Raises:
        ConfigurationError: a bad setting or scope (the message names it), or
            ``expand_to_parent=True`` without a parent searcher.
    """

    def __init__(
        self,
        *,
        name: str = "chatbot",
        store: AbstractStore | None = None,
        parent_searcher: AbstractParentSearcher | None = None,
        expand_to_parent: bool = bool(DEFAULTS.expand_to_parent),
        context_search_limit: int | None = None,
        reranker: AbstractReranker | None = None,
        rerank_candidates: int | None = None,
        context_budget: int | None = None,
        expansion_mode: str | ExpansionMode = "parent",
        search_mode: SearchMode | None = None,
        rrf_k: int | None = None,
        dense_weight: float | None = None,
        lexical_weight: float | None = None,
        trim: bool | None = None,
        prf: bool | None = None,
        owns_store: bool = True,
        settings: BotSettings | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        if store is None and parent_searcher is not None:
            # The seed's examples inject only the searcher; it knows its store.
            store = parent_searcher.store
        self.name = name
        self.settings = settings
        self.store = store
        self.parent_searcher = parent_searcher
        self.reranker = reranker
        self.scope = validate_scope(scope)
        self.owns_store = owns_store
        self.expand_to_parent = expand_to_parent
        self.context_search_limit = context_search_limit
        self.rerank_candidates = rerank_candidates
        self.context_budget = context_budget
        self.expansion_mode = expansion_mode
        self.search_mode = search_mode
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.trim = trim
        self.prf = prf
        # (settings, their validated options): see :attr:`options`.
        self._validated: tuple[tuple[Any, ...], RetrievalOptions] | None = None
        options = self.options  # validates every setting, naming it
        self.expansion_mode = options.mode or ExpansionMode()
        if expand_to_parent and parent_searcher is None:
            raise ConfigurationError(
                "expand_to_parent=True needs a parent searcher",
                hint="pass parent_searcher=InTableParentSearcher(store=store)",
            )

    @property
    def options(self) -> RetrievalOptions:
        """The bot's settings as retrieval options (the defaults of every call).

        Raises:
            ConfigurationError: a setting was changed to a bad value since construction.
        """
        values = {name: getattr(self, setting) for name, setting in SETTING_NAMES.items()}
        # Validated again only when a setting changed (every call reads them); typed, so
        # that True is not taken for a limit of 1 already validated.
        key = tuple((type(v), v) for v in values.values())
        if self._validated is not None and self._validated[0] == key:
            return self._validated[1]
        options = RetrievalOptions.from_overrides(values, names=SETTING_NAMES)
        self._validated = (key, options)
        return options

    @property
    def description(self) -> str | None:
        """The row's description; None for a bot made in code."""
        return None if self.settings is None else self.settings.description

    @property
    def collection(self) -> str | None:
        """The row's collection (the table searched); None for a bot made in code."""
        return None if self.settings is None else self.settings.collection

    @property
    def retriever(self) -> Retriever:
        """The query pipeline over this bot's store, searcher, reranker and settings.

        Raises:
            ConfigurationError: the bot has no store.
        """
        if self.store is None:
            raise ConfigurationError("the bot has no store", hint="pass store=PgVectorStore(...)")
        return Retriever(
            self.store, self.parent_searcher, self.reranker, self.options, scope=self.scope
        )

    def config(self) -> dict[str, Any]:
        """The bot's settings as plain values (for ``meta`` and the HTTP service)."""
        values = {setting: getattr(self, setting) for setting in SETTING_NAMES.values()}
        return {
            "name": self.name,
            **values,
            "expansion_mode": str(self.expansion_mode),
            "scope": self.scope,
            "reranker": None if self.reranker is None else self.reranker.to_dict(),
            "parent_searcher": None
            if self.parent_searcher is None
            else self.parent_searcher.to_dict(),
        }

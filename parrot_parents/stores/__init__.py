"""Vector stores and the hierarchy's storage conventions.

The names below load on first use (:mod:`parrot_parents.lazy`): importing a light module
such as ``parrot_parents.embedded.server`` does not pull in SQLAlchemy.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__all__ = ["AbstractStore", "HNSWIndex", "HNSWQueryOptions", "PgVectorStore", "SearchResult"]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.postgres import PgVectorStore
    from parrot_parents.stores.postgres.collections.schema import HNSWIndex
    from parrot_parents.stores.results import SearchResult
    from parrot_parents.stores.search_options import HNSWQueryOptions

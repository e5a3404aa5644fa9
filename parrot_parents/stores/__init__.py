"""Vector stores and the hierarchy's storage conventions."""

from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.results import SearchResult
from parrot_parents.stores.schema import HNSWIndex
from parrot_parents.stores.search_options import HNSWQueryOptions

__all__ = ["AbstractStore", "HNSWIndex", "HNSWQueryOptions", "PgVectorStore", "SearchResult"]

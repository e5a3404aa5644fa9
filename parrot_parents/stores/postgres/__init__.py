"""The PostgreSQL + pgvector store: a thin :class:`PgVectorStore` over its parts, one package
a concern (``connections``, ``collections``, ``search``, ``writes``).

The store loads on first use (:mod:`parrot_parents.lazy`), so importing one part does not
import the others.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__all__ = ["PgVectorStore"]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.stores.postgres.store import PgVectorStore

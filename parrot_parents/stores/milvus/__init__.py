"""Milvus backend (extra ``[milvus]``): :class:`MilvusStore` and :class:`MilvusParentSearcher`.

Importing this package needs no pymilvus; connecting does. The names below load on first
use (:mod:`parrot_parents.lazy`).
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__all__ = ["MilvusParentSearcher", "MilvusStore"]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.stores.milvus.parents import MilvusParentSearcher
    from parrot_parents.stores.milvus.store import MilvusStore

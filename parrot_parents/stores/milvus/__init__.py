"""Milvus backend (extra ``[milvus]``): :class:`MilvusStore` and :class:`MilvusParentSearcher`.

Importing this package needs no pymilvus; connecting does.
"""

from parrot_parents.stores.milvus.parents import MilvusParentSearcher
from parrot_parents.stores.milvus.store import MilvusStore

__all__ = ["MilvusParentSearcher", "MilvusStore"]

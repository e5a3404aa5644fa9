"""Parent searcher over a :class:`~parrot_parents.stores.milvus.store.MilvusStore`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.milvus.settings import MILVUS_TOKEN_ENV, MILVUS_URI_ENV
from parrot_parents.stores.milvus.store import MilvusStore
from parrot_parents.stores.parents.abstract import StoreParentSearcher

__all__ = ["MilvusParentSearcher", "MilvusParentSearcherConfig"]


class MilvusParentSearcherConfig(BaseModel):
    """``{"type": "milvus"}``: parents are read from the store's parents collection."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class MilvusParentSearcher(StoreParentSearcher):
    """Every read of expansion, against the two collections of a :class:`MilvusStore`.

    * :meth:`fetch`: primary-key ``get`` on ``<collection>__parents`` (parent mode);
      children live in the other collection, so they are never returned;
    * :meth:`fetch_children`: one query ``parent_document_id in [...]`` (auto_merge);
    * :meth:`fetch_neighbours`: one query ORing ``document_id == d and lo <= chunk_index
      <= hi`` per range (window).
    """

    config_model = MilvusParentSearcherConfig
    store_class = MilvusStore
    store: MilvusStore

    @classmethod
    def open_store(cls, collection: str, *, embedding: Any = None) -> MilvusStore:
        """The Milvus store of a bot row ``{"type": "milvus"}``: ``collection`` at
        ``$PARROT_PARENTS_MILVUS_URI`` (token ``$PARROT_PARENTS_MILVUS_TOKEN``).

        The URI comes from the deployment, never from the row, so whoever can write the
        bots table cannot point the service at another server or a local path.

        Raises:
            ConfigurationError: ``$PARROT_PARENTS_MILVUS_URI`` is not set.
        """
        uri = os.environ.get(MILVUS_URI_ENV)
        if not uri:
            raise ConfigurationError(
                f"a bot of type 'milvus' needs ${MILVUS_URI_ENV}",
                hint="e.g. http://milvus:19530, or a Milvus Lite file such as ./milvus.db",
            )
        token = os.environ.get(MILVUS_TOKEN_ENV) or None
        return MilvusStore(uri, collection, token=token, embedding=embedding, create=False)

    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        return await self.store.fetch_parents(parent_ids)

    async def health_check(self) -> bool:
        """True when the parents collection answers."""
        try:
            client = await self.store.ready()
            name = self.store.parents_collection
            return bool(await asyncio.to_thread(client.has_collection, name))
        except Exception:
            return False

    def to_dict(self) -> dict[str, Any]:
        return {"type": "milvus"}

"""Parent searcher for parents stored in the same table as their children."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Text, any_, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY

from parrot_parents.stores.parents.abstract import StoreParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.reads import read
from parrot_parents.stores.records.markers import PARENT_PREDICATE

__all__ = ["InTableParentSearcher", "InTableParentSearcherConfig"]


class InTableParentSearcherConfig(BaseModel):
    """``{"type": "in_table"}``: parents are read from the bot's own collection table."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class InTableParentSearcher(StoreParentSearcher):
    """Fetches parents from the store's own table with one parameterised statement.

    The statement (spec FEAT-128)::

        SELECT id, document, cmetadata FROM <schema>.<table>
        WHERE id = ANY(:ids)
          AND ((cmetadata->>'is_full_document')::boolean = true
               OR cmetadata->>'document_type' = 'parent_chunk')

    Children are never returned, even when their id is asked for. The two other reads
    (:meth:`fetch_children`, :meth:`fetch_neighbours`) are one statement each as well,
    over the ``parent_document_id`` and ``document_id`` expression indexes.
    """

    config_model = InTableParentSearcherConfig
    store_class = PgVectorStore
    store: PgVectorStore
    #: The parents statement, built on the first fetch (the table is known once connected).
    _fetch: Any = None

    def reads_from(self, store: Any) -> bool:
        return store is self.store

    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """One ``SELECT ... WHERE id = ANY(:ids)``; see :meth:`AbstractParentSearcher.fetch`.

        The ids are bound as one array, so the prepared statement is the same for any
        number of ids."""
        ids = list(dict.fromkeys(str(p) for p in parent_ids if p is not None))
        if not ids:
            return {}
        engine, table = await self.store.ready()
        if self._fetch is None:
            self._fetch = (
                select(table.c.id, table.c.document, table.c.cmetadata)
                .where(table.c.id == any_(bindparam("ids", type_=ARRAY(Text))))
                .where(text(PARENT_PREDICATE))
            )
        stmt = self._fetch

        async def work(conn: Any) -> list[Any]:
            return list((await conn.execute(stmt, {"ids": ids})).all())

        rows = await read(engine, f"read from {self.store.qualified_name}", work)
        return {
            r.id: Document(id=r.id, page_content=r.document, metadata=dict(r.cmetadata or {}))
            for r in rows
        }

    async def health_check(self) -> bool:
        """True when the table answers a trivial query."""
        try:
            engine, table = await self.store.ready()
            async with engine.connect() as conn:
                await conn.execute(select(table.c.id).limit(1))
        except Exception:
            return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"type": "in_table"}

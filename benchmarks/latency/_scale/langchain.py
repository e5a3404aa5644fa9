"""LangChain's ParentDocumentRetriever over the same PostgreSQL, for the scale benchmark.

The vector store is langchain-postgres's current one, ``PGVectorStore`` (v2), on the
table that :func:`~benchmarks.latency._scale.load.build_langchain` loaded, through
``PGEngine.from_engine`` (no background loop thread: queries run on the caller's event
loop, its fastest async path).
langchain-postgres offers no document store, so the parents live in LangChain's
documented ``InMemoryStore``: its parent lookup is a dict read, not a database round
trip, which favours LangChain against our parent fetch from PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from benchmarks.latency._scale.data import SyntheticCollection

__all__ = ["LangChainSide"]


class LangChainSide:
    """The retriever and its vector store, opened on ``table``."""

    def __init__(self, dsn: str, table: str) -> None:
        self.dsn = dsn
        self.table = table
        self.docstore: Any = None
        self._engine: Any = None

    async def open(self, coll: SyntheticCollection) -> None:
        from langchain_core.stores import InMemoryStore
        from sqlalchemy.ext.asyncio import create_async_engine

        self._engine = create_async_engine(
            self.dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
        )
        self.docstore = InMemoryStore()
        for block in coll.blocks():
            self.docstore.mset(
                [
                    (pid, Document(page_content=text, metadata=meta, id=pid))
                    for pid, text, meta in zip(
                        block.parent_ids, block.parent_texts, block.parent_meta, strict=True
                    )
                ]
            )

    async def retriever(self, embedding: Embeddings, k: int = 10) -> tuple[Any, Any]:
        """``(ParentDocumentRetriever, PGVectorStore)`` with ``embedding`` for queries."""
        from langchain_classic.retrievers import ParentDocumentRetriever
        from langchain_postgres import PGEngine, PGVectorStore
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        vs = await PGVectorStore.create(
            PGEngine.from_engine(self._engine), table_name=self.table, embedding_service=embedding
        )
        pdr = ParentDocumentRetriever(
            vectorstore=vs,
            docstore=self.docstore,
            # Used only when adding documents; the children are already stored.
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0),
            search_kwargs={"k": k},
        )
        return pdr, vs

    async def hybrid_store(self, embedding: Embeddings, k: int = 10) -> Any:
        """``PGVectorStore`` with langchain-postgres's own hybrid search: its dense top k
        and its full-text top k (``ts_rank_cd`` over ``plainto_tsquery``, on the GIN index
        its ``aapply_hybrid_search_index`` builds once), fused by its reciprocal rank
        fusion. Query with ``asimilarity_search_by_vector(v, k=k, fts_query=text)``."""
        from langchain_postgres import PGEngine, PGVectorStore
        from langchain_postgres.v2.hybrid_search_config import (
            HybridSearchConfig,
            reciprocal_rank_fusion,
        )
        from sqlalchemy import text

        config = HybridSearchConfig(
            fusion_function=reciprocal_rank_fusion,
            primary_top_k=k,
            secondary_top_k=k,
            index_name=f"{self.table}_tsv_idx",
        )
        vs = await PGVectorStore.create(
            PGEngine.from_engine(self._engine),
            table_name=self.table,
            embedding_service=embedding,
            hybrid_search_config=config,
        )
        async with self._engine.connect() as conn:
            exists = (
                await conn.execute(text("SELECT to_regclass(:n)"), {"n": config.index_name})
            ).scalar()
        if exists is None:
            await vs.aapply_hybrid_search_index()
        return vs

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()

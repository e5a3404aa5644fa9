"""The distractor benchmark's peers: plain 300-character chunks asked by two hybrid retrievers.

One job: a peer's answers to every question on one document set, and their per-question
scores. The documents are a mapping ``{document id: text}`` (the dev corpora under their
corpus ids, as the scorer expects them; a distractor page under its own id, which the
scorer never matches, so its passages only spend budget), cut into plain chunks of
:data:`CHUNK_SIZE` characters by ``benchmarks.common``'s splitter (LangChain's
``RecursiveCharacterTextSplitter``, no overlap). Both peers rank the same chunks:

* **BM25 + dense** (:func:`bm25_dense`): ``benchmarks.common.bm25_dense_rrf``, the quality
  tables' peer: ``bm25s`` and exact numpy cosine, each top :data:`DEPTH`, fused by RRF
  (k=60), the top :data:`TOP` handed over.
* **LangChain's ``PGVectorStore`` hybrid** (:func:`langchain_hybrid`): langchain-postgres's
  v2 store in a table of its own in the same PostgreSQL, its ``HybridSearchConfig`` with
  its ``reciprocal_rank_fusion``: the dense top :data:`DEPTH` (``<=>``, exact: no vector
  index) and the full-text top :data:`DEPTH` (``ts_rank_cd`` over
  ``plainto_tsquery('english', question)`` on its tsvector column, GIN-indexed by its
  ``aapply_hybrid_search_index``), asked for ``k`` = :data:`TOP`. The table is kept; a run
  that finds it holding every chunk ingests nothing.

Either run is ``{qid: [(document id, start, end), ...]}`` in rank order; the scorer cuts it
at each budget (whole passages while they fit, then a prefix), as the budget curve cuts
its peers' runs (:func:`scores`).

The chunk vectors (all-MiniLM-L6-v2, the product's model) are computed once and kept on
disk (:func:`chunk_vectors`: ``peer-vectors-c<size>-<hash of the chunk texts>.npy`` under
the cache directory, written in resumable parts), so both peers and later runs reuse them;
:class:`CachedEmbedding` hands them to a peer in place of the model.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import _lc_embeddings, _plain_chunks, bm25_dense_rrf

if TYPE_CHECKING:
    import numpy.typing as npt

    from parrot_parents.eval.questions import Question
    from parrot_parents.eval.scorer import RunPassage

__all__ = [
    "CHUNK_SIZE",
    "DEPTH",
    "TOP",
    "CachedEmbedding",
    "Chunk",
    "bm25_dense",
    "chunk_vectors",
    "chunks_of",
    "langchain_hybrid",
    "scores",
    "texts_of",
]

#: Characters per plain chunk.
CHUNK_SIZE = 300
#: Chunks handed over per question: 40 x 300 characters fill the largest budget (4000).
TOP = 40
#: Candidates of each branch before the fusion.
DEPTH = 100
#: Chunks embedded per saved part of :func:`chunk_vectors`.
_PART = 4096

#: ``(document id, start, text)``.
Chunk = tuple[str, int, str]
Run = dict[int, list["RunPassage"]]
Log = Callable[[str], None]


def texts_of(corpora: Mapping[str, str], pages: Sequence[Any]) -> dict[str, str]:
    """``{document id: text}``: the dev corpora under their corpus ids, then each page
    (a LangChain ``Document``) under its ``document_id``."""
    texts = dict(corpora)
    for page in pages:
        texts[str(page.metadata["document_id"])] = page.page_content
    return texts


def chunks_of(texts: Mapping[str, str], size: int = CHUNK_SIZE) -> list[Chunk]:
    """Plain chunks of every document, in the mapping's order (``common``'s splitter)."""
    return _plain_chunks(texts, size)


def _key(chunks: Sequence[Chunk], size: int) -> str:
    digest = hashlib.sha256()
    for _, _, text in chunks:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return f"peer-vectors-c{size}-{digest.hexdigest()[:16]}"


def chunk_vectors(
    chunks: Sequence[Chunk],
    embedding: Any,
    cache: Path,
    size: int = CHUNK_SIZE,
    log: Log = print,
) -> npt.NDArray[np.float32]:
    """The chunks' vectors (``embedding.encode``: float32, rows L2-normalised), computed
    once and kept in ``cache``.

    Keyed by ``size`` and a hash of the chunk texts in order. While it runs, each block of
    :data:`_PART` chunks is saved in a folder beside the final file, so an interrupted run
    resumes at the first missing block; the folder is removed once the ``.npy`` is written.
    """
    key = _key(chunks, size)
    final = cache / f"{key}.npy"
    if final.exists():
        vectors: npt.NDArray[np.float32] = np.load(final)
        if len(vectors) == len(chunks):
            log(f"chunk vectors: {len(chunks):,} read from {final.name}")
            return vectors
    parts = cache / f"{key}.parts"
    parts.mkdir(parents=True, exist_ok=True)
    texts = [t for _, _, t in chunks]
    started = time.perf_counter()
    blocks = []
    for i, at in enumerate(range(0, len(texts), _PART)):
        part = parts / f"{i:05d}.npy"
        if not part.exists():
            block = np.asarray(embedding.encode(texts[at : at + _PART]), dtype=np.float32)
            np.save(parts / f"{i:05d}.tmp.npy", block)
            (parts / f"{i:05d}.tmp.npy").rename(part)
            log(
                f"chunk vectors: {min(at + _PART, len(texts)):,}/{len(texts):,}, "
                f"{time.perf_counter() - started:.0f} s"
            )
        blocks.append(np.load(part))
    vectors = np.concatenate(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)
    np.save(cache / f"{key}.tmp.npy", vectors)
    (cache / f"{key}.tmp.npy").rename(final)
    for part in parts.iterdir():
        part.unlink()
    parts.rmdir()
    return vectors


class CachedEmbedding:
    """The model with the chunk vectors precomputed: ``embed_documents`` of a known text
    is a look-up (returned as a float32 array, which ``bm25_dense_rrf`` takes as it is);
    unknown texts and queries go to the model."""

    def __init__(
        self, embedding: Any, chunks: Sequence[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        self.embedding = embedding
        self.vectors = vectors
        self.row = {text: i for i, (_, _, text) in enumerate(chunks)}

    def embed_documents(self, texts: list[str]) -> Any:
        missing = [t for t in texts if t not in self.row]
        if missing:
            extra = np.asarray(self.embedding.encode(missing), dtype=np.float32)
            for text, vector in zip(missing, extra, strict=True):
                self.row[text] = len(self.vectors)
                self.vectors = np.vstack([self.vectors, vector[None, :]])
        return self.vectors[[self.row[t] for t in texts]]

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.embedding.embed_query(text)
        return vector


def scores(
    questions: Sequence[Question], run: Run, budgets: Sequence[int]
) -> dict[str, list[float]]:
    """``{"recall@Bc": [score of qid 0, ...]}``: the run cut at each budget by the scorer."""
    from parrot_parents.eval.scorer import score_per_question

    return score_per_question(questions, run, ks=(), budgets=budgets)


def bm25_dense(
    questions: Sequence[Question],
    texts: Mapping[str, str],
    embedding: CachedEmbedding,
    log: Log = print,
) -> Run:
    """``benchmarks.common.bm25_dense_rrf`` on ``texts``: its fused run (top :data:`TOP`)."""
    fused, _ = bm25_dense_rrf(
        questions, texts, embedding, chunk_size=CHUNK_SIZE, depth=DEPTH, top=TOP, log=log
    )
    return fused


def _chunk_id(doc_id: str, start: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"parrot-parents-peer:{doc_id}:{start}"))


async def langchain_hybrid(
    dsn: str,
    table: str,
    questions: Sequence[Question],
    chunks: Sequence[Chunk],
    embedding: CachedEmbedding,
    log: Log = print,
) -> tuple[Run, dict[str, Any]]:
    """LangChain's ``PGVectorStore`` hybrid search over ``chunks`` in ``table``.

    Creates the table (``PGEngine.ainit_vectorstore_table`` with the hybrid config: a
    tsvector column) when it is missing, adds the chunks that it lacks with their cached
    vectors (``aadd_embeddings``, ids derived from document id and offset) and the GIN
    index, then asks each question (``asimilarity_search_by_vector(v, k=TOP,
    fts_query=question)``). Returns the run and notes: ``rows``, ``ingest s`` (None when
    nothing was added), ``ask s``, ``no full-text match`` (questions whose full-text
    branch matched no chunk: ``plainto_tsquery`` ANDs every word of the question).
    """
    from langchain_postgres import PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import (
        HybridSearchConfig,
        reciprocal_rank_fusion,
    )
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

    def config() -> HybridSearchConfig:
        return HybridSearchConfig(
            fusion_function=reciprocal_rank_fusion,
            fusion_function_parameters={"rrf_k": 60},
            primary_top_k=DEPTH,
            secondary_top_k=DEPTH,
            # Named: a config without it leaves the column unfilled on insert (the
            # table's NOT NULL refuses the row) unless it is the very object that
            # created the table (``ainit_vectorstore_table`` writes the name into it).
            tsv_column="content_tsv",
            index_name=f"{table}_tsv_idx",
        )

    engine = create_async_engine(to_async_dsn(dsn))
    notes: dict[str, Any] = {"table": table, "ingest s": None}
    try:
        pg = PGEngine.from_engine(engine)
        async with engine.connect() as conn:
            exists = (await conn.execute(text("SELECT to_regclass(:t)"), {"t": table})).scalar()
        if exists is None:
            await pg.ainit_vectorstore_table(
                table, int(embedding.vectors.shape[1]), hybrid_search_config=config()
            )
        hybrid = config()
        store = await PGVectorStore.create(
            pg,
            table_name=table,
            embedding_service=_lc_embeddings(embedding),
            hybrid_search_config=hybrid,
        )
        async with engine.connect() as conn:
            stored = {
                str(r[0]) for r in await conn.execute(text(f'SELECT langchain_id FROM "{table}"'))
            }
        ids = [_chunk_id(doc, start) for doc, start, _ in chunks]
        todo = [i for i, cid in enumerate(ids) if cid not in stored]
        if todo:
            started = time.perf_counter()
            log(f"{table}: adding {len(todo):,} of {len(chunks):,} chunks")
            for at in range(0, len(todo), 2000):
                rows = todo[at : at + 2000]
                await store.aadd_embeddings(
                    [chunks[i][2] for i in rows],
                    embedding.vectors[rows].tolist(),
                    metadatas=[{"document_id": chunks[i][0], "start": chunks[i][1]} for i in rows],
                    ids=[ids[i] for i in rows],
                )
                log(
                    f"{table}: {at + len(rows):,}/{len(todo):,}, "
                    f"{time.perf_counter() - started:.0f} s"
                )
            notes["ingest s"] = round(time.perf_counter() - started, 1)
        async with engine.connect() as conn:
            index = (
                await conn.execute(text("SELECT to_regclass(:n)"), {"n": hybrid.index_name})
            ).scalar()
        if index is None:
            await store.aapply_hybrid_search_index()
            async with engine.connect() as conn:
                await conn.execute(text(f'ANALYZE "{table}"'))
                await conn.commit()
        async with engine.connect() as conn:
            notes["rows"] = (await conn.execute(text(f'SELECT count(*) FROM "{table}"'))).scalar()
        started = time.perf_counter()
        run: Run = {}
        unmatched = 0
        for q in questions:
            vector = embedding.embed_query(q.question)
            # fts_query per call: asimilarity_search would write the first question into
            # the store's shared config, and every later question would reuse it.
            docs = await store.asimilarity_search_by_vector(vector, k=TOP, fts_query=q.question)
            run[q.qid] = [
                (
                    str(d.metadata["document_id"]),
                    int(d.metadata["start"]),
                    int(d.metadata["start"]) + len(d.page_content),
                )
                for d in docs
            ]
            async with engine.connect() as conn:
                hit = await conn.execute(
                    text(
                        f'SELECT 1 FROM "{table}" WHERE "{hybrid.tsv_column}" @@ '
                        "plainto_tsquery('pg_catalog.english', :q) LIMIT 1"
                    ),
                    {"q": q.question},
                )
                unmatched += hit.first() is None
        notes["ask s"] = round(time.perf_counter() - started, 1)
        notes["no full-text match"] = unmatched
        return run, notes
    finally:
        await engine.dispose()


#: The peers, in the report's order: key and label.
PEERS = {
    "bm25-dense": f"plain {CHUNK_SIZE}-char chunks, BM25 + dense (RRF k=60), top {TOP}",
    "langchain-hybrid": (
        f"LangChain `PGVectorStore` hybrid, plain {CHUNK_SIZE}-char chunks "
        f"(tsvector + dense, its RRF), k={TOP}"
    ),
}


async def ask_peers(
    dsn: str,
    cache: Path,
    tables: Mapping[str, str],
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    pages: Sequence[Any],
    budgets: Sequence[int],
    log: Log = print,
) -> dict[str, Any]:
    """Both peers on the dev corpora alone (``"dev"``) and with the distractor ``pages``
    (``"distractors"``); ``tables`` names LangChain's table for each.

    Returns ``{"chunks": {set: n}, "vectors s": float, "peers": {peer: {set: {"per
    question": {"recall@Bc": [...]}, "seconds": float, ...notes}}}}``.
    """
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    sets = {"dev": dict(corpora), "distractors": texts_of(corpora, pages)}
    chunked = {name: chunks_of(texts) for name, texts in sets.items()}
    model = SentenceTransformerEmbeddings()
    started = time.perf_counter()
    # The dev chunks are the first of the large set's: one set of vectors serves both.
    vectors = chunk_vectors(chunked["distractors"], model, cache, log=log)
    embedding = CachedEmbedding(model, chunked["distractors"], vectors)
    out: dict[str, Any] = {
        "chunks": {name: len(c) for name, c in chunked.items()},
        "vectors s": round(time.perf_counter() - started, 1),
        "peers": {key: {} for key in PEERS},
    }
    for name, texts in sets.items():
        started = time.perf_counter()
        run = bm25_dense(questions, texts, embedding, log=log)
        out["peers"]["bm25-dense"][name] = {
            "per question": scores(questions, run, budgets),
            "seconds": round(time.perf_counter() - started, 1),
        }
        log(f"bm25-dense on {name}: {out['peers']['bm25-dense'][name]['seconds']} s")
        started = time.perf_counter()
        run, notes = await langchain_hybrid(
            dsn, tables[name], questions, chunked[name], embedding, log=log
        )
        out["peers"]["langchain-hybrid"][name] = {
            **notes,
            "per question": scores(questions, run, budgets),
            "seconds": round(time.perf_counter() - started, 1),
        }
        log(f"langchain-hybrid on {name}: {notes}")
    return out

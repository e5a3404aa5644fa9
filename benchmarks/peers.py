"""Peer retrievers of the budget curve, run on the shared dev set (benchmarks only).

Each function ingests the corpora itself, answers every question and returns a run:
``{qid: [(corpus_id, start, end), ...]}`` in rank order, character offsets into the
corpus files, exactly as the passages would be handed to an LLM. All use the same
embedding model as parrot-parents (all-MiniLM-L6-v2, through
:class:`SentenceTransformerEmbeddings`), on all corpora at once with no corpus filter.

* :func:`bm25_dense_rrf`: plain 400-character chunks (LangChain's
  ``RecursiveCharacterTextSplitter``, no overlap), BM25 (``bm25s``, English stopwords)
  and dense cosine search, each top 100, fused by Reciprocal Rank Fusion with k=60
  (Cormack, Clarke and Büttcher, SIGIR 2009), top 40 handed over.
* :func:`langchain_parent_document`: LangChain's ``ParentDocumentRetriever`` with
  400-character children and 2000-character parents (``RecursiveCharacterTextSplitter``),
  an ``InMemoryVectorStore`` and ``InMemoryStore``, k=10 children.
* :func:`llamaindex_auto_merging`: LlamaIndex's ``AutoMergingRetriever`` over a
  ``HierarchicalNodeParser`` of 2048/512/128 tokens, leaves in a ``VectorStoreIndex``,
  similarity_top_k=12. Tokens are counted with the embedding model's tokenizer:
  LlamaIndex's default (tiktoken) downloads its vocabulary and this benchmark runs offline.

Needs ``pip install -e ".[bench]"``. Nothing here is imported by the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parrot_parents.eval.questions import Question
from parrot_parents.eval.scorer import RunPassage

Run = dict[int, list[RunPassage]]
Log = Callable[[str], None]

__all__ = ["bm25_dense_rrf", "langchain_parent_document", "llamaindex_auto_merging"]


def _span(corpus: str, start: int | None, text: str) -> tuple[int, int, bool]:
    """``(start, end, exact)``: the passage's span; ``exact`` when the text is that slice."""
    if start is None or start < 0:
        start = corpus.find(text)
    end = start + len(text)
    return start, end, corpus[start:end] == text


def _plain_chunks(corpora: Mapping[str, str], size: int) -> list[tuple[str, int, str]]:
    """``(corpus_id, start, text)`` of plain chunks of at most ``size`` characters."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=0, add_start_index=True
    )
    out = []
    for cid, text in corpora.items():
        for doc in splitter.create_documents([text]):
            out.append((cid, int(doc.metadata["start_index"]), doc.page_content))
    return out


def bm25_dense_rrf(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    chunk_size: int = 400,
    depth: int = 100,
    top: int = 40,
    rrf_k: int = 60,
    log: Log = print,
) -> tuple[Run, Run]:
    """``(fused run, dense-only run)`` over the same plain chunks (see the module doc)."""
    import bm25s
    import numpy as np

    chunks = _plain_chunks(corpora, chunk_size)
    texts = [t for _, _, t in chunks]
    log(f"bm25+dense: {len(chunks)} chunks of at most {chunk_size} characters")
    vectors = np.asarray(embedding.embed_documents(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bm25 = bm25s.BM25()
    bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    fused: Run = {}
    dense_only: Run = {}
    for q in questions:
        qv = np.asarray(embedding.embed_query(q.question), dtype=np.float32)
        qv /= np.linalg.norm(qv)
        dense = list(np.argsort(-(vectors @ qv))[:depth])
        ids, _ = bm25.retrieve(
            bm25s.tokenize([q.question], stopwords="en", show_progress=False),
            k=min(depth, len(texts)),
            show_progress=False,
        )
        lexical = [int(i) for i in ids[0]]
        scores: dict[int, float] = {}
        for ranking in (dense, lexical):
            for rank, i in enumerate(ranking, 1):
                scores[int(i)] = scores.get(int(i), 0.0) + 1.0 / (rrf_k + rank)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:top]

        def spans(order: Sequence[int]) -> list[RunPassage]:
            return [(chunks[i][0], chunks[i][1], chunks[i][1] + len(chunks[i][2])) for i in order]

        fused[q.qid] = spans(best)
        dense_only[q.qid] = spans([int(i) for i in dense[:top]])
    return fused, dense_only


def _lc_embeddings(embedding: Any) -> Any:
    from langchain_core.embeddings import Embeddings

    class Adapter(Embeddings):
        """LangChain's Embeddings interface around the package's model."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedding.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedding.embed_query(text)

    return Adapter()


def langchain_parent_document(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    child_size: int = 400,
    parent_size: int = 2000,
    k: int = 10,
    log: Log = print,
) -> tuple[Run, int]:
    """``(run, passages whose text is not their corpus slice)`` (see the module doc)."""
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.documents import Document
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    retriever = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(_lc_embeddings(embedding)),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=child_size, chunk_overlap=0),
        parent_splitter=RecursiveCharacterTextSplitter(
            chunk_size=parent_size, chunk_overlap=0, add_start_index=True
        ),
        search_kwargs={"k": k},
    )
    retriever.add_documents(
        [Document(page_content=t, metadata={"corpus_id": cid}) for cid, t in corpora.items()]
    )
    log(f"langchain: parents {child_size}/{parent_size} characters, k={k}")
    run: Run = {}
    mismatches = 0
    for q in questions:
        out = []
        for doc in retriever.invoke(q.question):
            cid = doc.metadata["corpus_id"]
            start, end, exact = _span(
                corpora[cid], doc.metadata.get("start_index"), doc.page_content
            )
            mismatches += not exact
            out.append((cid, start, end))
        run[q.qid] = out
    return run, mismatches


def llamaindex_auto_merging(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    chunk_sizes: Sequence[int] = (2048, 512, 128),
    top_k: int = 12,
    log: Log = print,
) -> tuple[Run, int]:
    """``(run, passages whose text is not their corpus slice)`` (see the module doc)."""
    from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
    from llama_index.core.retrievers import AutoMergingRetriever
    from pydantic import PrivateAttr

    class Adapter(BaseEmbedding):
        """LlamaIndex's embedding interface around the package's model."""

        _inner: Any = PrivateAttr()

        def __init__(self, inner: Any) -> None:
            super().__init__(model_name="all-MiniLM-L6-v2", embed_batch_size=64)
            self._inner = inner

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._inner.embed_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._inner.embed_query(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._inner.embed_documents([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._inner.embed_documents(texts)

    tokenizer = embedding.model.tokenizer
    Settings.tokenizer = lambda text: tokenizer.encode(text, add_special_tokens=False)
    parser = HierarchicalNodeParser.from_defaults(chunk_sizes=list(chunk_sizes))
    docs = [Document(text=t, metadata={"corpus_id": cid}) for cid, t in corpora.items()]
    nodes = parser.get_nodes_from_documents(docs)
    leaves = get_leaf_nodes(nodes)
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=Adapter(embedding))
    retriever = AutoMergingRetriever(
        index.as_retriever(similarity_top_k=top_k), storage, verbose=False
    )
    log(f"llamaindex: {len(nodes)} nodes, {len(leaves)} leaves, top {top_k}")
    # A node's start_char_idx counts from the start of its parent node's text (the
    # hierarchy is cut level by level); add the parents' offsets up to the document.
    by_id = {n.node_id: n for n in nodes}
    absolute: dict[str, int] = {}

    def offset(node: Any) -> int:
        if node.node_id not in absolute:
            parent = node.parent_node
            base = offset(by_id[parent.node_id]) if parent is not None else 0
            absolute[node.node_id] = base + int(node.start_char_idx or 0)
        return absolute[node.node_id]

    run: Run = {}
    mismatches = 0
    for q in questions:
        out = []
        for hit in retriever.retrieve(q.question):
            node = by_id.get(hit.node.node_id, hit.node)
            cid = node.metadata["corpus_id"]
            start, end, exact = _span(corpora[cid], offset(node), node.get_content())
            mismatches += not exact
            out.append((cid, start, end))
        run[q.qid] = out
    return run, mismatches

"""Synthetic collections for the scale benchmark: documents of about ten children each.

Deterministic for a given size: the same ``n_children`` always gives the same rows, in
blocks, so a 1M collection is generated and loaded without holding it in memory.

* **Rows** are those the product's loader writes for a short document (2 levels, see
  ``LateChunkingProcessor.build_hierarchy``): one parent per document
  (``is_full_document``, its whole text) and children that are exact slices of it, with
  ``parent_document_id``, ``chunk_index`` and character offsets. Every row also carries
  ``tenant`` (one of 100 values), so ``{"tenant": "t07"}`` selects 1 % of the children,
  and keys for filters of other selectivities (:func:`filter_keys`): ``rank`` (an integer
  of 0..999: 0.1 % each, and ranges), ``kind`` (20 values: 5 %), ``region`` (5: 20 %)
  and ``half`` (2: 50 %), drawn from a hash of the document's index, so that no key
  follows the vectors' topics (a filter that did would be the easy case).
* **Text** is words of the shared dev corpora: each document draws 15 % of its words
  from its topic's 80 words, the rest from the whole vocabulary by a Zipf law, so BM25
  sees topical terms and common words, not noise. Children are about 360 characters
  (the product's default child is at most 400). Queries are four topic words and two
  words of frequency ranks 100..3000, as a question would be: the lexical branch scores
  every child holding any of them, so these words set its cost.
* **Vectors** are 384-d float32 unit vectors in three levels of clusters: topic centres
  (one per 100 documents), document centroids around them (cosine about 0.85) and
  children around their document (about 0.6). A query sits around a document centroid
  (about 0.7): its own document's children come first, and the thousand children of its
  topic form a continuum behind them, so the top 10 is a fine-grained choice (as with real
  embeddings), neither a flat random profile nor ten obvious winners.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DIM",
    "FILTER_KEYS",
    "GENERATOR",
    "Block",
    "Queries",
    "SyntheticCollection",
    "load_vocabulary",
]

DIM = 384
#: Changes whenever the generated rows change, so cached collections are rebuilt.
GENERATOR = "scale-synthetic-v4"
SEED = 11
TENANTS = 100
_WORDS_PER_CHILD = 54
_TOPIC_WORDS = 80
_TOPIC_SHARE = 0.15
# Per-dimension noise for a target cosine c to a unit centre: sqrt((1/c^2 - 1) / DIM).
_DOC_NOISE = float(np.sqrt((1 / 0.85**2 - 1) / DIM))
_CHILD_NOISE = float(np.sqrt((1 / 0.6**2 - 1) / DIM))
_QUERY_NOISE = float(np.sqrt((1 / 0.7**2 - 1) / DIM))
_DOCS_PER_BLOCK = 2000


#: The filter keys every row carries besides ``tenant``, and how many values each has.
FILTER_KEYS = {"rank": 1000, "kind": 20, "region": 5, "half": 2}


def filter_keys(doc: int) -> dict[str, int | str]:
    """The filter keys of document ``doc`` (:data:`FILTER_KEYS`): one 32-bit hash of its
    index cut into independent digits, so each key's values are equally likely and no
    key says anything of another, of ``tenant`` or of the document's topic."""
    h = int.from_bytes(hashlib.blake2b(doc.to_bytes(8, "little"), digest_size=4).digest(), "little")
    return {
        "rank": h % 1000,
        "kind": f"k{(h // 1000) % 20:02d}",
        "region": f"r{(h // 20_000) % 5}",
        "half": f"h{(h // 100_000) % 2}",
    }


def load_vocabulary(corpora: Path) -> np.ndarray:
    """Distinct lower-case words (3+ letters) of the corpora, most frequent first."""
    counts: dict[str, int] = {}
    for path in sorted(corpora.glob("*.md")):
        for word in re.findall(r"[a-z]{3,}", path.read_text(encoding="utf-8").lower()):
            counts[word] = counts.get(word, 0) + 1
    counts.pop("unk", None)  # the <unk> token of the wikitext corpus, not a word
    if len(counts) < 500:
        raise SystemExit(f"too few words in {corpora} for a vocabulary ({len(counts)})")
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return np.array(ranked, dtype=object)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class Block:
    """Rows of consecutive documents, ready for COPY."""

    child_ids: list[str]
    child_texts: list[str]
    child_meta: list[dict]
    child_vectors: np.ndarray  # (n, DIM) float32, unit norm
    parent_ids: list[str]
    parent_texts: list[str]
    parent_meta: list[dict]


@dataclass
class Queries:
    """Query vectors (given to the search, the model bypassed) and their texts."""

    vectors: np.ndarray
    texts: list[str]
    documents: np.ndarray  # the document each query was drawn around


class SyntheticCollection:
    """The rows of an ``n_children`` collection, generated block by block."""

    def __init__(self, n_children: int, vocabulary: np.ndarray) -> None:
        if n_children < 100:
            raise ValueError(f"n_children must be >= 100, got {n_children}")
        self.n_children = n_children
        self.vocabulary = vocabulary
        rng = np.random.default_rng([SEED, n_children, 0])
        # Children per document: 7..13 (mean 10); the last document takes the remainder.
        counts = rng.integers(7, 14, size=n_children // 7 + 1)
        ends = np.cumsum(counts)
        n_docs = int(np.searchsorted(ends, n_children) + 1)
        counts = counts[:n_docs].copy()
        counts[-1] -= int(ends[n_docs - 1] - n_children)
        self.counts = counts
        self.n_docs = n_docs
        self.n_topics = max(8, n_docs // 100)
        self.topics = _unit(rng.standard_normal((self.n_topics, DIM)))
        self.doc_topic = rng.integers(0, self.n_topics, size=n_docs)
        # Topic words come from the middle of the ranking: neither stop words nor hapaxes.
        middle = vocabulary[50 : max(60, min(len(vocabulary), 6000))]
        self.topic_words = np.stack(
            [rng.choice(len(middle), _TOPIC_WORDS, replace=False) for _ in range(self.n_topics)]
        )
        self._middle = middle
        ranks = np.arange(1, len(vocabulary) + 1, dtype=np.float64)
        self._zipf = (1.0 / ranks) / (1.0 / ranks).sum()

    @property
    def n_parents(self) -> int:
        return self.n_docs

    @staticmethod
    def doc_id(i: int) -> str:
        return f"doc{i:07d}"

    def centroids(self, docs: np.ndarray) -> np.ndarray:
        """Document centroids, derived from the document index alone (any order)."""
        out = np.empty((len(docs), DIM), dtype=np.float32)
        for k, d in enumerate(docs):
            rng = np.random.default_rng([SEED, self.n_children, 1, int(d)])
            out[k] = self.topics[self.doc_topic[d]] + _DOC_NOISE * rng.standard_normal(DIM)
        return _unit(out)

    def blocks(self) -> Iterator[Block]:
        """Every row, ``_DOCS_PER_BLOCK`` documents at a time."""
        for start in range(0, self.n_docs, _DOCS_PER_BLOCK):
            yield self._block(start, min(self.n_docs, start + _DOCS_PER_BLOCK))

    def _block(self, lo: int, hi: int) -> Block:
        rng = np.random.default_rng([SEED, self.n_children, 2, lo])
        docs = np.arange(lo, hi)
        counts = self.counts[lo:hi]
        n = int(counts.sum())
        owner = np.repeat(docs, counts)
        vectors = _unit(
            np.repeat(self.centroids(docs), counts, axis=0)
            + _CHILD_NOISE * rng.standard_normal((n, DIM)).astype(np.float32)
        )
        words = rng.choice(len(self.vocabulary), size=(n, _WORDS_PER_CHILD), p=self._zipf)
        topical = rng.random((n, _WORDS_PER_CHILD)) < _TOPIC_SHARE
        picks = rng.integers(0, _TOPIC_WORDS, size=(n, _WORDS_PER_CHILD))
        topic_rows = self.topic_words[self.doc_topic[owner]]
        topic_ids = np.take_along_axis(topic_rows, picks, axis=1)
        texts_child = [
            " ".join(row)
            for row in np.where(topical, self._middle[topic_ids], self.vocabulary[words])
        ]
        block = Block([], [], [], vectors, [], [], [])
        k = 0
        for d, c in zip(docs, counts, strict=True):
            doc = self.doc_id(int(d))
            pieces = texts_child[k : k + c]
            text = " ".join(pieces)
            # ids as parrot_parents.stores.records.ids makes them
            parent_id = f"{doc}#doc:0-{len(text)}"
            tenant = f"t{int(d) % TENANTS:02d}"
            keys = filter_keys(int(d))
            source = f"synthetic/{doc}.txt"
            block.parent_ids.append(parent_id)
            block.parent_texts.append(text)
            block.parent_meta.append(
                {
                    "document_id": doc,
                    "source": source,
                    "tenant": tenant,
                    **keys,
                    "chunk_index": 0,
                    "start_index": 0,
                    "end_index": len(text),
                    "is_chunk": False,
                    "content_sha256": hashlib.sha256(text.encode()).hexdigest(),
                    "is_full_document": True,
                }
            )
            pos = 0
            for j, piece in enumerate(pieces):
                start, end = pos, pos + len(piece)
                pos = end + 1
                block.child_ids.append(f"{doc}#c:{start}-{end}")
                block.child_texts.append(piece)
                block.child_meta.append(
                    {
                        "document_id": doc,
                        "source": source,
                        "tenant": tenant,
                        **keys,
                        "is_chunk": True,
                        "parent_document_id": parent_id,
                        "chunk_index": j,
                        "start_index": start,
                        "end_index": end,
                    }
                )
            k += c
        return block

    def queries(self, n: int, salt: int) -> Queries:
        """``n`` queries around random document centroids; ``salt`` separates query sets."""
        rng = np.random.default_rng([SEED, self.n_children, 3, salt])
        docs = rng.integers(0, self.n_docs, size=n)
        vectors = _unit(
            self.centroids(docs) + _QUERY_NOISE * rng.standard_normal((n, DIM)).astype(np.float32)
        )
        texts = []
        for d in docs:
            topic = self._middle[self.topic_words[self.doc_topic[d]]]
            # Two words of ranks 100..3000: common, but past the stop words and the
            # corpora's most frequent words.
            common = self.vocabulary[rng.integers(100, min(3000, len(self.vocabulary)), 2)]
            words = [*rng.choice(topic, 4, replace=False), *common]
            texts.append("what about " + " ".join(str(w) for w in words) + "?")
        return Queries(vectors, texts, docs)


def dumps(meta: dict) -> str:
    """Compact JSON for the jsonb/json columns."""
    return json.dumps(meta, separators=(",", ":"))

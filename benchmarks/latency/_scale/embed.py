"""Query embeddings for the scale benchmark: given vectors, and the real model for both sides.

* :class:`LookupEmbedding` is the product's embedding slot filled with a table of
  precomputed query vectors: ``similarity_search`` and ``get_vector_context`` run their
  real code path, the model's forward pass is what is left out. It answers the calls a
  store or loader makes of an embedding (``aembed_query``, ``embed_query``, the
  ``*_documents`` twins, ``dimension``).
* :class:`LangChainLookup` is the same for langchain-postgres (a LangChain ``Embeddings``).
* :class:`LangChainModel` hands LangChain the very model instance the product uses, so
  "embedding included" compares retrieval, not two copies of one model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

try:
    from parrot_parents.stores.postgres.collections.model_contract import PROBE_TEXT
except ModuleNotFoundError:  # the harness also drives checkouts from before the stores' packages
    from parrot_parents.stores.model_contract import PROBE_TEXT  # type: ignore[no-redef]

__all__ = ["LangChainLookup", "LangChainModel", "LookupEmbedding"]


class LookupEmbedding:
    """An embedding that returns the given vector of each known text.

    Args:
        vectors: ``{text: vector}``.
        dimension: the vectors' length.
        as_numpy: return float32 arrays (what a numpy-returning model gives) instead of
            lists of floats (what the baseline's model gives).
        probe: the vector of the model fingerprint's probe text, for a collection that
            records its model (the real model's probe); default a fixed random one.
    """

    model_name = "lookup"

    def __init__(
        self,
        vectors: Mapping[str, np.ndarray],
        dimension: int,
        as_numpy: bool,
        probe: np.ndarray | None = None,
    ) -> None:
        self._vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self._probe = None if probe is None else np.asarray(probe, dtype=np.float32)
        self.dimension = dimension
        self.as_numpy = as_numpy
        self.batch_size = 64

    def warm_up(self) -> None:
        """Nothing to load."""

    def _one(self, text: str) -> Any:
        if text == PROBE_TEXT:
            # The store's model check asks for the fingerprint probe: a fixed vector (the
            # benchmark's collections record no model, so reads accept any with a warning).
            v = self._probe
            if v is None:
                v = np.random.default_rng(0).standard_normal(self.dimension).astype(np.float32)
            return v if self.as_numpy else v.tolist()
        try:
            v = self._vectors[text]
        except KeyError:
            raise KeyError(f"no precomputed vector for {text[:60]!r}") from None
        return v if self.as_numpy else v.tolist()

    def embed_query(self, text: str) -> Any:
        return self._one(text)

    def embed_documents(self, texts: list[str]) -> Any:
        out = [self._one(t) for t in texts]
        return np.stack(out) if self.as_numpy and out else out

    async def aembed_query(self, text: str) -> Any:
        return self._one(text)

    async def aembed_documents(self, texts: list[str]) -> Any:
        return self.embed_documents(texts)


class LangChainLookup(Embeddings):
    """LangChain's side of :class:`LookupEmbedding` (lists of floats, as its API types)."""

    def __init__(self, vectors: Mapping[str, np.ndarray]) -> None:
        self._vectors = {k: np.asarray(v, dtype=np.float32).tolist() for k, v in vectors.items()}

    def embed_query(self, text: str) -> list[float]:
        return self._vectors[text]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vectors[t] for t in texts]

    async def aembed_query(self, text: str) -> list[float]:
        return self._vectors[text]


class LangChainModel(Embeddings):
    """The product's model instance behind LangChain's ``Embeddings`` interface."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def embed_query(self, text: str) -> list[float]:
        return np.asarray(self.model.embed_query(text), dtype=float).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(self.model.embed_documents(texts), dtype=float).tolist()

    async def aembed_query(self, text: str) -> list[float]:
        # Off the event loop, as the product's own aembed_query does.
        return await asyncio.to_thread(self.embed_query, text)

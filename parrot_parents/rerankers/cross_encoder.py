"""Cross-encoder reranker on sentence-transformers ``CrossEncoder``, loaded offline."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field

from parrot_parents.errors import ConfigurationError, ModelLoadError
from parrot_parents.rerankers.abstract import AbstractReranker, check_int

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

__all__ = [
    "DEFAULT_RERANKER_MODEL",
    "CrossEncoderReranker",
    "CrossEncoderRerankerConfig",
    "clear_model_cache",
]

logger = logging.getLogger(__name__)

#: Default model name. It is NOT bundled: it must already be in the Hugging Face cache, or be
#: given as a local directory, because nothing is downloaded.
DEFAULT_RERANKER_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"

# Smallest useful pair: [CLS] query [SEP] passage [SEP] keeps 3 special tokens + 1 content token.
_MIN_MAX_LENGTH = 4

# One loaded model per process and (model, device, max_length): models are large, and
# CrossEncoder.predict is safe to call from several threads in inference mode.
_CACHE: dict[tuple[str, str, int], CrossEncoder] = {}
_CACHE_LOCK = threading.Lock()


def clear_model_cache() -> None:
    """Forget every cached model (instances already holding one keep it until ``close()``)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _hf_cache_dir() -> str:
    # The same folder CrossEncoder itself searches when given no cache_folder.
    env = os.getenv("SENTENCE_TRANSFORMERS_HOME")
    if env:
        return env
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _looks_like_path(model: str) -> bool:
    # A hub id is "name" or "org/name"; anything else is meant as a directory.
    return (
        model.startswith((".", "~", os.sep, "/"))
        or (os.altsep is not None and os.altsep in model)
        or model.count("/") > 1
        or (os.sep != "/" and os.sep in model)
    )


def _load(model: str, device: str, max_length: int) -> CrossEncoder:
    """Load (or fetch from the process cache) a single-output ``CrossEncoder``.

    Raises:
        ModelLoadError: not found locally nor in the HF cache, failed to load, or has
            ``num_labels != 1``.
    """
    local = Path(model).expanduser()
    is_dir = local.is_dir()
    # Normalise local directories so "./m" and "/abs/m" share one loaded model.
    key = (str(local.resolve()) if is_dir else model, device, max_length)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached

        import torch
        from sentence_transformers import CrossEncoder

        if not is_dir and (local.exists() or _looks_like_path(model)):
            # Meant as a directory: never fall through to a hub lookup with a path.
            what = "is not a directory" if local.exists() else "does not exist"
            raise ModelLoadError(
                f"cannot load cross-encoder {model!r}: local path {str(local.absolute())!r} {what}",
                hint="pass the directory of a saved cross-encoder (config.json, weights, "
                "tokenizer files)",
            )
        from parrot_parents.embeddings.quiet_load import quiet_model_load

        try:
            with quiet_model_load():
                loaded: CrossEncoder = CrossEncoder(
                    str(local) if is_dir else model,
                    device=device,
                    max_length=max_length,
                    # Offline-first: only the local directory or the HF cache, never the network,
                    # so a missing model fails fast instead of hanging on a download.
                    local_files_only=True,
                    # Raw logits: CrossEncoder applies a sigmoid by default when num_labels == 1.
                    activation_fn=torch.nn.Identity(),
                )
        except Exception as exc:
            if is_dir:
                where = f"local directory {str(local.absolute())!r} exists but failed to load"
                detail = f": {type(exc).__name__}: {exc}"
            elif isinstance(exc, OSError):
                # transformers/huggingface_hub report a cache miss in offline mode as OSError.
                where = (
                    f"not found: no local directory {str(local.absolute())!r}, and not in the "
                    f"Hugging Face cache {_hf_cache_dir()!r} (looked offline, nothing downloaded)"
                )
                detail = ""
            else:
                where = f"found in the Hugging Face cache {_hf_cache_dir()!r} but failed to load"
                detail = f": {type(exc).__name__}: {exc}"
            raise ModelLoadError(
                f"cannot load cross-encoder {model!r}: {where}{detail}",
                hint="pass a local model directory, or download the model into the HF cache on a "
                "machine with network access (e.g. `hf download MODEL`)",
            ) from exc

        num_labels = int(loaded.num_labels)
        if num_labels != 1:
            raise ModelLoadError(
                f"cross-encoder {model!r} has {num_labels} output labels; a reranker needs a "
                "model with exactly one relevance logit (num_labels=1)",
                hint="use a model trained for reranking, such as cross-encoder/ms-marco-*",
            )

        positions = getattr(loaded.config, "max_position_embeddings", None)
        if isinstance(positions, int) and 0 < positions < max_length:
            # An explicit max_length bypasses CrossEncoder's own cap; longer inputs would index
            # past the position embeddings and crash at predict time.
            logger.warning(
                "max_length=%d exceeds the %d positions of %r; truncating to %d",
                max_length,
                positions,
                model,
                positions,
            )
            loaded.max_seq_length = positions
        _CACHE[key] = loaded
        return loaded


class CrossEncoderRerankerConfig(BaseModel):
    """``{"type": "cross_encoder", ...}`` of a bot row; see :class:`CrossEncoderReranker`."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    model: str = Field(DEFAULT_RERANKER_MODEL, min_length=1, max_length=1024)
    batch_size: int = Field(32, ge=1, le=4096)
    max_length: int = Field(512, ge=_MIN_MAX_LENGTH, le=8192)
    device: str = Field("cpu", pattern=r"^(cpu|mps|cuda(:[0-9]{1,3})?)$")


class CrossEncoderReranker(AbstractReranker):
    """Rerank documents with a sentence-transformers cross-encoder (one relevance logit).

    Each (query, ``document.page_content``) pair is encoded jointly, truncated to
    ``max_length`` tokens (the longer side is cut first), and scored by the model. Scores are the
    model's RAW logits: unbounded, higher is more relevant, not probabilities (no sigmoid).

    Args:
        model: local directory of a saved cross-encoder, or a Hugging Face model id that is
            already in the local HF cache. Default ``"cross-encoder/ms-marco-MiniLM-L-6-v2"``.
            Nothing is ever downloaded.
        batch_size: pairs per forward pass, default 32 (an int >= 1).
        max_length: maximum tokens per (query, passage) pair, default 512 (an int >= 4);
            capped at the model's position embeddings.
        device: torch device string, default ``"cpu"`` (e.g. ``"cuda"``, ``"cuda:1"``, ``"mps"``).

    The model is loaded by :meth:`warm_up`, or on the first :meth:`rerank`, never in
    ``__init__``. One model is loaded per process for each (model, device, max_length) and is
    shared by every instance.

    Raises:
        ConfigurationError: (at init, a ``ValueError``) a parameter has the wrong type or value.
    """

    type_name: ClassVar[str] = "cross_encoder"
    config_model = CrossEncoderRerankerConfig

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_RERANKER_MODEL,
        *,
        batch_size: int = 32,
        max_length: int = 512,
        device: str = "cpu",
    ) -> None:
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                f"model must be a non-empty model name or directory, got {model!r}"
            )
        check_int("batch_size", batch_size, 1)
        check_int("max_length", max_length, _MIN_MAX_LENGTH)
        if not isinstance(device, str) or not device.strip():
            raise ConfigurationError(f"device must be a non-empty string, got {device!r}")
        try:
            import torch

            torch.device(device)  # parses only; availability is checked when loading
        except (RuntimeError, ValueError) as exc:
            raise ConfigurationError(
                f"device must be a torch device string such as 'cpu' or 'cuda:0', got {device!r}"
            ) from exc
        self._model_name = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self._model: CrossEncoder | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._model_name!r}, batch_size={self.batch_size}, "
            f"max_length={self.max_length}, device={self.device!r})"
        )

    @property
    def model_name(self) -> str:
        """The ``model`` argument as given."""
        return self._model_name

    @property
    def model(self) -> CrossEncoder:
        """The underlying ``CrossEncoder`` (loads it if needed)."""
        self.warm_up()
        assert self._model is not None
        return self._model

    def warm_up(self) -> None:
        """Load the model now (otherwise it is loaded on the first :meth:`rerank`).

        Raises:
            ModelLoadError: the model is not a local directory nor in the HF cache (the message
                names both places), fails to load, or has more than one output label.
        """
        if self._model is None:
            self._model = _load(self._model_name, self.device, self.max_length)

    def close(self) -> None:
        """Drop this instance's reference to the model (the process cache keeps it)."""
        self._model = None

    def _predict(self, query: str, texts: list[str]) -> list[float]:
        import torch

        model = self.model
        scores = model.predict(
            [(query, text) for text in texts],
            batch_size=self.batch_size,
            show_progress_bar=False,
            # Explicit, in case a shared model's default activation was changed by someone.
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
        )
        return [float(s) for s in scores]

    async def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        """Raw logits, one per document in input order; runs in a worker thread.

        Loading (first call) and inference both run via ``asyncio.to_thread`` so the event loop
        keeps serving other requests. Errors from the model propagate unchanged; NaN logits are
        returned as NaN.
        """
        texts = [doc.page_content for doc in documents]
        if not texts:
            return []
        return await asyncio.to_thread(self._predict, query, texts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "model": self._model_name,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            "device": self.device,
        }

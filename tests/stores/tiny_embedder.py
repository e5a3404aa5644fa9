"""A tiny 384-dimension sentence-transformers model on disk: a second real model offline.

Same dimension as all-MiniLM-L6-v2 on purpose: a different dimension is refused by the
column's type, the same one only by the model record. Random weights (seeded): its vectors
mean nothing, but they are a real model's, loaded the way users load theirs (a path).
"""

from __future__ import annotations

from pathlib import Path


def build_tiny_embedder(path: Path, *, seed: int = 0, dimension: int = 384) -> Path:
    """Write a tiny BERT (hidden 32, 1 layer) + mean pooling + Dense(32 -> ``dimension``)
    model."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from parrot_parents.embeddings.sentence_transformer import default_model_path

    bert_dir = path / "bert"
    bert_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        BertModel(config).save_pretrained(str(bert_dir))
        tokenizer.save_pretrained(str(bert_dir))
        word = models.Transformer(str(bert_dir), max_seq_length=256)
        pooling = models.Pooling(32, pooling_mode="mean")
        dense = models.Dense(32, dimension, activation_function=torch.nn.Tanh())
        model = SentenceTransformer(modules=[word, pooling, dense, models.Normalize()])
    out = path / "model"
    model.save(str(out))
    return out

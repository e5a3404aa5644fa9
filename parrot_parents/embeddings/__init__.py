"""Embedding models: per-text encoding and late chunking."""

from parrot_parents.embeddings.sentence_transformer import (
    DEFAULT_EMBEDDING_MODEL,
    SentenceTransformerEmbeddings,
    default_model_path,
)

__all__ = ["DEFAULT_EMBEDDING_MODEL", "SentenceTransformerEmbeddings", "default_model_path"]

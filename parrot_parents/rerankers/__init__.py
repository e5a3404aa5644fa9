"""Rerankers: reorder retrieved documents by a (query, document) relevance model.

``CrossEncoderReranker`` loads a sentence-transformers cross-encoder offline and scores with its
raw logits (higher is better). ``AbstractReranker.from_dict`` rebuilds any reranker from its
``to_dict()`` configuration.
"""

from parrot_parents.rerankers.abstract import AbstractReranker, RerankedDocument
from parrot_parents.rerankers.cross_encoder import CrossEncoderReranker

__all__ = ["AbstractReranker", "CrossEncoderReranker", "RerankedDocument"]

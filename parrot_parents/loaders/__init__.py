"""Loaders: read sources and build the 2- or 3-level parent/child hierarchy.

The names below load on first use (:mod:`parrot_parents.lazy`), so the CLI can read the
ingestion defaults (:mod:`parrot_parents.loaders.defaults`) without importing the model stack.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__all__ = [
    "AbstractLoader",
    "ChunkInfo",
    "DocumentHierarchy",
    "IngestReport",
    "LateChunkingProcessor",
    "TextLoader",
    "read_text_file",
]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.loaders.abstract import AbstractLoader, IngestReport
    from parrot_parents.loaders.chunk_info import ChunkInfo
    from parrot_parents.loaders.hierarchy import DocumentHierarchy, LateChunkingProcessor
    from parrot_parents.loaders.readers import read_text_file
    from parrot_parents.loaders.text import TextLoader

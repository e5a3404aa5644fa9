"""Loaders: read sources and build the 2- or 3-level parent/child hierarchy."""

from parrot_parents.loaders.abstract import AbstractLoader, IngestReport
from parrot_parents.loaders.chunk_info import ChunkInfo
from parrot_parents.loaders.hierarchy import DocumentHierarchy, LateChunkingProcessor
from parrot_parents.loaders.readers import read_text_file
from parrot_parents.loaders.text import TextLoader

__all__ = [
    "AbstractLoader",
    "ChunkInfo",
    "DocumentHierarchy",
    "IngestReport",
    "LateChunkingProcessor",
    "TextLoader",
    "read_text_file",
]

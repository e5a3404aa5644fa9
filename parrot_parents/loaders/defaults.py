"""The ingestion defaults, in one place: every way in (``TextLoader()``, ``ingest``,
``reindex``, ``eval``) builds the same rows from the same files.

A light module (no model, no SQL): the CLI reads it for ``--help``. Sizes are in
characters; the seed spec names the parent sizes ``*_tokens`` for compatibility (see
:mod:`parrot_parents.loaders.hierarchy`). Why these values: docs/benchmarks.md.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_CHILD_OVERLAP",
    "DEFAULT_CHILD_SIZE",
    "DEFAULT_DOCUMENT_LAYER",
    "DEFAULT_LATE_CHUNKING",
    "DEFAULT_PARENT_OVERLAP",
    "DEFAULT_PARENT_SIZE",
    "DEFAULT_PREAMBLE",
    "DEFAULT_SECTION_PARENTS",
    "DEFAULT_STRATEGY",
    "DEFAULT_THRESHOLD",
]

#: Maximum child length in characters (chosen on the shared dev set).
DEFAULT_CHILD_SIZE = 400
#: Characters shared by neighbouring children.
DEFAULT_CHILD_OVERLAP = 0
#: A document longer than this is cut into parent_chunks (3 levels).
DEFAULT_THRESHOLD = 16000
#: parent_chunk length.
DEFAULT_PARENT_SIZE = 4000
#: Characters shared by neighbouring parent_chunks.
DEFAULT_PARENT_OVERLAP = 200
#: Children are embedded with late chunking (the parent read in one pass).
DEFAULT_LATE_CHUNKING = True
#: Parents follow the sections of structured documents, and children carry a preamble
#: (title and section path); measured in README, "Structure-aware parents".
DEFAULT_SECTION_PARENTS = True
DEFAULT_PREAMBLE = True
#: No extractive overview row per structured document (it is no span of the source).
DEFAULT_DOCUMENT_LAYER = False
#: The ingestion strategy on a store that can search indexed rows (PostgreSQL; elsewhere
#: none): :class:`~parrot_parents.loaders.extractive.ExtractiveIndexer`, no model call.
#: Measured in docs/strategies.md; ``--strategy plain`` (``indexer=None``) turns it off.
DEFAULT_STRATEGY = "contextual:extractive"

"""The chunk policy version: one hash of everything that shapes a document's rows.

Two ingests with the same policy version and the same content produce the same rows, so
``ingest`` skips such a file and ``reindex --stale`` re-chunks only documents stored under
another version. The hash covers the sizes (characters), the splitter and reader versions,
the reader chosen for the document, section parents and preambles, late chunking, the
embedding model and the ingestion strategy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from parrot_parents.loaders.structure.reading import READER_VERSION

__all__ = ["SPLITTER_VERSION", "ChunkPolicy"]

#: Bumped whenever the splitter or the hierarchy builder cut differently.
SPLITTER_VERSION = 2


@dataclass(frozen=True)
class ChunkPolicy:
    """The settings that shape a document's rows (sizes in characters)."""

    child_size: int
    child_overlap: int
    parent_threshold: int
    parent_size: int
    parent_overlap: int
    late_chunking: bool
    section_parents: bool
    preamble: bool
    model: str
    document_layer: bool = False
    strategy: str = "plain"
    splitter_version: int = SPLITTER_VERSION
    reader_version: int = READER_VERSION

    def version(self, reader: str = "text") -> str:
        """``"cp1-<16 hex>"``: the sha256 of these settings and the document's ``reader``
        (``markdown``, ``html``, ``pdf`` or ``text``)."""
        payload = json.dumps({**asdict(self), "reader": reader}, sort_keys=True)
        return "cp1-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

"""Moving in: ai-parrot ``Document``s into a parrot-parents collection, in one call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.ai_parrot.documents import framework_document
from parrot_parents.loaders.abstract import IngestReport
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.records.markers import HIERARCHY_KEYS

__all__ = ["FRAMEWORK_HIERARCHY_KEYS", "ingest_documents"]

#: The keys ai-parrot's own parent-child loaders write on a chunk or a parent. A document
#: carrying one is a piece of ai-parrot's hierarchy, not a whole source: parrot-parents
#: builds its own hierarchy from whole documents.
FRAMEWORK_HIERARCHY_KEYS = frozenset(
    {"is_chunk", "is_full_document", "parent_document_id", "document_type", "chunk_index"}
)


def document_id_of(metadata: Mapping[str, Any]) -> str | None:
    """A document's id as :func:`ingest_documents` gives it: ``document_id``, else
    ``source``, ``filename`` or ``url``; None when it has none of them."""
    for key in ("document_id", "source", "filename", "url"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None


async def ingest_documents(
    documents: Sequence[Any],
    store: AbstractStore,
    *,
    skip_unchanged: bool = True,
    **loader_options: Any,
) -> IngestReport:
    """Write ai-parrot ``Document``s (what its loaders produce) into ``store``.

    Each document is a whole source: its text is cut into parents and children by the
    package's defaults (late chunking, section parents, the default ingestion strategy)
    and its ``metadata`` is kept on every row. Its id is ``metadata["document_id"]``, else
    its ``source``, ``filename`` or ``url`` (so ingesting an edited version replaces the
    earlier one), else a hash of its text.

    Args:
        documents: ai-parrot ``Document``s (``page_content``, ``metadata``), or LangChain
            ``Document``s.
        store: the collection to write (created when missing).
        skip_unchanged: leave a document stored with the same text and metadata as it is
            (listed in ``report.unchanged``); default True.
        **loader_options: :class:`~parrot_parents.loaders.text.TextLoader` keywords
            (``child_chunk_size`` in characters, ``late_chunking``...).

    Returns:
        The :class:`~parrot_parents.loaders.abstract.IngestReport`.

    A document whose text is blank is not written, and is named in
    ``report.warnings``.

    Raises:
        ConfigurationError: a document carrying ai-parrot's chunk markers (``is_chunk``,
            ``parent_document_id``...: ingest the whole source documents instead), two
            documents of one id (ai-parrot's loaders name a file by its bare name in
            ``source``: give each a ``document_id``), or a bad loader option; nothing is
            written then.
        TypeError: an item that is not a ``Document``.
    """
    converted = []
    blank: list[str] = []
    first: dict[str, int] = {}
    for position, document in enumerate(documents):
        doc = framework_document(document)
        marked = sorted(set(doc.metadata) & (FRAMEWORK_HIERARCHY_KEYS | HIERARCHY_KEYS))
        if marked:
            raise ConfigurationError(
                f"documents[{position}] carries hierarchy key(s) {', '.join(marked)}: it is "
                "a chunk or a parent of another hierarchy",
                hint="ingest the whole source documents (ai-parrot's loaders with their "
                "parent-child splitting off), or drop those keys",
            )
        document_id = document_id_of(doc.metadata)
        if document_id is not None:
            earlier = first.setdefault(document_id, position)
            if earlier != position:
                raise ConfigurationError(
                    f"documents[{earlier}] and documents[{position}] are both document "
                    f"{document_id!r}: the second would replace the first",
                    hint="give each a distinct metadata['document_id'] (its path, say)",
                )
            doc.metadata["document_id"] = document_id
        if not doc.page_content.strip():
            blank.append(document_id or f"documents[{position}]")
            continue
        converted.append(doc)
    try:
        loader = TextLoader(**loader_options)
    except TypeError as exc:
        raise ConfigurationError(
            f"a loader option is unknown: {exc}",
            hint="see TextLoader's keywords (child_chunk_size, late_chunking, ...)",
        ) from exc
    report = await loader.ingest(store, documents=converted, skip_unchanged=skip_unchanged)
    for name in blank:
        report.warnings.setdefault(name, []).append("empty document skipped")
    return report

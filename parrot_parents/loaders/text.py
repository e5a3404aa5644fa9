"""Loader for plain-text, Markdown, HTML and PDF files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Unpack

from langchain_core.documents import Document

from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders.abstract import (
    AbstractLoader,
    IngestReport,
    LoaderOptions,
    ParentSizes,
    wants_bulk_load,
)
from parrot_parents.loaders.progress import IngestProgress
from parrot_parents.loaders.readers import OnBadBytes, discover_files, utf8_name
from parrot_parents.loaders.structure.reading import STRUCTURE_KEY, read_document
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.records.ids import content_sha256
from parrot_parents.sync import run_sync

__all__ = ["TextLoader"]


class TextLoader(AbstractLoader):
    """Reads ``.txt``/``.md``/``.html``/``.pdf`` files (or directories of them).

    Text and Markdown are read as UTF-8 (UTF-16/UTF-32 after their byte-order mark:
    :func:`~parrot_parents.loaders.readers.read_text_file`); HTML as its visible text; PDF
    as the text of its pages. What is not read (other file types, hidden files in a
    folder, named pipes...) is listed with its reason in ``report.warnings``
    (:func:`~parrot_parents.loaders.readers.discover_files`). Each document carries the
    structure its reader found (headings, tables, pages:
    :mod:`parrot_parents.loaders.structure.reading`), used when ``section_parents`` is on.

    Args:
        paths: files and/or directories; optional (``load`` then returns ``[]``).
        on_bad_bytes: ``"error"`` (default) reports a file with invalid UTF-8 or NUL bytes
            as failed and goes on with the others; ``"replace"`` cleans it and reports it.
        root: ids are paths relative to this directory, however ``paths`` are spelled
            (stable identity; see :func:`~parrot_parents.loaders.readers.discover_files`).
        id_prefix: a prefix for every id, replacing the root-name prefix added when
            several paths are given.
        options: the keywords of
            :class:`~parrot_parents.loaders.abstract.AbstractLoader`; the defaults are
            those of ``parrot-parents ingest`` (:mod:`parrot_parents.loaders.defaults`),
            its default strategy included, so both write the same rows.
    """

    def __init__(
        self,
        paths: Sequence[str | Path] | str | Path | None = None,
        *,
        on_bad_bytes: OnBadBytes = "error",
        root: str | Path | None = None,
        id_prefix: str | None = None,
        **options: Unpack[LoaderOptions],
    ) -> None:
        super().__init__(**options)
        if paths is None:
            self.paths: list[str | Path] = []
        elif isinstance(paths, str | Path):
            self.paths = [paths]
        else:
            self.paths = list(paths)
        self.on_bad_bytes = on_bad_bytes
        self.root = root
        self.id_prefix = id_prefix

    def load(self) -> list[Document]:
        """Read every file; a bad file lands in ``self.report.failed``, the rest load."""
        docs: list[Document] = []
        # Two files with the same text are two documents (their own ids and sources, and
        # deleting one keeps the other), both stored; the second is flagged here, as a
        # later ingest would flag it against the stored copy.
        first_with: dict[str, tuple[str, str]] = {}
        found = discover_files(self.paths, root=self.root, id_prefix=self.id_prefix)
        for name, reason in found.skipped.items():
            self.report.warnings.setdefault(name, []).append(f"skipped: {reason}")
        self.report.failed.update(found.conflicts)
        for path, raw_id in found.files:
            # Reports name the file as the user spelt it; the stored source is relative
            # to what was ingested, so that no reader of the rows learns this machine's paths.
            source = utf8_name(str(path))[0]
            stored_source = utf8_name(found.sources[raw_id])[0]
            document_id, renamed = utf8_name(raw_id)
            if renamed:
                self.report.warnings.setdefault(source, []).append(
                    f"the file name is not valid UTF-8; stored as document {document_id!r}"
                )
            try:
                text, structure, warnings = read_document(path, on_bad_bytes=self.on_bad_bytes)
            except DocumentReadError as exc:
                self.report.failed[source] = exc.reason
                continue
            if warnings:
                self.report.warnings.setdefault(source, []).extend(warnings)
            if not text.strip():
                self.report.warnings.setdefault(source, []).append("empty file skipped")
                continue
            earlier = first_with.setdefault(content_sha256(text), (source, document_id))
            if earlier != (source, document_id):
                self.report.warnings.setdefault(source, []).append(
                    f"the same content as {earlier[0]} (document {earlier[1]!r}) in this "
                    "ingest; both are stored"
                )
            meta: dict[str, Any] = {"document_id": document_id, "source": stored_source}
            if not structure.empty or structure.pages:
                meta[STRUCTURE_KEY] = structure.to_dict()
            docs.append(Document(page_content=text, metadata=meta))
        return docs

    async def ingest(
        self,
        vector_store: AbstractStore,
        *,
        documents: Sequence[Document] | None = None,
        progress: IngestProgress | Callable[[int], object] | None = None,
        skip_unchanged: bool = True,
        bulk_load: bool | None = None,
        **sizes: Unpack[ParentSizes],
    ) -> IngestReport:
        """Load the files (or take ``documents``, from :meth:`load`) and write their
        hierarchies to ``vector_store``.

        A file whose text, source, metadata and chunk policy version are those already
        stored is skipped and listed in ``report.unchanged`` (``skip_unchanged=False``
        rewrites it).
        ``bulk_load``: defer the vector index and build it once after the load; None
        (default) does so into a new or empty collection (:func:`wants_bulk_load`); the
        build time is ``report.index_build_seconds``. ``progress`` and the parent
        ``sizes`` (characters): as
        :meth:`~parrot_parents.loaders.abstract.AbstractLoader.chunk_documents` takes them.

        Returns the :class:`IngestReport` (also kept on ``self.report``).
        """
        docs = self.load() if documents is None else list(documents)
        bulk = await wants_bulk_load(vector_store, bulk_load) if docs else False
        await self.chunk_documents(
            docs,
            vector_store=vector_store,
            progress=progress,
            skip_unchanged=skip_unchanged,
            bulk_load=bulk,
            **sizes,
        )
        return self.report

    def ingest_sync(self, vector_store: AbstractStore, **kwargs: Any) -> IngestReport:
        """:meth:`ingest` from code without an event loop (:mod:`parrot_parents.sync`).

        Use the store only through ``*_sync`` calls afterwards (its pool lives on the
        package's background loop).
        """
        return run_sync(self.ingest(vector_store, **kwargs))

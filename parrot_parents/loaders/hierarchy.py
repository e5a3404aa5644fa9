"""Builds the 2- or 3-level parent/child hierarchy of a document and embeds its children.

Sizes follow the parent-child retrieval spec (FEAT-128) and are in **characters**, although
the spec's parameter names end in ``_tokens``:

* a document of at most ``parent_chunk_threshold_tokens`` (16000) characters is stored
  whole as the parent (2 levels, ``is_full_document: true``);
* a longer document is cut into overlapping ``parent_chunk`` rows of
  ``parent_chunk_size_tokens`` (4000) characters with ``parent_chunk_overlap_tokens`` (200)
  characters of overlap, and the document itself is not stored (3 levels);
* children are cut inside their parent on sentence and word boundaries
  (``child_chunk_size``, default 400 characters).

Children are embedded either one by one, or with late chunking (Günther et al., 2024,
arXiv:2409.04701): the transformer reads the whole parent once and each child's vector
is pooled from the token vectors inside its span, so it carries the parent's context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from langchain_core.documents import Document

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError, ParrotParentsError
from parrot_parents.loaders.chunk_info import ChunkInfo
from parrot_parents.loaders.defaults import (
    DEFAULT_CHILD_OVERLAP,
    DEFAULT_CHILD_SIZE,
    DEFAULT_DOCUMENT_LAYER,
    DEFAULT_LATE_CHUNKING,
    DEFAULT_PARENT_OVERLAP,
    DEFAULT_PARENT_SIZE,
    DEFAULT_PREAMBLE,
    DEFAULT_SECTION_PARENTS,
    DEFAULT_THRESHOLD,
)
from parrot_parents.loaders.progress import PROGRESS_CHARACTERS
from parrot_parents.loaders.splitting import PARENT_SEPARATORS, split_spans
from parrot_parents.loaders.structure.builder import Rows, SectionSizes, build_rows
from parrot_parents.stores.records.markers import (
    DOCUMENT_ID,
    HIERARCHY_KEYS,
    PARENT_CHUNK,
    SEARCHABLE,
)
from parrot_parents.stores.records.sentences import SENTENCES, SentenceVectors, sentence_spans
from parrot_parents.stores.records.structure_markers import RETRIEVAL_PREAMBLE

if TYPE_CHECKING:
    from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder
    from parrot_parents.loaders.structure.tree import Structure

__all__ = [
    "DEFAULT_CHILD_SIZE",
    "DEFAULT_PARENT_OVERLAP",
    "DEFAULT_PARENT_SIZE",
    "DEFAULT_PREAMBLE",
    "DEFAULT_SECTION_PARENTS",
    "DEFAULT_THRESHOLD",
    "HIERARCHY_OWNED",
    "DocumentHierarchy",
    "LateChunkingProcessor",
    "ProcessorOptions",
    "validate_parent_sizes",
]


def validate_parent_sizes(threshold: int, size: int, overlap: int) -> None:
    """Check the spec's three size parameters (characters).

    Raises:
        ConfigurationError (a ``ValueError``): a size below 1, a negative overlap, or
            ``overlap >= size``.
    """
    if threshold < 1:
        raise ConfigurationError(
            f"parent_chunk_threshold_tokens must be >= 1 character, got {threshold!r}"
        )
    if size < 1:
        raise ConfigurationError(f"parent_chunk_size_tokens must be >= 1 character, got {size!r}")
    if overlap < 0 or overlap >= size:
        raise ConfigurationError(
            f"parent_chunk_overlap_tokens must be in [0, parent_chunk_size_tokens={size}), "
            f"got {overlap!r}",
            hint="an overlap as large as the parent would never advance",
        )


@dataclass
class DocumentHierarchy:
    """Parents and children of one source document (before or after embedding).

    ``parents`` are LangChain ``Document``s with ids; ``children`` are :class:`ChunkInfo`
    whose offsets are characters of ``text``; ``levels`` is 2 or 3.
    """

    document_id: str
    text: str
    levels: int
    parents: list[Document] = field(default_factory=list)
    children: list[ChunkInfo] = field(default_factory=list)

    def child_documents(self) -> list[Document]:
        """Children as ``Document``s (ids set, embeddings not included)."""
        return [
            Document(id=c.chunk_id, page_content=c.text, metadata=dict(c.metadata))
            for c in self.children
        ]

    def documents(self) -> list[Document]:
        """Parents first, then children."""
        return [*self.parents, *self.child_documents()]


class ProcessorOptions(TypedDict, total=False):
    """The keywords of :class:`LateChunkingProcessor`."""

    child_chunk_size: int
    child_chunk_overlap: int
    embedding: SentenceTransformerEmbeddings | None
    late_chunking: bool
    section_parents: bool
    preamble: bool
    document_layer: bool


class LateChunkingProcessor:
    """Cuts documents into the parent/child hierarchy and embeds the children.

    Args:
        child_chunk_size: maximum child length in characters, default
            :data:`DEFAULT_CHILD_SIZE` (with section parents, only a child whose headings
            fill more than 3/4 of it exceeds it: a heading is never a child alone).
        child_chunk_overlap: characters shared by neighbouring children, default 0.
        embedding: the embedding model; all-MiniLM-L6-v2 by default.
        late_chunking: pool child vectors from one pass over the parent (True, the
            default: +5 to +7 points of recall@5 on the shared dev set, see
            docs/benchmarks.md) or embed each child on its own (False). See
            :mod:`parrot_parents.embeddings.late_chunking` for the models that qualify.
        section_parents: when a document comes with a structure (headings, tables), its
            parents follow its sections and its tables give ``table_row`` children
            (:mod:`parrot_parents.loaders.structure.builder`); default
            :data:`DEFAULT_SECTION_PARENTS` (True).
        preamble: embed and lexically index each child of a structured document with a
            short preamble (title and section path) that is never returned; with late
            chunking the parent's preamble is read in the same pass as the parent.
            Default :data:`DEFAULT_PREAMBLE` (True).
        document_layer: add one ``document`` row per structured document, an extractive
            overview that is embedded but is no span of the source
            (:mod:`parrot_parents.loaders.structure.summary`). Default False.

    Raises:
        ConfigurationError: bad sizes; a model unfit for late chunking (when enabled, at
            :meth:`warm_up` or the first embedding).
    """

    def __init__(
        self,
        *,
        child_chunk_size: int = DEFAULT_CHILD_SIZE,
        child_chunk_overlap: int = DEFAULT_CHILD_OVERLAP,
        embedding: SentenceTransformerEmbeddings | None = None,
        late_chunking: bool = DEFAULT_LATE_CHUNKING,
        section_parents: bool = DEFAULT_SECTION_PARENTS,
        preamble: bool = DEFAULT_PREAMBLE,
        document_layer: bool = DEFAULT_DOCUMENT_LAYER,
    ) -> None:
        # Validate now, not at first use.
        split_spans("", child_chunk_size, child_chunk_overlap)
        self.child_chunk_size = child_chunk_size
        self.child_chunk_overlap = child_chunk_overlap
        self.embedding = embedding or SentenceTransformerEmbeddings()
        self.late_chunking = late_chunking
        self.section_parents = section_parents
        self.preamble = preamble
        self.document_layer = document_layer
        self._late: LateChunkingEmbedder | None = None
        #: Children embedded in windows because they exceed the model's window (non-late).
        self.windowed_children = 0

    # -- structure (pure) ------------------------------------------------------------

    def build_hierarchy(
        self,
        document_text: str,
        document_id: str,
        metadata: dict[str, Any] | None = None,
        *,
        parent_chunk_threshold_tokens: int = DEFAULT_THRESHOLD,
        parent_chunk_size_tokens: int = DEFAULT_PARENT_SIZE,
        parent_chunk_overlap_tokens: int = DEFAULT_PARENT_OVERLAP,
        force_three_level: bool = False,
        structure: Structure | None = None,
    ) -> DocumentHierarchy:
        """Split one document; nothing is embedded. Sizes in characters.

        Returns a 2-level hierarchy when ``len(document_text) <= threshold`` (and not
        ``force_three_level``), else a 3-level one. Empty text yields no rows. With
        :attr:`section_parents` and a ``structure`` holding headings or tables, parents
        follow the sections (:mod:`parrot_parents.loaders.structure.builder`).
        """
        validate_parent_sizes(
            parent_chunk_threshold_tokens, parent_chunk_size_tokens, parent_chunk_overlap_tokens
        )
        if not isinstance(document_id, str) or not document_id:
            raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
        base = {k: v for k, v in (metadata or {}).items() if k not in HIERARCHY_OWNED}
        base["document_id"] = document_id
        three = force_three_level or len(document_text) > parent_chunk_threshold_tokens
        hierarchy = DocumentHierarchy(document_id, document_text, 3 if three else 2)
        if not document_text.strip():
            return hierarchy
        if self.section_parents and structure is not None and not structure.empty:
            rows = Rows(document_text, document_id, base, structure.pages)
            sizes = SectionSizes(
                self.child_chunk_size,
                self.child_chunk_overlap,
                parent_chunk_size_tokens,
                parent_chunk_overlap_tokens,
            )
            build_rows(
                rows,
                structure,
                sizes,
                three_level=three,
                preamble=self.preamble,
                document_layer=self.document_layer,
            )
            hierarchy.parents, hierarchy.children = rows.parents, rows.children
            return hierarchy
        rows = Rows(document_text, document_id, base)
        meta: dict[str, Any]
        if three:
            spans = split_spans(
                document_text,
                parent_chunk_size_tokens,
                parent_chunk_overlap_tokens,
                separators=PARENT_SEPARATORS,
            )
            kind, meta = "parent_chunk", {"document_type": PARENT_CHUNK}
        else:
            spans = [(0, len(document_text))]
            kind, meta = "parent", {"is_full_document": True}
        seen_children: set[tuple[int, int]] = set()
        for p_start, p_end in spans:
            parent_id = rows.parent(kind, p_start, p_end, meta)
            for c_start, c_end in split_spans(
                document_text[p_start:p_end], self.child_chunk_size, self.child_chunk_overlap
            ):
                span = (p_start + c_start, p_start + c_end)
                # Overlapping parent_chunks can cut the very same child twice; keep the first.
                if span not in seen_children:
                    seen_children.add(span)
                    rows.child(parent_id, *span, {})
        hierarchy.parents, hierarchy.children = rows.parents, rows.children
        return hierarchy

    # -- embedding ---------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load the model (and check it qualifies for late chunking when enabled)."""
        self.embedding.warm_up()
        if self.late_chunking:
            self._late_embedder()

    def _late_embedder(self) -> LateChunkingEmbedder:
        if self._late is None:
            from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder

            late = LateChunkingEmbedder(self.embedding)
            late.warm_up()
            self._late = late
        return self._late

    async def embed_hierarchies(
        self,
        hierarchies: Sequence[DocumentHierarchy],
        on_progress: Callable[[float], object] | None = None,
    ) -> None:
        """Fill ``ChunkInfo.embedding`` of every child (for a child with a
        ``row_prefix``, its indexed row's vector; see :class:`ChunkInfo`).

        The model runs per document, and a document whose children hold more than
        :data:`~parrot_parents.loaders.progress.PROGRESS_CHARACTERS` characters in steps
        of at most that many (one parent's children stay in one
        step: late chunking reads the parent in one pass). After each step
        ``on_progress`` (default none) is told the fraction of its document done, so the
        fractions of a call add up to ``len(hierarchies)``.
        """
        # A child indexed through a row (header + child, ChunkInfo.row_prefix) gets that
        # row's vector. With late chunking: the child read in its parent, plus its header
        # read alone (each distinct header once: a section's children share theirs), so
        # the model reads every token of the text once. Without: the row read alone.
        # Measured against the row read alone, with or without the child's late vector
        # added (docs/benchmarks.md, "Late chunking under the indexed rows").
        rows = [c for h in hierarchies for c in h.children if c.row_prefix is not None]
        if self.late_chunking:
            texts = list(dict.fromkeys(str(c.row_prefix).strip() for c in rows))
        else:
            texts = [f"{c.row_prefix}{c.text}" for c in rows]
        alone = await asyncio.to_thread(self.embedding.encode, texts) if texts else None
        for h in hierarchies:
            for step, fraction in _steps(h, self.late_chunking):
                if step:
                    await self._embed_step(step)
                if on_progress is not None:
                    on_progress(fraction)
        if alone is None:
            return
        vectors = np.asarray(alone, dtype=np.float32)
        if not self.late_chunking:
            for child, vector in zip(rows, vectors, strict=True):
                child.embedding = vector
            return
        header = {text: vectors[i] for i, text in enumerate(texts)}
        for child in rows:
            head = header[str(child.row_prefix).strip()]
            if child.embedding is None:  # a document-layer row has no late-chunked vector
                child.embedding = head
                continue
            both = np.asarray(child.embedding, dtype=np.float32) + head
            child.embedding = both / max(float(np.linalg.norm(both)), 1e-12)

    async def _embed_step(self, groups: list[_Group]) -> None:
        """Embed one step: ``(parent, its children)`` groups with late chunking, else
        ``(None, children)`` embedded alone."""
        if not self.late_chunking:
            await self._embed_each([c for _, kids in groups for c in kids])
            return
        items: list[tuple[str, list[tuple[int, int]]]] = []
        sentences: list[list[list[tuple[int, int]]]] = []
        for parent, kids in groups:
            assert parent is not None  # late chunking steps always name the parent
            # The preamble is read in the same pass, before the parent's text, so every
            # child's vector sees its headings; the spans move by its length.
            head = _preamble_prefix(parent.metadata)
            offset = int(parent.metadata["start_index"]) - len(head)
            # Each child's sentences are pooled in the same pass (the packer trims by
            # them): offsets in the document, found in the child's own text.
            kid_sentences = [
                [(c.start_index + s, c.start_index + e) for s, e in sentence_spans(c.text)]
                for c in kids
            ]
            sentences.append(kid_sentences)
            spans = [(c.start_index - offset, c.end_index - offset) for c in kids]
            spans += [(s - offset, e - offset) for own in kid_sentences for s, e in own]
            items.append((head + parent.page_content, spans))
        results = await self._late_embedder().aembed_spans(items)
        for (_, kids), kid_sentences, vectors in zip(groups, sentences, results, strict=True):
            rest = len(kids)  # the children's vectors first, then their sentences'
            for i, (child, own) in enumerate(zip(kids, kid_sentences, strict=True)):
                child.embedding = vectors[i]  # a float32 row of the model's output
                if own:
                    found = SentenceVectors.build(own, vectors[rest : rest + len(own)])
                    child.metadata[SENTENCES] = found.encode()
                rest += len(own)

    async def _embed_each(self, children: list[ChunkInfo]) -> None:
        """Embed children one by one; a child longer than the model's window is embedded
        in overlapping windows (its token vectors averaged, as late chunking does), never
        cut silently. Counted in :attr:`windowed_children`.

        Raises:
            ConfigurationError: a child is too long and the model cannot be run in windows
                (see :func:`~parrot_parents.embeddings.late_chunking.check_late_chunking_model`).
        """
        # A child indexed through a row has that row's vector already (embed_hierarchies).
        children = [c for c in children if c.row_prefix is None]
        if not children:
            return
        texts = [_preamble_prefix(c.metadata) + c.text for c in children]
        long = set(await asyncio.to_thread(self._too_long, texts))
        short = [i for i in range(len(children)) if i not in long]
        vectors = await self.embedding.aembed_documents([texts[i] for i in short])
        matrix = np.asarray(vectors, dtype=np.float32)
        for i, vector in zip(short, matrix, strict=True):
            children[i].embedding = vector
        if not long:
            return
        try:
            late = self._late_embedder()
        except (ValueError, ParrotParentsError) as exc:
            raise ConfigurationError(
                f"{len(long)} child(ren) exceed the model's token window and the model "
                f"cannot embed them in windows: {exc}",
                hint="use a smaller child_chunk_size",
            ) from exc
        order = sorted(long)
        results = await late.aembed_spans([(texts[i], [(0, len(texts[i]))]) for i in order])
        for i, spans in zip(order, results, strict=True):
            children[i].embedding = spans[0]
        self.windowed_children += len(order)

    def _too_long(self, texts: list[str]) -> list[int]:
        """Indices of the texts with more tokens (special ones included) than the model
        reads at once (``max_seq_length``, 256 for all-MiniLM-L6-v2)."""
        model = self.embedding.model
        limit = getattr(model, "max_seq_length", None)
        tokenizer = getattr(model, "tokenizer", None)
        if not texts or not isinstance(limit, int) or tokenizer is None:
            return []
        ids = tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)
        return [i for i, row in enumerate(ids["input_ids"]) if len(row) > limit]

    # -- spec entry points ---------------------------------------------------------------

    async def process_document_three_level(
        self,
        document_text: str,
        document_id: str,
        metadata: dict[str, Any] | None = None,
        parent_chunk_size_tokens: int = DEFAULT_PARENT_SIZE,
        parent_chunk_overlap_tokens: int = DEFAULT_PARENT_OVERLAP,
    ) -> tuple[list[Document], list[ChunkInfo]]:
        """Split an oversized document into parent_chunks and embedded children.

        Sizes are characters. Returns ``(parent_chunks, children)``; the document itself
        is not among the parents.

        Raises:
            ConfigurationError (``ValueError``): ``overlap >= size`` or sizes below 1.
        """
        hierarchy = self.build_hierarchy(
            document_text,
            document_id,
            metadata,
            parent_chunk_size_tokens=parent_chunk_size_tokens,
            parent_chunk_overlap_tokens=parent_chunk_overlap_tokens,
            force_three_level=True,
        )
        await self.embed_hierarchies([hierarchy])
        return hierarchy.parents, hierarchy.children


def _preamble_prefix(metadata: dict[str, Any]) -> str:
    """The retrieval preamble of a row followed by a blank line, or ``""``."""
    preamble = metadata.get(RETRIEVAL_PREAMBLE)
    return f"{preamble}\n\n" if isinstance(preamble, str) and preamble else ""


#: One embedding unit: a parent and its children (late chunking), or None and one child.
_Group = tuple[Document | None, list[ChunkInfo]]

#: Keys the hierarchy writes itself; a caller's values for them are not stored (the
#: loader says so in its report's warnings). ``searchable`` is a caller's to give.
HIERARCHY_OWNED = (HIERARCHY_KEYS - {SEARCHABLE}) | {DOCUMENT_ID, RETRIEVAL_PREAMBLE}


def _steps(
    h: DocumentHierarchy, late_chunking: bool, step_characters: int = PROGRESS_CHARACTERS
) -> list[tuple[list[_Group], float]]:
    """A document's children cut into embedding steps of at most ``step_characters``
    characters of child text, each with the fraction of the document it completes.

    With late chunking a step holds whole parents' children (a parent with more stays
    alone in its step); without, children one by one. A document without children is one
    empty step of fraction 1.
    """
    if late_chunking:
        by_parent: dict[str, list[ChunkInfo]] = {}
        for c in h.children:
            by_parent.setdefault(c.parent_id, []).append(c)
        units: list[_Group] = [
            (parent, by_parent[str(parent.id)])
            for parent in h.parents
            if by_parent.get(str(parent.id))
        ]
    else:
        units = [(None, [c]) for c in h.children]
    total = sum(len(c.text) for _, kids in units for c in kids)
    if not units or total == 0:
        return [(units, 1.0)]
    steps: list[tuple[list[_Group], float]] = []
    current: list[_Group] = []
    size = 0
    for unit in units:
        chars = sum(len(c.text) for c in unit[1])
        if current and size + chars > step_characters:
            steps.append((current, size / total))
            current, size = [], 0
        current.append(unit)
        size += chars
    # The last step completes the document exactly, whatever the rounding before it.
    steps.append((current, 1.0 - sum(f for _, f in steps)))
    return steps

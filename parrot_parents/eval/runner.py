"""Run a question set through the real ingest and query pipeline, and score it.

All corpora go into one fresh collection (dropped afterwards unless ``keep``); every
question goes through :meth:`Chatbot.retrieve`, its passages are recorded as character
spans of the corpus files, and the run file is scored with :mod:`parrot_parents.eval.scorer`.
Ingest time excludes model loading; tokens are the embedding tokenizer's, without special
tokens; query time (ms) follows one untimed warm-up query. docs/evaluation.md has the rest.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError, ParrotParentsError
from parrot_parents.eval.intervals import Interval, percentile_intervals
from parrot_parents.eval.questions import (
    Question,
    check_references,
    is_int,
    load_corpora,
    load_questions,
)
from parrot_parents.eval.scorer import (
    DEFAULT_BUDGETS,
    DEFAULT_KS,
    RunPassage,
    score_by_corpus,
    score_per_question,
    score_run,
    write_run,
)
from parrot_parents.loaders.defaults import (
    DEFAULT_LATE_CHUNKING,
    DEFAULT_PREAMBLE,
    DEFAULT_SECTION_PARENTS,
)
from parrot_parents.loaders.hierarchy import (
    DEFAULT_CHILD_SIZE,
    DEFAULT_PARENT_OVERLAP,
    DEFAULT_PARENT_SIZE,
    DEFAULT_THRESHOLD,
    validate_parent_sizes,
)
from parrot_parents.loaders.structure.reading import STRUCTURE_KEY, structure_of
from parrot_parents.retrieval.modes import parse_mode
from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.strategies.build import free_report, indexer_for
from parrot_parents.strategies.spec import StrategySpec, parse_strategy, strategy_for

__all__ = [
    "EvalConfig",
    "EvalResult",
    "corpus_documents",
    "count_tokens",
    "fresh_collection_name",
    "load_corpora",  # re-exported from parrot_parents.eval.questions
    "passage_span",
    "percentile",
    "run_eval",
]

Log = Callable[[str], None]


def corpus_documents(corpora: Mapping[str, str]) -> list[Document]:
    """The corpora as an evaluation ingests them, one document per corpus (id and source:
    the corpus id). They are read as Markdown, as ``ingest`` reads .md files, so that an
    evaluation measures the structure-aware default (text without headings gets no
    structure)."""
    return [
        Document(
            page_content=text,
            metadata={
                "document_id": cid,
                "source": cid,
                STRUCTURE_KEY: structure_of(text, "markdown").to_dict(),
            },
        )
        for cid, text in corpora.items()
    ]


@dataclass(frozen=True)
class EvalConfig:
    """One retriever configuration to evaluate; validated at construction.

    Attributes:
        child_size: maximum child length in characters (default
            :data:`~parrot_parents.loaders.hierarchy.DEFAULT_CHILD_SIZE`).
        child_overlap: characters shared by neighbouring children (default 0).
        parent_size: ``parent_chunk`` length in characters. When given, the threshold
            defaults to it too, so every document longer than ``parent_size`` is cut into
            parent_chunks of that size (3 levels) and shorter ones stay whole (2 levels).
            None keeps the loader's defaults (4000, threshold 16000).
        parent_threshold: documents longer than this many characters get parent_chunks;
            overrides the default described under ``parent_size``.
        parent_overlap: characters shared by neighbouring parent_chunks (default 200).
        late_chunking: embed children with late chunking; None keeps the loader default.
        structure: parents follow the Markdown headings (and pipe tables) of a corpus
            (the loader's ``section_parents``); None keeps the loader default (on).
        preamble: embed and index each child of a structured corpus with its title and
            section path; None keeps the loader default (on).
        expand_to_parent, limit, filter, ...: the per-call retrieval options of every
            question, one field per field of
            :class:`~parrot_parents.retrieval.options.RetrievalOptions`; None (default)
            keeps the package default, as ``Chatbot()`` does.
        reranker: cross-encoder model name or directory; None for no reranking.
        model: embedding model name or directory; None for all-MiniLM-L6-v2.
        dsn: PostgreSQL DSN; None for ``$PARROT_PARENTS_DSN`` or the embedded server.
        store: backend spec, ``"postgres"`` (default, None) or ``"milvus:URI"``
            (:mod:`parrot_parents.stores.backends`).
        lexical_backend: what ranks BM25 in the PostgreSQL collection: ``auto``
            (default), ``pg_textsearch`` or ``sql``
            (:mod:`parrot_parents.stores.postgres.search.bm25_index`).
        collection: table name; None for a fresh ``eval_<random>`` name.
        keep: keep the collection after the run instead of dropping it.
        ks: passage cut-offs of the @k metrics.
        budgets: character budgets of recall@Bc.
        strategy: an ingestion strategy spec (:mod:`parrot_parents.strategies.spec`);
            None measures the configuration as given. A free strategy sets
            ``expand``/``mode`` (and, with ``:N``, parent_chunks of ``N x child_size``
            characters) where those are not set; a model-backed one writes indexed rows.
    """

    child_size: int = DEFAULT_CHILD_SIZE
    child_overlap: int = 0
    parent_size: int | None = None
    parent_threshold: int | None = None
    parent_overlap: int = DEFAULT_PARENT_OVERLAP
    late_chunking: bool | None = None
    structure: bool | None = None
    preamble: bool | None = None
    expand_to_parent: bool | None = None
    limit: int | None = None
    filter: dict[str, Any] | None = None
    rerank_candidates: int | None = None
    budget: int | None = None
    mode: str | None = None
    search_mode: str | None = None
    rrf_k: int | None = None
    dense_weight: float | None = None
    lexical_weight: float | None = None
    trim: bool | None = None
    prf: bool | None = None
    reranker: str | None = None
    model: str | None = None
    dsn: str | None = None
    store: str | None = None
    lexical_backend: str = "auto"
    collection: str | None = None
    keep: bool = False
    ks: tuple[int, ...] = DEFAULT_KS
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    strategy: str | None = None

    def __post_init__(self) -> None:
        _positive("child_size", self.child_size)
        self.spec  # noqa: B018 - the strategy is checked by its one parser
        for name in ("parent_size", "parent_threshold", "budget"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name))
        if not is_int(self.child_overlap) or not 0 <= self.child_overlap < self.child_size:
            raise ConfigurationError(
                f"child_overlap must be an int in [0, child_size={self.child_size}), "
                f"got {self.child_overlap!r}"
            )
        validate_parent_sizes(self.threshold_chars, self.parent_chars, self.parent_overlap)
        if not self.ks or not self.budgets:
            raise ConfigurationError("ks and budgets must each name at least one value")
        for k in (*self.ks, *self.budgets):
            _positive("ks/budgets value", k)
        self.options()  # the retrieval options are checked by their one definition
        from parrot_parents.stores.backends import parse_store_spec

        parse_store_spec(self.store)
        from parrot_parents.stores.postgres.search.bm25_index import validate_lexical_choice

        validate_lexical_choice(self.lexical_backend)

    @property
    def spec(self) -> StrategySpec:
        """The parsed ingestion strategy (``plain`` when none is given)."""
        return parse_strategy(self.strategy)

    @property
    def _size(self) -> int | None:
        """parent_size, else the one a strategy's group asks for."""
        if self.parent_size is not None:
            return self.parent_size
        return self.spec.parent_size(self.child_size)

    @property
    def parent_chars(self) -> int:
        """The parent_chunk size actually used, in characters."""
        return self._size if self._size is not None else DEFAULT_PARENT_SIZE

    @property
    def threshold_chars(self) -> int:
        """The 3-level threshold actually used, in characters."""
        if self.parent_threshold is not None:
            return self.parent_threshold
        return self._size if self._size is not None else DEFAULT_THRESHOLD

    def options(self) -> RetrievalOptions:
        """The per-call retrieval options of every question.

        Raises:
            ConfigurationError: an invalid option, or one the strategy sets otherwise.
        """
        given = {name: getattr(self, name) for name in RetrievalOptions.model_fields}
        if self.strategy is not None:
            for name, wanted in self.spec.retrieval_overrides().items():
                value = given[name]
                # A mode is compared parsed: "window:+2" is "window:2".
                if value is not None and (parse_mode(value) if name == "mode" else value) != wanted:
                    raise ConfigurationError(
                        f"strategy {self.strategy!r} sets {name} {wanted!r}, "
                        f"but {name} {value!r} is given",
                        hint=f"leave {name} unset with a strategy",
                    )
                given[name] = wanted
        return RetrievalOptions.from_overrides(given)


def _default(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def _positive(name: str, value: object) -> None:
    if not is_int(value) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")


@dataclass
class EvalResult:
    """Scores, timings and bookkeeping of one evaluation.

    Attributes:
        metrics: the scorer's output (``recall@5``, ``recall@2000c``, ``chars@5``, ...).
        per_corpus: the same metrics over each corpus's questions alone, ``{corpus_id:
            metrics}`` (:func:`~parrot_parents.eval.scorer.score_by_corpus`), from the
            same run: every question still searched every corpus.
        timings: ``ingest_seconds``, ``ingest_tokens``, ``ingest_tokens_per_second``,
            ``query_p50_ms``, ``query_p95_ms``, ``query_mean_ms``, ``queries``.
        ingest: ``corpora``, ``characters``, ``parents`` and ``children`` rows, the
            ``late_chunking`` actually used, and ``strategy``: the ingestion strategy's
            report (``expansion`` ratio, model ``calls``, ``enriched`` of ``of``...).
        diagnostics: ``fallbacks`` (questions whose ``meta`` reports a fallback) and
            ``text_mismatches`` (passages whose text is not the corpus text at their span).
        config: the configuration evaluated.
        run_path: the run file written.
        collection: the table used; ``kept`` tells whether it still exists.
        intervals: ``{metric: (low, high)}``, the 95 % percentile bootstrap interval of
            each mean of ``metrics`` over the questions (2000 resamples, fixed seed:
            :mod:`~parrot_parents.eval.intervals`), in the metric's unit.
    """

    metrics: dict[str, float | int]
    per_corpus: dict[str, dict[str, float | int]]
    timings: dict[str, float | int]
    ingest: dict[str, Any]
    diagnostics: dict[str, int]
    config: EvalConfig
    run_path: Path
    collection: str
    kept: bool
    intervals: dict[str, Interval] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        config = asdict(self.config)
        config["ks"], config["budgets"] = list(self.config.ks), list(self.config.budgets)
        return {
            "metrics": self.metrics,
            "intervals": {k: [low, high] for k, (low, high) in self.intervals.items()},
            "per_corpus": self.per_corpus,
            "timings": self.timings,
            "ingest": self.ingest,
            "diagnostics": self.diagnostics,
            "config": config,
            "run": str(self.run_path),
            "collection": self.collection,
            "kept": self.kept,
        }


def passage_span(passage: Any, corpora: Mapping[str, str]) -> RunPassage:
    """``(corpus_id, start, end)`` of a retrieved passage, checked against the corpora.

    Raises:
        ParrotParentsError: the passage has no document id or offsets, names an unknown
            corpus, or its offsets fall outside the corpus text.
    """
    cid, start, end = passage.document_id, passage.start_index, passage.end_index
    text = corpora.get(cid) if cid is not None else None
    if text is None or not isinstance(start, int) or not isinstance(end, int):
        raise ParrotParentsError(
            f"passage {passage.id!r} ({passage.kind}) has no usable span: "
            f"document_id={cid!r}, start_index={start!r}, end_index={end!r}",
            hint="every passage handed to the LLM must map to characters of a corpus file",
        )
    if not 0 <= start <= end <= len(text):
        raise ParrotParentsError(
            f"passage {passage.id!r} spans [{start}, {end}), outside {cid!r} "
            f"({len(text)} characters)"
        )
    return cid, start, end


def count_tokens(embedding: Any, texts: Sequence[str]) -> int:
    """Tokens of ``texts`` under the embedding model's tokenizer, special tokens excluded."""
    tokenizer = embedding.model.tokenizer
    return sum(
        len(tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"]) for t in texts
    )


async def run_eval(
    questions_path: str | Path,
    corpora_dir: str | Path,
    out_path: str | Path,
    config: EvalConfig | None = None,
    *,
    log: Log | None = None,
) -> EvalResult:
    """Evaluate ``config`` on a question set (see the module docstring).

    Args:
        questions_path: the questions CSV (:mod:`parrot_parents.eval.questions`).
        corpora_dir: directory of ``<corpus_id>.md`` files.
        out_path: the run file to write (JSONL, the shared scorer's format).
        config: the configuration; defaults of :class:`EvalConfig` when None.
        log: called with one-line progress messages.

    Raises:
        ConfigurationError: bad question set or corpora.
        StoreError: the database cannot be reached.
    """
    config = config or EvalConfig()
    say = log or (lambda _msg: None)
    questions = load_questions(questions_path)
    corpora = load_corpora(corpora_dir)
    check_references(questions, corpora)
    session = _Session(config)
    try:
        ingest, timings = await session.ingest(corpora)
        say(
            f"ingested {len(corpora)} corpora into {session.collection!r}: "
            f"{ingest['children']} children, {ingest['parents']} parents in "
            f"{timings['ingest_seconds']:.1f} s"
        )
        run, latencies, diagnostics = await _query_all(session, questions, corpora, config)
    finally:
        await session.close()
    write_run(out_path, run)
    say(f"wrote {len(run)} questions to {str(out_path)!r}")
    timings.update(
        queries=len(latencies),
        query_p50_ms=round(percentile(latencies, 50), 2),
        query_p95_ms=round(percentile(latencies, 95), 2),
        query_mean_ms=round(sum(latencies) / len(latencies), 2) if latencies else 0.0,
    )
    metrics = score_run(questions, run, config.ks, config.budgets)
    return EvalResult(
        metrics,
        score_by_corpus(questions, run, config.ks, config.budgets),
        timings,
        ingest,
        diagnostics,
        config,
        Path(out_path),
        session.collection,
        config.keep,
        percentile_intervals(score_per_question(questions, run, config.ks, config.budgets)),
    )


async def _query_all(
    session: Any, questions: Sequence[Question], corpora: Mapping[str, str], config: EvalConfig
) -> tuple[dict[int, list[RunPassage]], list[float], dict[str, int]]:
    options = config.options()
    run: dict[int, list[RunPassage]] = {}
    latencies: list[float] = []
    diagnostics = {"fallbacks": 0, "text_mismatches": 0}
    if questions:
        await session.bot.retrieve(questions[0].question, options)  # warm-up, untimed
    for q in questions:
        started = time.perf_counter()
        retrieval = await session.bot.retrieve(q.question, options)
        latencies.append((time.perf_counter() - started) * 1000.0)
        spans = []
        for passage in retrieval.passages:
            cid, start, end = passage_span(passage, corpora)
            if passage.text != corpora[cid][start:end]:
                diagnostics["text_mismatches"] += 1
            spans.append((cid, start, end))
        run[q.qid] = spans
        if retrieval.meta.fallbacks:
            diagnostics["fallbacks"] += 1
    return run, latencies, diagnostics


def percentile(values: Sequence[float], pct: float) -> float:
    """``numpy.percentile`` of ``values`` (linear between ranks); 0.0 for no values."""
    return float(np.percentile(values, pct)) if values else 0.0


def fresh_collection_name() -> str:
    """A new table name: ``eval_`` and 16 random hex digits."""
    return f"eval_{uuid.uuid4().hex[:16]}"


class _Session:
    """The store, loader and bot of one evaluation, on a fresh collection."""

    def __init__(self, config: EvalConfig) -> None:
        from parrot_parents.bots.chatbot import Chatbot
        from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
        from parrot_parents.loaders.text import TextLoader
        from parrot_parents.stores.backends import open_store, parent_searcher_for

        self.config = config
        self.collection = config.collection or fresh_collection_name()
        self.embedding = SentenceTransformerEmbeddings(config.model)
        self.store: Any = open_store(
            config.store,
            dsn=config.dsn,
            collection=self.collection,
            embedding=self.embedding,
            lexical_backend=config.lexical_backend,
        )
        late = _default(config.late_chunking, DEFAULT_LATE_CHUNKING)
        # No strategy given: the package default for this store (ingestion only; the
        # retrieval options stay as configured).
        self.spec = strategy_for(config.strategy, self.store)
        self.indexer = indexer_for(self.spec)
        self.loader = TextLoader(
            child_chunk_size=config.child_size,
            child_chunk_overlap=config.child_overlap,
            embedding=self.embedding,
            indexer=self.indexer,
            late_chunking=late,
            section_parents=_default(config.structure, DEFAULT_SECTION_PARENTS),
            preamble=_default(config.preamble, DEFAULT_PREAMBLE),
        )
        self.reranker: Any = None
        if config.reranker is not None:
            from parrot_parents.rerankers import CrossEncoderReranker

            self.reranker = CrossEncoderReranker(config.reranker)
        self.bot = Chatbot(
            store=self.store,
            parent_searcher=parent_searcher_for(self.store),
            reranker=self.reranker,
        )
        self._owned = False

    async def ingest(self, corpora: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Write every corpus into the collection; returns ``(ingest, timings)``."""
        config = self.config
        # Load the models before the clock starts: loading is not ingest throughput.
        await asyncio.to_thread(self.loader.processor.warm_up)
        if self.reranker is not None:
            await asyncio.to_thread(self.reranker.warm_up)
        await self.store.connect()
        if config.collection is not None and await self.store.count() > 0:
            raise ConfigurationError(
                f"collection {self.collection!r} already holds rows; an evaluation needs a "
                "fresh one",
                hint="leave out --collection to get a new table",
            )
        self._owned = True
        tokens = await asyncio.to_thread(count_tokens, self.embedding, list(corpora.values()))
        documents = corpus_documents(corpora)
        started = time.perf_counter()
        rows = await self.loader.chunk_documents(
            documents,
            vector_store=self.store,
            parent_chunk_threshold_tokens=config.threshold_chars,
            parent_chunk_size_tokens=config.parent_chars,
            parent_chunk_overlap_tokens=config.parent_overlap,
        )
        seconds = time.perf_counter() - started
        children = sum(1 for r in rows if r.metadata.get("is_chunk"))
        ingest = {
            "corpora": len(corpora),
            "characters": sum(len(t) for t in corpora.values()),
            "parents": len(rows) - children,
            "children": children,
            "late_chunking": bool(self.loader.processor.late_chunking),
            "strategy": self.loader.report.strategy
            or free_report(self.spec, children, len(rows) - children),
        }
        timings = {
            "ingest_seconds": round(seconds, 3),
            "ingest_tokens": tokens,
            "ingest_tokens_per_second": round(tokens / seconds, 1) if seconds > 0 else 0.0,
        }
        return ingest, timings

    async def close(self) -> None:
        """Drop the collection (unless kept), then release the store and the reranker."""
        try:
            if self._owned and not self.config.keep:
                await self.store.drop()
        finally:
            await self.bot.close()
            if self.reranker is not None:
                self.reranker.close()
            if self.indexer is not None:
                await self.indexer.close()

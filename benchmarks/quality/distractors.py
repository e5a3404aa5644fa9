# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The dev questions among 100,000 children of distractors: exact BM25, the default rule, peers.

Builds one collection of the three dev corpora (``../shared/benchmarks/chunking_eval``) and
enough pages of Debian's documentation packages (:mod:`benchmarks.quality._debian_docs`)
for ``--children`` children in all, written with the product's default ingestion
(``TextLoader()``: 400-character late-chunked children, section parents, the default
strategy; the dev corpora read as Markdown, as ``parrot-parents eval`` reads them), ranked
lexically by BM25 in SQL (``lexical_backend="sql"``, the backend whose candidate rule is
measured). The collection is kept, and a run finds it built: ``TextLoader.ingest`` skips
every document stored unchanged, so an interrupted build resumes where it stopped. A second
collection holds the dev corpora alone, the reference.

Then it asks the 276 dev questions with the defaults (``Chatbot.retrieve(question,
budget=B)``, hybrid, B = 1000/2000/4000 characters) on each collection twice: with the
store's lexical candidate rule exact (``EXACT_CANDIDATES``: every query lexeme generates
candidates) and with its default rule (``CANDIDATES``). Scored by ``recall@Bc``
(``parrot_parents.eval.scorer``, the shared scorer's metric); a passage of a distractor
page covers no reference and spends its characters. Beside it, the lexical branch alone
(``similarity_search(q, 10, search_mode="lexical")``) under the default rule against the
exact one: the mean share of the exact top 10 it returns, and each rule's p50/p95 ms.
A third run keeps the default rule but walks the collection's HNSW graph at
``ef_search`` whatever its size (``ef_search_ceiling=None``): what the walk that widens
with the graph adds, with its paired 95 % interval.

Two peers are asked the same questions on the same documents (the dev corpora and the
same pages), cut into plain 300-character chunks
(:mod:`benchmarks.quality._distractor_peers`): BM25 + dense fused by RRF
(``benchmarks.common.bm25_dense_rrf``), and LangChain's ``PGVectorStore`` hybrid
(langchain-postgres: tsvector full text and dense, its reciprocal rank fusion) in tables
of its own (``bench_peer_lc_hybrid_dev`` and ``bench_peer_lc_hybrid_<children>``, kept),
each on the dev corpora alone and among the distractors; the scorer cuts their ranked
passages at each budget. The chunk vectors are computed once and kept under ``--cache``.
For every retriever, ours included, the report gives the loss from dev alone to
distractors in points, with a paired 95 % bootstrap interval over the questions
(``parrot_parents.eval.intervals.paired_differences``): how much of our loss among
distractors any retriever of the same documents suffers too.

Writes ``benchmarks/reports/distractors.md``::

    python -m benchmarks run distractors [--children 100000] [--cache DIR]
        [--data-dir DIR | --dsn DSN] [--build-only] [--no-peers] [--questions N]

The first run downloads ~65 MB of packages (``apt-get download`` needs no root, only the
machine's Debian package lists) and embeds ~27 million characters (one to two hours on 2
shared CPU cores), and the peers' ~124k chunk vectors about an hour more; later runs only
query (~15 min). ``--cache`` (default ``~/.cache/parrot-parents-bench/distractors``) keeps
the packages, their unpacked files and the peers' chunk vectors; ``--data-dir`` sets
``PARROT_PARENTS_DATA_DIR`` (the embedded server's data directory, where the collections
stay); ``--dsn`` uses another server instead. ``--no-peers`` asks only the defaults;
``--questions N`` asks the first N questions, for smoke runs only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from benchmarks.common import CHUNKING_EVAL, REPORTS, command, commit_of, machine
from benchmarks.quality._debian_docs import PACKAGES, fetch, html_files
from benchmarks.quality._distractor_peers import CHUNK_SIZE, DEPTH, PEERS, TOP, ask_peers

BUDGETS = (1000, 2000, 4000)
DEFAULT_CACHE = Path.home() / ".cache" / "parrot-parents-bench" / "distractors"
#: LangChain's tables (the peer's own), ``_dev`` and ``_<children>``.
PEER_TABLE = "bench_peer_lc_hybrid"


def dev_documents(corpora: dict[str, str]) -> list[Document]:
    """The dev corpora as ``parrot-parents eval`` ingests them: Markdown, id = corpus id."""
    from parrot_parents.eval.runner import corpus_documents

    return corpus_documents(corpora)


async def children_of(docs: Sequence[Document]) -> dict[str, int]:
    """Children per document id under the default ingestion, split without the model."""
    from parrot_parents.loaders import TextLoader

    rows = await TextLoader().chunk_documents(docs)
    counts = {str(d.metadata["document_id"]): 0 for d in docs}
    for row in rows:
        if row.metadata.get("is_chunk"):
            counts[str(row.metadata["document_id"])] += 1
    return counts


async def corpus(
    cache: Path, corpora: dict[str, str], target: int
) -> tuple[list[Document], dict[str, Any]]:
    """The dev corpora and the first distractor pages that bring the children to ``target``.

    Returns the documents and a summary (package versions, documents, children and
    characters per package). Raises ``SystemExit`` when all packages hold too few.
    """
    from parrot_parents.loaders import TextLoader

    versions = fetch(cache)
    dev = dev_documents(corpora)
    loader = TextLoader(html_files(cache), root=cache / "pkgs")
    pages = loader.load()
    counts = await children_of(dev + pages)
    total = sum(counts[c] for c in corpora)
    chosen: list[Document] = []
    for page in pages:
        if total >= target:
            break
        chosen.append(page)
        total += counts[str(page.metadata["document_id"])]
    if total < target:
        raise SystemExit(f"the packages give {total:,} children, fewer than {target:,}")
    # Two keys for the filter benchmark's real-text cases (benchmarks/latency/filters.py):
    # the package a page comes from, and its place in this order (a range over it keeps
    # neighbouring pages, as a date range keeps a period). Neither is part of the text
    # that the default strategy indexes.
    for position, doc in enumerate(dev + chosen):
        doc_id = str(doc.metadata["document_id"])
        doc.metadata["package"] = doc_id.split("/", 1)[0] if "/" in doc_id else "chunking_eval"
        doc.metadata["position"] = position
    per: dict[str, dict[str, int]] = {}
    for page in chosen:
        package = str(page.metadata["document_id"]).split("/", 1)[0]
        row = per.setdefault(package, {"documents": 0, "children": 0, "characters": 0})
        row["documents"] += 1
        row["children"] += counts[str(page.metadata["document_id"])]
        row["characters"] += len(page.page_content)
    summary = {
        "versions": {p: versions[p] for p in per},
        "packages": per,
        "dev": {
            "documents": len(dev),
            "children": sum(counts[c] for c in corpora),
            "characters": sum(len(t) for t in corpora.values()),
        },
        "children": total,
        "unread": dict(loader.report.failed),
    }
    return dev + chosen, summary


async def build(store: Any, docs: list[Document], log: Path) -> dict[str, Any]:
    """Ingest ``docs`` into ``store`` with the default ``TextLoader`` (unchanged ones skipped)."""
    from parrot_parents.loaders import TextLoader

    started = time.perf_counter()
    done = [0]

    def progress(stored: int) -> None:
        done[0] += stored
        with log.open("a", encoding="utf-8") as f:
            f.write(
                f"{time.strftime('%H:%M:%S')} {done[0]}/{len(docs)} documents, {time.perf_counter() - started:.0f} s\n"
            )

    loader = TextLoader()
    report = await loader.ingest(store, documents=docs, progress=progress)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "written": report.documents,
        "unchanged": len(report.unchanged),
        "failed": dict(report.failed),
        "children_written": report.children,
    }


def _span(passage: Any) -> tuple[str, int, int]:
    start = passage.start_index or 0
    end = passage.end_index if passage.end_index is not None else start + len(passage.text)
    return str(passage.document_id), start, end


def _ms(values: list[float]) -> str:
    q = statistics.quantiles(values, n=20, method="inclusive")
    return f"{statistics.median(values):.1f} / {q[18]:.1f}"


async def ask(store: Any, questions: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Recall of the defaults and the lexical top 10 under each candidate rule, and of the
    defaults with the collection's graph walked at ``ef_search`` whatever its size.

    Returns ``{rule: {"recall@Bc": float, ..., "retrieve ms": "p50 / p95" (at 2000c),
    "lexical ms": "p50 / p95", "top10": {qid: ids}, "walk": ef_search}}`` for the rules
    ``exact`` and ``default``, and ``narrow`` (the default rule, ``ef_search_ceiling=None``).
    """
    from dataclasses import replace

    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.eval.scorer import mean_of, score_per_question
    from parrot_parents.stores.backends import parent_searcher_for
    from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, EXACT_CANDIDATES
    from parrot_parents.stores.postgres.search.settings import GraphSize

    bot = Chatbot(store=store, parent_searcher=parent_searcher_for(store))
    await store.connect()
    graph = await store.read_pool.run(lambda conn: GraphSize().children(conn, store.name))
    defaults = store.search_options
    narrow = replace(defaults, ef_search_ceiling=None)
    out: dict[str, dict[str, Any]] = {}
    for rule, candidates, options in (
        ("exact", EXACT_CANDIDATES, defaults),
        ("default", CANDIDATES, defaults),
        ("narrow", CANDIDATES, narrow),
    ):
        store.lexical_candidates = candidates
        store.search_options = options
        row: dict[str, Any] = {"walk": options.ef_at(graph)}
        started_rule = time.perf_counter()
        await bot.retrieve(questions[0].question, budget=BUDGETS[0])  # warm-up, untimed
        for budget in BUDGETS:
            run, ms = {}, []
            for q in questions:
                started = time.perf_counter()
                got = await bot.retrieve(q.question, budget=budget)
                ms.append((time.perf_counter() - started) * 1000)
                run[q.qid] = [_span(p) for p in got.passages]
            key = f"recall@{budget}c"
            per_question = score_per_question(questions, run, ks=(), budgets=(budget,))[key]
            row[key] = mean_of(per_question)
            row.setdefault("per question", {})[key] = per_question
            if budget == 2000:
                row["retrieve ms"] = _ms(ms)
        top10, ms = {}, []
        for q in questions:
            started = time.perf_counter()
            hits = await store.similarity_search(q.question, 10, search_mode="lexical")
            ms.append((time.perf_counter() - started) * 1000)
            top10[q.qid] = [h.id for h in hits]
        row["lexical ms"], row["top10"] = _ms(ms), top10
        row["seconds"] = round(time.perf_counter() - started_rule, 1)
        out[rule] = row
        shown = {k: v for k, v in row.items() if k not in ("top10", "per question")}
        print(rule, shown, flush=True)
    store.search_options, store.lexical_candidates = defaults, CANDIDATES
    return out


def overlap(exact: dict[int, list[str]], other: dict[int, list[str]]) -> float:
    """Mean share of each question's exact lexical top 10 that ``other`` returns too
    (``|A ∩ B| / |A|``; a question with no lexical hit at all counts 1 when ``other`` has
    none either)."""
    shares = [
        len(set(a) & set(other[q])) / len(a) if a else float(not other[q]) for q, a in exact.items()
    ]
    return sum(shares) / len(shares)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--children", type=int, default=100_000, help="children in all (default 100000)"
    )
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="packages and their files")
    ap.add_argument(
        "--data-dir", type=Path, default=None, help="the embedded server's data directory"
    )
    ap.add_argument("--dsn", default=None, help="a PostgreSQL DSN instead of the embedded server")
    ap.add_argument("--build-only", action="store_true", help="build the collections, ask nothing")
    ap.add_argument(
        "--peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask the peers too (default; --no-peers skips them)",
    )
    ap.add_argument(
        "--questions",
        type=int,
        default=None,
        metavar="N",
        help="for smoke runs only: the first N questions",
    )
    ap.add_argument("--out", type=Path, default=REPORTS / "distractors.md")
    args = ap.parse_args(argv)
    if args.questions is not None and args.questions < 2:
        ap.error(f"--questions must be >= 2, got {args.questions}")
    if args.data_dir is not None:
        os.environ["PARROT_PARENTS_DATA_DIR"] = str(args.data_dir.resolve())
    return asyncio.run(_main(args, argv))


async def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.eval.questions import check_references, load_corpora, load_questions
    from parrot_parents.stores.postgres import PgVectorStore

    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    check_references(questions, corpora)
    questions = questions[: args.questions]
    args.cache.mkdir(parents=True, exist_ok=True)
    docs, summary = await corpus(args.cache, corpora, args.children)
    print(f"corpus: {len(docs):,} documents, {summary['children']:,} children", flush=True)
    embedding = SentenceTransformerEmbeddings()
    # BM25 in SQL, the backend whose candidate rule is measured (pg_textsearch's index
    # ranks without one).
    stores = {
        name: PgVectorStore(args.dsn, table, embedding=embedding, lexical_backend="sql")
        for name, table in (
            ("dev", "bench_distractors_dev"),
            ("distractors", f"bench_distractors_{args.children}"),
        )
    }
    builds: dict[str, Any] = {}
    try:
        for name, store in stores.items():
            record = args.cache / f"build-{store.table}.json"
            part = docs[: len(corpora)] if name == "dev" else docs
            done = await build(store, part, args.cache / f"build-{store.table}.log")
            if done["written"] or not record.exists():
                done["at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                record.write_text(json.dumps(done, indent=1), encoding="utf-8")
            builds[name] = json.loads(record.read_text(encoding="utf-8"))
            builds[name]["stored_children"] = await store.count(include_parents=False)
            print(f"{name}: {builds[name]}", flush=True)
        if args.build_only:
            return 0
        # The large collection first: its rows are the ones the benchmark is for.
        results = {name: await ask(stores[name], questions) for name in ("distractors", "dev")}
    finally:
        for store in stores.values():
            await store.close()
    peers = None
    if args.peers:
        from parrot_parents.embedded.server import resolve_dsn

        tables = {
            "dev": f"{PEER_TABLE}_dev",
            "distractors": f"{PEER_TABLE}_{args.children}",
        }
        peers = await ask_peers(
            resolve_dsn(args.dsn),
            args.cache,
            tables,
            questions,
            corpora,
            docs[len(corpora) :],
            BUDGETS,
            log=lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True),
        )
    text = report(args, argv, summary, builds, results, len(questions), peers)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def report(
    args: argparse.Namespace,
    argv: list[str] | None,
    summary: dict[str, Any],
    builds: dict[str, Any],
    results: dict[str, dict[str, dict[str, Any]]],
    questions: int,
    peers: dict[str, Any] | None = None,
) -> str:
    """The Markdown report (see the module docstring)."""
    shown = [a for a in (argv or []) if a not in ("--build-only",)]
    for option in ("--cache", "--data-dir", "--dsn", "--out"):
        # Local paths and credentials stay out of the report.
        while option in shown:
            i = shown.index(option)
            del shown[i : i + 2]
    dev, per = summary["dev"], summary["packages"]
    lines = [
        "# The dev set among distractors: exact BM25 against the default candidate rule, the widening walk, and two peers",
        "",
        f"Generated by `{command(__name__, shown)}` (see its docstring) on {commit_of()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. {machine()}; other work "
        'shared the cores. all-MiniLM-L6-v2 on CPU; BM25 in SQL (`lexical_backend="sql"`).',
        "",
        f"## Corpus: {summary['children']:,} children",
        "",
        "The three dev corpora and the first pages (by package, then path) of these Debian "
        "packages' HTML manuals, read by the product's HTML reader; ingested with "
        "`TextLoader()` as a user who sets nothing gets it.",
        "",
        "| source | version | documents | children | characters |",
        "|---|---|---:|---:|---:|",
        f"| dev corpora (`chunking_eval`) | | {dev['documents']} | {dev['children']:,} | {dev['characters']:,} |",
    ]
    for package, _ in PACKAGES:
        if package in per:
            row = per[package]
            lines.append(
                f"| `{package}` | {summary['versions'][package]} | {row['documents']:,} | "
                f"{row['children']:,} | {row['characters']:,} |"
            )
    docs = dev["documents"] + sum(r["documents"] for r in per.values())
    chars = dev["characters"] + sum(r["characters"] for r in per.values())
    lines.append(f"| **all** | | {docs:,} | {summary['children']:,} | {chars:,} |")
    big = builds["distractors"]
    lines += [
        "",
        f"Ingest: {big['seconds'] / 60:.0f} min for {big['written']:,} documents "
        f"({big['at']}); the collection holds {big['stored_children']:,} children.",
        "",
        f"## The defaults (hybrid, `budget=B`), {questions} dev questions",
        "",
        "Lexical top-10 overlap: the mean share of the exact rule's lexical top 10 "
        '(`search_mode="lexical"`) that the rule returns. Latencies in ms, p50 / p95: '
        "`Chatbot.retrieve` at 2000 characters (query embedding included) and the lexical "
        "search alone.",
        "",
        "| collection | lexical candidates | recall@1000c | recall@2000c | recall@4000c | top-10 overlap with exact | retrieve ms @2000c | lexical ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "dev": "dev corpora alone",
        "distractors": f"with distractors ({summary['children']:,} children)",
    }
    rules = {
        "exact": "exact (`EXACT_CANDIDATES`)",
        "default": "default (`CANDIDATES`)",
        "narrow": "default, the walk not widened (`ef_search_ceiling=None`)",
    }
    for name in names:
        by_rule = results[name]
        exact = by_rule["exact"]["top10"]
        for rule, row in by_rule.items():
            cells = [f"{row[f'recall@{b}c']:.3f}" for b in BUDGETS]
            cells += [f"{overlap(exact, row['top10']):.3f}", row["retrieve ms"], row["lexical ms"]]
            lines.append(f"| {names[name]} | {rules[rule]} | " + " | ".join(cells) + " |")
        diff = [
            by_rule["default"][f"recall@{b}c"] - by_rule["exact"][f"recall@{b}c"] for b in BUDGETS
        ]
        lines.append(
            f"| {names[name]} | default − exact | "
            + " | ".join(f"{d:+.3f}" for d in diff)
            + " | | | |"
        )
    lines += widening(results, names)
    lines += losses(results, peers, names, questions)
    return "\n".join(lines) + "\n"


def widening(results: dict[str, dict[str, dict[str, Any]]], names: dict[str, str]) -> list[str]:
    """What the walk that widens with the graph adds: the defaults minus the defaults with
    ``ef_search_ceiling=None``, in points, with the paired 95 % bootstrap interval."""
    from parrot_parents.eval.intervals import paired_differences

    lines = [
        "",
        "## The walk that widens with the graph",
        "",
        "The defaults walk a graph of more than 10,000 vectors wider than `ef_search` "
        "(`HNSWQueryOptions.ef_at`, up to `ef_search_ceiling`); beside them, the same "
        "defaults with the walk kept at `ef_search` (`ef_search_ceiling=None`). Defaults "
        "minus narrow walk, in points, with the paired 95 % bootstrap interval over the "
        "questions.",
        "",
        "| collection | walk (`ef_search`): defaults / narrow | gain @1000c | gain @2000c | gain @4000c |",
        "|---|---|---:|---:|---:|",
    ]
    keys = [f"recall@{b}c" for b in BUDGETS]
    for name in names:
        wide, narrow = results[name]["default"], results[name]["narrow"]
        diff = paired_differences(
            {k: narrow["per question"][k] for k in keys}, {k: wide["per question"][k] for k in keys}
        )
        cells = [
            f"{diff[k].diff * 100:+.1f} [{diff[k].low * 100:+.1f}, {diff[k].high * 100:+.1f}]"
            for k in keys
        ]
        lines.append(
            f"| {names[name]} | {wide['walk']} / {narrow['walk']} | " + " | ".join(cells) + " |"
        )
    return lines


def _loss(dev: dict[str, list[float]], distractors: dict[str, list[float]]) -> list[str]:
    """``"loss (points) [low, high]"`` per budget: dev alone minus with distractors, in
    percentage points, with the paired 95 % bootstrap interval over questions."""
    from parrot_parents.eval.intervals import paired_differences

    keys = [f"recall@{b}c" for b in BUDGETS]
    diff = paired_differences({k: dev[k] for k in keys}, {k: distractors[k] for k in keys})

    # diff is distractors - dev: the loss is its opposite, and so is its interval
    # (0.0 - x: no "-0.0" for a loss of nothing).
    def points(x: float) -> str:
        return f"{0.0 - x * 100:+.1f}"

    return [f"{points(diff[k].diff)} [{points(diff[k].high)}, {points(diff[k].low)}]" for k in keys]


def losses(
    results: dict[str, dict[str, dict[str, Any]]],
    peers: dict[str, Any] | None,
    names: dict[str, str],
    questions: int,
) -> list[str]:
    """The peers' recall on both collections and every retriever's loss (see the module
    docstring); the peers' rows only when they ran."""
    from parrot_parents.eval.scorer import mean_of

    lines: list[str] = []
    if peers is not None:
        chunks = peers["chunks"]
        lines += [
            "",
            "## Peers on the same documents",
            "",
            f"The same documents cut into plain {CHUNK_SIZE}-character chunks "
            f"({chunks['dev']:,} of the dev corpora, {chunks['distractors']:,} in all; "
            "LangChain's `RecursiveCharacterTextSplitter`, no overlap), all-MiniLM-L6-v2 "
            "(the vectors computed once and shared), each peer's ranked passages cut by the "
            "scorer at each budget, as the budget curve cuts its peers' runs. Both fuse "
            f"their branches' top {DEPTH} by reciprocal rank fusion (k=60) and hand over "
            f"the top {TOP}; both rank dense exactly (no vector index). BM25 + dense is "
            "`benchmarks.common.bm25_dense_rrf` (`bm25s`, numpy cosine); LangChain's "
            "`PGVectorStore` (langchain-postgres, v2) hybrid ranks full text by "
            "`ts_rank_cd` over `plainto_tsquery` on its GIN-indexed tsvector column, in "
            "its own table of the same PostgreSQL.",
            "",
            "| retriever | collection | recall@1000c | recall@2000c | recall@4000c | wall s |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for key, label in PEERS.items():
            for name in names:
                got = peers["peers"][key][name]
                cells = [f"{mean_of(got['per question'][f'recall@{b}c']):.3f}" for b in BUDGETS]
                lines.append(
                    f"| {label} | {names[name]} | "
                    + " | ".join(cells)
                    + f" | {got['seconds']:.0f} |"
                )
        lc = peers["peers"]["langchain-hybrid"]
        lines += [
            "",
            f"Chunk vectors: {peers['vectors s']:.0f} s (a few when read from the cache). "
            "LangChain's full-text branch matched no chunk for "
            + " and ".join(
                f"{lc[n]['no full-text match']} of {questions} questions ({names[n]})"
                for n in names
            )
            + ": `plainto_tsquery` ANDs every word of the question, and where nothing "
            "matches the hybrid ranks by its dense branch alone.",
        ]
    lines += [
        "",
        "## Loss among distractors",
        "",
        "Recall with the dev corpora alone minus recall with the distractors, in "
        "percentage points (positive: lost), and its paired 95 % bootstrap interval over "
        "the questions (`parrot_parents.eval.intervals.paired_differences`, 2000 "
        "resamples).",
        "",
        "| retriever | loss @1000c | loss @2000c | loss @4000c |",
        "|---|---:|---:|---:|",
    ]
    for rule, label in (
        ("default", "ours, defaults (`CANDIDATES`)"),
        ("exact", "ours, defaults with `EXACT_CANDIDATES`"),
        ("narrow", "ours, defaults with the walk not widened (`ef_search_ceiling=None`)"),
    ):
        cells = _loss(
            results["dev"][rule]["per question"], results["distractors"][rule]["per question"]
        )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if peers is not None:
        for key, label in PEERS.items():
            got = peers["peers"][key]
            cells = _loss(got["dev"]["per question"], got["distractors"]["per question"])
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    ours = "; ".join(
        f"{names[name]}: " + ", ".join(f"{rule} {row['seconds']:.0f} s" for rule, row in by.items())
        for name, by in results.items()
    )
    lines += [
        "",
        f"Wall time of asking the defaults (three budgets and the lexical top 10): {ours}.",
    ]
    return lines

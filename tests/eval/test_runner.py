"""End-to-end tests of parrot_parents.eval.runner and ``parrot-parents eval``.

A tiny corpus and question set are written inside each test; ingest and retrieval use the
real database and the real embedding model.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from parrot_parents.cli.main import main
from parrot_parents.errors import ConfigurationError
from parrot_parents.eval.questions import load_corpora, load_questions
from parrot_parents.eval.runner import EvalConfig, run_eval
from parrot_parents.eval.scorer import load_run, score_run
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

# Multi-byte characters early in each file make byte offsets differ from character ones.
ALPHA = [
    "Café naïve résumé — the Zürich office handbook, édition 2024.",
    "Parrots in the sanctuary eat sunflower seeds, walnuts and fresh mango every morning.",
    "The sanctuary's oldest macaw, Captain Blue, turned sixty-two last spring.",
    "Volunteers clean the aviaries on Tuesdays and Fridays before nine o'clock.",
    "Veterinary checks for all birds happen twice a year, in March and in September.",
    "The gift shop sells feather-free souvenirs made by local artisans from recycled glass.",
    "Visitors must not feed the birds chocolate or avocado, which are toxic to parrots.",
    "The sanctuary was founded in 1987 by the ornithologist Margarethe Vogelsang.",
]
BETA = [
    "Ångström units and the naïve café: notes from the PostgreSQL reading group.",
    "PostgreSQL stores vectors with the pgvector extension and indexes them with HNSW.",
    "An HNSW index is built with the parameters m and ef_construction.",
    "The reading group meets on the first Thursday of each month in room 4B.",
    "Autovacuum reclaims storage occupied by dead tuples after updates and deletes.",
    "Logical replication publishes table changes to subscribers over a replication slot.",
    "The group's treasurer, Ingrid Holm, collects a membership fee of twelve euros.",
    "Write-ahead logging guarantees that committed transactions survive a crash.",
]
QUESTIONS = [
    ("What do the parrots eat in the morning?", "alpha", 1),
    ("How old is the oldest macaw?", "alpha", 2),
    ("Which foods are toxic to parrots?", "alpha", 6),
    ("Who founded the sanctuary and when?", "alpha", 7),
    ("How is an HNSW index configured?", "beta", 2),
    ("When does the reading group meet?", "beta", 3),
    ("How much is the membership fee of the reading group?", "beta", 6),
    ("What makes committed transactions survive a crash?", "beta", 7),
]


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path]:
    """``(questions.csv, corpora/)``: two corpora of eight paragraphs, eight questions."""
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    texts = {"alpha": "\n\n".join(ALPHA) + "\n", "beta": "\n\n".join(BETA) + "\n"}
    paragraphs = {"alpha": ALPHA, "beta": BETA}
    for cid, body in texts.items():
        (corpora / f"{cid}.md").write_text(body, encoding="utf-8")
    (corpora / "notes.json").write_text("{}")  # not a corpus file: ignored
    path = tmp_path / "questions.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "references", "corpus_id"])
        for question, cid, index in QUESTIONS:
            content = paragraphs[cid][index]
            start = texts[cid].index(content)
            refs = [{"content": content, "start_index": start, "end_index": start + len(content)}]
            writer.writerow([question, json.dumps(refs), cid])
    return path, corpora


async def _table_exists(dsn: str, table: str) -> bool:
    engine = create_async_engine(to_async_dsn(dsn))
    try:
        async with engine.connect() as conn:
            found = await conn.execute(text("SELECT to_regclass(:t)"), {"t": f"public.{table}"})
            return found.scalar_one() is not None
    finally:
        await engine.dispose()


def _assert_valid_corpus_spans(run_path: Path, corpora: dict[str, str], n: int) -> None:
    lines = [json.loads(line) for line in run_path.read_text().splitlines()]
    assert [line["qid"] for line in lines] == list(range(n))
    for line in lines:
        assert line["passages"], line
        for p in line["passages"]:
            assert p["corpus_id"] in corpora
            assert 0 <= p["start"] < p["end"] <= len(corpora[p["corpus_id"]])


async def test_children_only_run_gives_valid_corpus_spans_and_finds_the_answers(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    questions, corpora_dir = dataset
    out = tmp_path / "run.jsonl"
    config = EvalConfig(
        child_size=120, expand_to_parent=False, late_chunking=False, limit=5, dsn=pg_dsn
    )
    result = await run_eval(questions, corpora_dir, out, config)

    corpora = load_corpora(corpora_dir)
    _assert_valid_corpus_spans(out, corpora, len(QUESTIONS))
    for line in out.read_text().splitlines():
        passages = json.loads(line)["passages"]
        assert len(passages) == 5
        assert all(p["end"] - p["start"] <= 120 for p in passages)  # children only
    m = result.metrics
    assert m["recall@5"] >= 0.75, m
    assert m["recall@1"] >= 0.5, m
    assert m["chars@5"] <= 5 * 120
    assert result.diagnostics == {"fallbacks": 0, "text_mismatches": 0}
    # The file on disk scores the same as the result.
    qs = load_questions(questions)
    assert score_run(qs, load_run(out, len(qs))) == pytest.approx(m)
    assert result.ingest["children"] > 0 and result.ingest["late_chunking"] is False
    t = result.timings
    assert t["ingest_tokens"] > 0 and t["ingest_seconds"] > 0
    assert 0 < t["query_p50_ms"] <= t["query_p95_ms"]
    assert t["queries"] == len(QUESTIONS)
    assert not await _table_exists(pg_dsn, result.collection)


@pytest.mark.parametrize("late", [False, True])
async def test_expansion_run_hands_over_parent_chunks_of_at_most_the_parent_size(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path, late: bool
) -> None:
    questions, corpora_dir = dataset
    out = tmp_path / "run.jsonl"
    # --parent-size 300 also sets the threshold: both ~650-character corpora get 3 levels.
    config = EvalConfig(
        child_size=120,
        parent_size=300,
        parent_overlap=0,
        expand_to_parent=True,
        late_chunking=late,
        limit=5,
        dsn=pg_dsn,
    )
    result = await run_eval(questions, corpora_dir, out, config)

    corpora = load_corpora(corpora_dir)
    _assert_valid_corpus_spans(out, corpora, len(QUESTIONS))
    for line in out.read_text().splitlines():
        spans = [(p["corpus_id"], p["start"], p["end"]) for p in json.loads(line)["passages"]]
        assert len(spans) == len(set(spans))  # each parent once
        assert all(end - start <= 300 for _, start, end in spans)
    lengths = [
        p["end"] - p["start"]
        for line in out.read_text().splitlines()
        for p in json.loads(line)["passages"]
    ]
    assert max(lengths) > 120  # parents, not children
    assert result.ingest["late_chunking"] is late
    assert result.ingest["parents"] >= 4
    assert result.metrics["recall@5"] >= 0.75, result.metrics
    assert result.diagnostics["text_mismatches"] == 0


@pytest.mark.parametrize("mode", [None, "parent", "window:1"])
async def test_budget_and_mode_are_forwarded_to_retrieve(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path, mode: str | None
) -> None:
    questions, corpora_dir = dataset
    out = tmp_path / "run.jsonl"
    config = EvalConfig(
        child_size=120,
        parent_size=300,
        parent_overlap=0,
        budget=250,
        mode=mode,
        limit=5,
        dsn=pg_dsn,
    )
    result = await run_eval(questions, corpora_dir, out, config)
    _assert_valid_corpus_spans(out, load_corpora(corpora_dir), len(QUESTIONS))
    for line in out.read_text().splitlines():
        passages = json.loads(line)["passages"]
        assert sum(p["end"] - p["start"] for p in passages) <= 250
    assert result.diagnostics["text_mismatches"] == 0
    assert result.metrics["recall@1000c"] >= 0.5, result.metrics  # answers fit in 250


async def test_reranker_option_reranks_the_children_without_fallback(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    from parrot_parents.rerankers.testing import build_tiny_cross_encoder

    questions, corpora_dir = dataset
    model = build_tiny_cross_encoder(tmp_path / "tiny-ce")
    out = tmp_path / "run.jsonl"
    config = EvalConfig(
        child_size=120, expand_to_parent=False, limit=3, reranker=str(model), dsn=pg_dsn
    )
    result = await run_eval(questions, corpora_dir, out, config)
    _assert_valid_corpus_spans(out, load_corpora(corpora_dir), len(QUESTIONS))
    assert result.diagnostics["fallbacks"] == 0
    assert result.to_dict()["config"]["reranker"] == str(model)


async def test_a_question_naming_an_unknown_corpus_fails_before_ingest(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    questions, corpora_dir = dataset
    (corpora_dir / "beta.md").unlink()
    config = EvalConfig(collection="eval_never_created", dsn=pg_dsn)
    with pytest.raises(ConfigurationError, match=r"corpus 'beta' not found"):
        await run_eval(questions, corpora_dir, tmp_path / "run.jsonl", config)
    assert not await _table_exists(pg_dsn, "eval_never_created")


def test_eval_command_prints_one_json_object_and_keeps_the_collection_on_request(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio
    import uuid

    questions, corpora_dir = dataset
    out = tmp_path / "run.jsonl"
    table = f"eval_kept_{uuid.uuid4().hex[:8]}"
    code = main(
        [
            "eval",
            "--questions",
            str(questions),
            "--corpora",
            str(corpora_dir),
            "--out",
            str(out),
            "--no-expand",
            "--no-late-chunking",
            "--child-size",
            "120",
            "--limit",
            "3",
            "--ks",
            "1,3",
            "--budgets",
            "100,200",
            "--dsn",
            pg_dsn,
            "--collection",
            table,
            "--keep",
            "--json",
            "--plot",
            str(tmp_path / "curve.png"),
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)  # the plot's line went to stderr
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(report["metrics"]) == {
        "recall@1",
        "recall@3",
        "precision@1",
        "precision@3",
        "iou@1",
        "iou@3",
        "chars@1",
        "chars@3",
        "recall@100c",
        "recall@200c",
        "questions",
        "answered",
    }
    assert set(report["intervals"]) == {k for k in report["metrics"] if "@" in k}
    for key, (low, high) in report["intervals"].items():
        assert low <= report["metrics"][key] <= high, key
    assert list(report["per_corpus"]) == ["alpha", "beta"]
    for scores in report["per_corpus"].values():
        assert set(scores) == set(report["metrics"]) and scores["questions"] == 4
    both = sum(s["recall@200c"] for s in report["per_corpus"].values()) / 2
    assert both == pytest.approx(report["metrics"]["recall@200c"])
    assert report["config"]["limit"] == 3 and report["config"]["expand_to_parent"] is False
    assert report["collection"] == table and report["kept"] is True
    assert {"query_p50_ms", "query_p95_ms", "ingest_seconds", "ingest_tokens_per_second"} <= set(
        report["timings"]
    )
    assert asyncio.run(_table_exists(pg_dsn, table))

    # Reusing a collection that holds rows is refused: an evaluation needs a fresh one.
    code = main(
        [
            "eval",
            "--questions",
            str(questions),
            "--corpora",
            str(corpora_dir),
            "--out",
            str(out),
            "--dsn",
            pg_dsn,
            "--collection",
            table,
        ]
    )
    assert code == 2
    assert "already holds rows" in capsys.readouterr().err
    assert asyncio.run(_table_exists(pg_dsn, table))  # the refused run did not drop it

    asyncio.run(_drop(pg_dsn, table))
    assert not asyncio.run(_table_exists(pg_dsn, table))


@pytest.mark.parametrize(
    ("flags", "section_parents", "preamble"),
    [([], True, True), (["--no-structure"], False, True), (["--no-preamble"], True, False)],
)
async def test_structure_options_reach_the_loader(
    flags: list[str], section_parents: bool, preamble: bool
) -> None:
    from parrot_parents.cli.eval import config_from_args
    from parrot_parents.cli.main import build_parser
    from parrot_parents.eval.runner import _Session

    argv = ["eval", "--questions", "q.csv", "--corpora", "c", "--out", "r.jsonl", *flags]
    session = _Session(config_from_args(build_parser().parse_args(argv)))
    try:
        processor = session.loader.processor
        assert (processor.section_parents, processor.preamble) == (section_parents, preamble)
    finally:
        await session.close()


async def _drop(dsn: str, table: str) -> None:
    engine = create_async_engine(to_async_dsn(dsn))
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP TABLE IF EXISTS public."{table}"'))
    finally:
        await engine.dispose()


def test_eval_counts_the_files_of_its_folder_as_documents(
    pg_dsn: str, dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions, corpora_dir = dataset
    argv = ["eval", "--questions", str(questions), "--corpora", str(corpora_dir)]
    argv += ["--out", str(tmp_path / "run.jsonl"), "--no-late-chunking", "--limit", "3"]
    assert main([*argv, "--ks", "1", "--budgets", "100", "--dsn", pg_dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    ingest = next(line for line in out if "ingest:" in line)
    recall = next(line for line in out if line.strip().startswith("recall@100c"))
    # The figure, then its 95 % interval: "recall@100c  0.5000  [0.2500, 0.8750]".
    assert re.fullmatch(r"\s*recall@100c  (\d\.\d{4})  \[(\d\.\d{4}), (\d\.\d{4})\]", recall)
    assert "(2 document(s)," in ingest  # one folder, two files: not "2 corpora"
    assert "corpora" not in ingest

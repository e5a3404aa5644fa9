"""One set of ingestion defaults: ``TextLoader()`` and ``parrot-parents ingest`` write the
same rows from the same files, and neither re-cuts what the other wrote."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text

from parrot_parents.cli.ingest import loader_options, parent_sizes
from parrot_parents.cli.main import build_parser, main
from parrot_parents.eval.runner import EvalConfig
from parrot_parents.loaders.defaults import DEFAULT_STRATEGY
from parrot_parents.loaders.extractive import EXTRACTIVE_STRATEGY, ExtractiveIndexer
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.strategies.build import indexer_for
from parrot_parents.strategies.spec import parse_strategy, strategy_for
from tests.conftest import REPO_ROOT, Ingested, unique_table

CORPUS = str(REPO_ROOT / "examples" / "corpus")


def test_the_default_strategy_is_one_indexer_everywhere(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus")
    from parrot_parents.stores.milvus.store import MilvusStore

    spec = parse_strategy(DEFAULT_STRATEGY)
    assert str(spec) == EXTRACTIVE_STRATEGY
    assert isinstance(indexer_for(spec), ExtractiveIndexer)
    loader = TextLoader()
    assert isinstance(loader.indexer, ExtractiveIndexer)
    postgres = PgVectorStore(dsn="postgresql://nowhere/x", table="t")
    assert strategy_for(None, postgres) == spec
    assert loader.indexer_for(postgres) is loader.indexer
    # Milvus searches the default strategy's rows too (folded into each child's
    # search text), so its default is the same indexer.
    other = MilvusStore(str(tmp_path / "milvus.db"), "t")
    assert strategy_for(None, other) == spec
    assert loader.indexer_for(other) is loader.indexer
    assert loader.policy(vector_store=other).strategy == EXTRACTIVE_STRATEGY
    assert TextLoader(indexer=None).indexer is None


def test_ingest_reindex_and_eval_default_to_the_loaders_sizes_and_structure() -> None:
    expected = TextLoader().policy()
    assert expected.strategy == EXTRACTIVE_STRATEGY
    parser = build_parser()
    store = PgVectorStore(dsn="postgresql://nowhere/x", table="t")
    for command in (["ingest", "x"], ["reindex", "--stale"]):
        args = parser.parse_args(command)
        spec = strategy_for(args.strategy, store)
        loader = TextLoader(indexer=indexer_for(spec), **loader_options(args))  # type: ignore[arg-type]
        assert loader.policy(**parent_sizes(args, spec)) == expected, command
    config = EvalConfig()
    loader = TextLoader(
        child_chunk_size=config.child_size,
        child_chunk_overlap=config.child_overlap,
        indexer=indexer_for(strategy_for(config.strategy, store)),
    )
    assert loader.policy(config.threshold_chars, config.parent_chars, config.parent_overlap) == (
        expected
    )


async def _rows(
    dsn: str, table: str, embeddings: Any
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """The collection's rows (id, text, metadata), its documents table without the
    ingestion time, and the children's vectors by id."""
    store = PgVectorStore(dsn=dsn, table=table, embedding=embeddings, create=False)
    try:
        engine, t = await store.ready()
        async with engine.connect() as conn:
            rows = (
                await conn.execute(select(t.c.id, t.c.document, t.c.cmetadata).order_by(t.c.id))
            ).all()
            vectors = dict(
                (await conn.execute(select(t.c.id, t.c.embedding).order_by(t.c.id))).all()
            )
            documents = (
                await conn.execute(
                    text(
                        "SELECT document_id, source, content_sha256, policy_version, metadata,"
                        f' source_text FROM "{table[:40]}_documents" ORDER BY document_id'
                    )
                )
            ).all()
        return [tuple(r) for r in rows], [tuple(d) for d in documents], vectors
    finally:
        await store.close()


def test_textloader_and_the_ingest_command_write_identical_rows(
    pg_dsn: str, embeddings: Any, example_corpus: Ingested, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command's ingest is the session's, of the same corpus with the defaults.
    by_python, by_cli = unique_table("py"), example_corpus.collection
    try:
        _compare(pg_dsn, embeddings, capsys, by_python, by_cli)
    finally:
        asyncio.run(_drop(pg_dsn, embeddings, by_python))


async def _drop(dsn: str, embeddings: Any, *tables: str) -> None:
    for table in tables:
        store = PgVectorStore(dsn=dsn, table=table, embedding=embeddings)
        try:
            await store.drop()
        finally:
            await store.close()


def _compare(
    pg_dsn: str,
    embeddings: Any,
    capsys: pytest.CaptureFixture[str],
    by_python: str,
    by_cli: str,
) -> None:

    async def python_ingest() -> None:
        store = PgVectorStore(dsn=pg_dsn, table=by_python, embedding=embeddings)
        try:
            report = await TextLoader(CORPUS, embedding=embeddings).ingest(store)
            assert report.failed == {} and report.indexed > 0
        finally:
            await store.close()

    asyncio.run(python_ingest())

    py_rows, py_docs, py_vectors = asyncio.run(_rows(pg_dsn, by_python, embeddings))
    cli_rows, cli_docs, cli_vectors = asyncio.run(_rows(pg_dsn, by_cli, embeddings))
    assert len(py_rows) > 100
    assert any(meta.get("document_type") == "indexed" for _, _, meta in py_rows)
    assert py_rows == cli_rows
    assert py_docs == cli_docs
    assert py_vectors.keys() == cli_vectors.keys()
    for key, vector in py_vectors.items():
        if vector is None:
            assert cli_vectors[key] is None, key
        else:
            assert np.allclose(vector, cli_vectors[key], atol=1e-5), key

    # The same policy: the command finds every file of the Python ingest unchanged.
    assert main(["ingest", CORPUS, "--dsn", pg_dsn, "--collection", by_python]) == 0
    out = capsys.readouterr()
    assert "ingested 0 document(s)" in out.out
    assert out.err.count("unchanged: ") == len(py_docs) == 5

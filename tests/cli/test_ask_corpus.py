"""The README's question on the example corpus, with a budget: every passage says something."""

from __future__ import annotations

import json

import pytest

from parrot_parents.cli.main import main
from parrot_parents.stores.records.sentences import only_headings
from tests.conftest import Ingested


def test_no_passage_of_the_readme_question_is_a_bare_heading(
    pg_dsn: str, example_corpus: Ingested, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--collection", example_corpus.collection, "--dsn", pg_dsn]
    question = "How will I be paid, and when?"
    for trim in ("--trim", "--no-trim"):
        assert main(["ask", question, "--budget", "2000", trim, "--json", *common]) == 0
        got = json.loads(capsys.readouterr().out)
        texts = [p["text"] for p in got["passages"]]
        assert texts and not [t for t in texts if only_headings(t)], texts
        assert got["meta"]["packing"]["used"] <= 2000

"""``parrot-parents ingest --strategy`` and ``eval --strategy``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from tests.conftest import REPO_ROOT, unique_table

EXAMPLES = REPO_ROOT / "examples" / "corpus"


def test_ingest_with_the_extractive_strategy_reports_its_rows(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table("strat")
    args = ["ingest", str(EXAMPLES / "benefits-faq.md"), "--collection", table, "--dsn", pg_dsn]
    assert main([*args, "--strategy", "contextual:extractive"]) == 0
    out = capsys.readouterr().out
    assert "indexed row(s)" in out
    assert "model call(s)" in out and "0 model call(s)" in out
    children = int(out.split(" child row(s)")[0].rsplit(" ", 1)[1])
    assert f"enriched {children} of {children}" in out
    question = ["ask", "When can I enrol in the health plan?", "--collection", table]
    assert main([*question, "--dsn", pg_dsn, "--no-expand", "--json", "--limit", "3"]) == 0
    got = json.loads(capsys.readouterr().out)
    source = (EXAMPLES / "benefits-faq.md").read_text(encoding="utf-8")
    for p in got["passages"]:
        assert p["kind"] == "child"
        assert source[p["start_index"] : p["end_index"]] == p["text"]
    assert all(c["via_kind"] == "context" for c in got["meta"]["children"])


def test_a_free_strategy_names_its_query_mode(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table("strat")
    args = ["ingest", str(EXAMPLES / "travel-policy.md"), "--collection", table, "--dsn", pg_dsn]
    assert main([*args, "--strategy", "sentence-window:1"]) == 0
    out = capsys.readouterr().out
    assert "expansion ratio 1.00" in out
    assert "--expand --mode window:1" in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sentence-window:0", "at least 1 neighbour"),
        ("summary", "calls a model, and none is configured"),
    ],
)
def test_a_bad_or_unservable_strategy_fails_before_any_work(
    pg_dsn: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    message: str,
) -> None:
    monkeypatch.delenv("PARROT_PARENTS_LLM_BASE_URL", raising=False)
    table = unique_table("strat")
    code = main(
        ["ingest", str(EXAMPLES), "--collection", table, "--dsn", pg_dsn, "--strategy", spec]
    )
    assert code != 0
    assert message in capsys.readouterr().err


def test_eval_config_takes_the_strategy_options() -> None:
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.eval.runner import EvalConfig

    config = EvalConfig(strategy="parent-document:3", child_size=300)
    assert (config.parent_chars, config.threshold_chars) == (900, 900)
    resolved = config.options().resolve()
    assert resolved.expand_to_parent is True and str(resolved.mode) == "parent"
    window = EvalConfig(strategy="sentence-window:2").options().resolve()
    assert str(window.mode) == "window:2"
    plain = EvalConfig(strategy="plain").options().resolve()
    assert plain.expand_to_parent is False
    with pytest.raises(ConfigurationError, match="sets mode 'window:2', but mode 'parent'"):
        EvalConfig(strategy="sentence-window:2", mode="parent")
    with pytest.raises(ConfigurationError, match="at least 2 children"):
        EvalConfig(strategy="hierarchical:1")


@pytest.mark.skipif(
    not (REPO_ROOT.parent / "shared" / "benchmarks" / "chunking_eval").is_dir(),
    reason="the shared benchmark is not there",
)
def test_eval_reports_the_strategy(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small question set on one corpus file: the report names expansion and calls."""
    bench = REPO_ROOT.parent / "shared" / "benchmarks" / "chunking_eval"
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    text = (bench / "corpora" / "state_of_the_union.md").read_text(encoding="utf-8")[:6000]
    (corpora / "sotu.md").write_text(text, encoding="utf-8")
    start = text.index("Madam Vice President")
    refs = json.dumps(
        [{"content": text[start : start + 20], "start_index": start, "end_index": start + 20}]
    )
    questions = tmp_path / "q.csv"
    import csv

    with questions.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question", "references", "corpus_id"])
        w.writerow(["Who is addressed at the start?", refs, "sotu"])
    out = tmp_path / "run.jsonl"
    args = ["eval", "--questions", str(questions), "--corpora", str(corpora), "--out", str(out)]
    assert main([*args, "--dsn", pg_dsn, "--strategy", "contextual:extractive", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    report = result["ingest"]["strategy"]
    assert report["strategy"] == "contextual:context=extractive"
    assert report["enriched"] == report["of"] == result["ingest"]["children"]
    assert report["calls"] == 0 and report["expansion"] == 1.0
    assert result["diagnostics"]["text_mismatches"] == 0

"""Score a retrieval run against questions with character-span references.

The definitions are those of the shared benchmark scorer (``shared/benchmarks/score.py``),
re-implemented here so that users can score their own data without it; a test checks that
both give the same numbers on the same run.

Units: every span is ``(start, end)`` in **characters** (Python ``str`` offsets into the
corpus file, end exclusive). A *run* maps each question's 0-based row index (``qid``) to
its passages, in the order they are handed to the LLM, each as ``(corpus_id, start, end)``.

Metrics (means over all questions; a question missing from the run scores 0):

``recall@k``
    share of the question's reference characters covered by the first ``k`` passages
    (only passages from the question's own corpus can cover its references).
``precision@k``
    covered reference characters / characters of the first ``k`` passages. A character
    handed over twice is paid twice.
``iou@k``
    covered / (passage characters + uncovered reference characters).
``recall@Bc``
    recall once the passages, in rank order, are cut to a budget of ``B`` characters:
    whole passages while they fit, then a prefix of the one that crosses the budget.
``chars@k``
    characters handed over by the first ``k`` passages (passages of every corpus count).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from parrot_parents.errors import ConfigurationError
from parrot_parents.eval.questions import Question, is_int

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_KS",
    "Run",
    "RunPassage",
    "Span",
    "budget_cut",
    "covered_chars",
    "load_run",
    "mean_of",
    "metric_order",
    "score_by_corpus",
    "score_per_question",
    "score_run",
    "union_spans",
    "write_run",
]

Span = tuple[int, int]
#: One passage of a run: ``(corpus_id, start, end)``, characters, end exclusive.
RunPassage = tuple[str, int, int]
#: ``{qid: passages in rank order}``.
Run = Mapping[int, Sequence[RunPassage]]

#: Cut-offs (passages) of recall/precision/iou/chars@k.
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
#: Budgets (characters) of recall@Bc.
DEFAULT_BUDGETS: tuple[int, ...] = (1000, 2000, 4000, 8000)


def union_spans(spans: Iterable[Span]) -> list[Span]:
    """Sorted, disjoint spans covering the same characters; empty spans are dropped.

    Spans that overlap or touch (``(0, 5)`` and ``(5, 9)``) are joined.
    """
    out: list[list[int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def covered_chars(references: Iterable[Span], spans: Iterable[Span]) -> int:
    """Reference characters inside at least one span (both sides unioned first)."""
    passages = union_spans(spans)
    total = 0
    for ref_start, ref_end in union_spans(references):
        for start, end in passages:
            overlap = min(ref_end, end) - max(ref_start, start)
            if overlap > 0:
                total += overlap
    return total


def budget_cut(spans: Sequence[Span], budget: int) -> list[Span]:
    """Cut spans, in order, to ``budget`` characters in all.

    Whole spans are kept while they fit; the span that crosses the budget keeps its first
    characters; later spans are dropped. ``budget_cut([(0, 600), (900, 1500)], 1000)``
    gives ``[(0, 600), (900, 1300)]``.
    """
    out: list[Span] = []
    used = 0
    for start, end in spans:
        if used >= budget:
            break
        take = min(end - start, budget - used)
        out.append((start, start + take))
        used += take
    return out


def score_per_question(
    questions: Sequence[Question],
    run: Run,
    ks: Sequence[int] = DEFAULT_KS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> dict[str, list[float]]:
    """Each metric of ``run`` for each question (see the module docstring).

    Args:
        questions: the question set, in file order (``qid`` is the index).
        run: passages per qid, in rank order; absent qids score 0.
        ks: passage cut-offs.
        budgets: context budgets in characters.

    Returns:
        ``{"recall@5": [value of qid 0, value of qid 1, ...], "recall@2000c": [...],
        "chars@5": [...], ...}``: one list of ``len(questions)`` floats per metric, in qid
        order (ratios in ``[0, 1]``, ``chars@k`` in characters). :func:`score_run` is the
        mean of each list, summed in qid order, so both always agree to the last digit.
    """
    out: dict[str, list[float]] = {}
    for qid, q in enumerate(questions):
        passages = list(run.get(qid, ()))
        refs = [(r.start, r.end) for r in q.references]
        ref_len = sum(end - start for start, end in union_spans(refs))
        for k in ks:
            top = passages[:k]
            own = [(s, e) for c, s, e in top if c == q.corpus_id]
            cov = covered_chars(refs, own)
            spent = sum(e - s for _, s, e in top)
            _put(out, f"recall@{k}", cov / ref_len if ref_len else 0.0)
            _put(out, f"precision@{k}", cov / spent if spent else 0.0)
            _put(out, f"iou@{k}", cov / (spent + ref_len - cov) if spent + ref_len else 0.0)
            _put(out, f"chars@{k}", float(spent))
        for b in budgets:
            cut = budget_cut([(s, e) for _, s, e in passages], b)
            own = [span for span, (c, _, _) in zip(cut, passages, strict=False) if c == q.corpus_id]
            _put(out, f"recall@{b}c", covered_chars(refs, own) / ref_len if ref_len else 0.0)
    return out


def mean_of(values: Sequence[float]) -> float:
    """The mean as every metric of this module is taken: summed left to right, then divided.

    Not :func:`math.fsum` nor :func:`sum` (compensated from Python 3.12): the shared
    scorer adds one question at a time, and the figures must match it to the last digit.
    ``0.0`` for no values.
    """
    total = 0.0
    for value in values:
        total += value
    return total / len(values) if values else 0.0


def score_run(
    questions: Sequence[Question],
    run: Run,
    ks: Sequence[int] = DEFAULT_KS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> dict[str, float | int]:
    """Mean metrics of ``run`` over ``questions`` (see the module docstring); the
    arguments are those of :func:`score_per_question`.

    Returns:
        ``{"recall@5": ..., "recall@2000c": ..., "chars@5": ..., "questions": n,
        "answered": qids in the run}`` with the shared scorer's key names: the
        :func:`mean_of` each list of :func:`score_per_question`.
    """
    per_question = score_per_question(questions, run, ks, budgets)
    means: dict[str, float | int] = {k: mean_of(v) for k, v in per_question.items()}
    means["questions"] = len(questions)
    means["answered"] = len(run)
    return means


def score_by_corpus(
    questions: Sequence[Question],
    run: Run,
    ks: Sequence[int] = DEFAULT_KS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
) -> dict[str, dict[str, float | int]]:
    """:func:`score_run` over the questions of each corpus alone.

    The passages stay as they are (those of another corpus still cost characters); only
    the questions averaged over change. Returns ``{corpus_id: metrics}`` in the order the
    corpora first appear in ``questions``; ``answered`` counts that corpus's questions in
    the run.
    """
    by_corpus: dict[str, list[int]] = {}
    for qid, q in enumerate(questions):
        by_corpus.setdefault(q.corpus_id, []).append(qid)
    out: dict[str, dict[str, float | int]] = {}
    for cid, qids in by_corpus.items():
        sub_run = {i: run[qid] for i, qid in enumerate(qids) if qid in run}
        out[cid] = score_run([questions[qid] for qid in qids], sub_run, ks, budgets)
    return out


def _put(out: dict[str, list[float]], key: str, value: float) -> None:
    out.setdefault(key, []).append(value)


def metric_order(key: str) -> tuple[str, int, str]:
    """Sort key that groups metrics by name, then by cut-off (``recall@5`` < ``recall@10``)."""
    return (key.split("@")[0], len(key), key)


def write_run(path: str | Path, run: Run) -> None:
    """Write ``run`` as JSONL: ``{"qid", "passages": [{"corpus_id", "start", "end"}]}``."""
    with Path(path).open("w", encoding="utf-8") as f:
        for qid in sorted(run):
            passages = [{"corpus_id": c, "start": s, "end": e} for c, s, e in run[qid]]
            f.write(json.dumps({"qid": qid, "passages": passages}, ensure_ascii=False) + "\n")


def load_run(path: str | Path, n_questions: int) -> dict[int, list[RunPassage]]:
    """Read a run file written by :func:`write_run` (or by any other retriever).

    Raises:
        ConfigurationError: a line that is not a JSON object with a ``qid`` and a list of
            ``passages``, a qid outside ``[0, n_questions)`` or repeated, a passage without
            a ``corpus_id`` or a span that is not two ints with ``0 <= start <= end``; the
            message gives ``file:line``.
        OSError: the file cannot be read.
    """
    run: dict[int, list[RunPassage]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ConfigurationError(
                    f"{where}: not a JSON line ({exc})",
                    hint='expected {"qid": 0, "passages": [{"corpus_id", "start", "end"}]}',
                ) from None
            if not isinstance(obj, dict) or not isinstance(obj.get("passages", []), list):
                raise ConfigurationError(
                    f"{where}: expected an object with a qid and a list of passages"
                )
            qid = obj.get("qid")
            if not is_int(qid) or not 0 <= qid < n_questions:
                raise ConfigurationError(
                    f"{where}: qid {qid!r} is not a row of the question set "
                    f"(expected 0..{n_questions - 1})"
                )
            if qid in run:
                raise ConfigurationError(f"{where}: qid {qid} appears twice")
            passages: list[RunPassage] = []
            for p in obj.get("passages", []):
                start, end = (p.get("start"), p.get("end")) if isinstance(p, dict) else (None, None)
                if not (is_int(start) and is_int(end) and 0 <= start <= end):
                    raise ConfigurationError(
                        f"{where}: bad span {p!r}", hint="expected ints with 0 <= start <= end"
                    )
                if p.get("corpus_id") is None:
                    raise ConfigurationError(f"{where}: passage {p!r} has no corpus_id")
                passages.append((str(p["corpus_id"]), start, end))
            run[qid] = passages
    return run

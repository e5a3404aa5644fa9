"""Evaluation: question sets with character-span references, a run scorer, and a runner.

* :mod:`~parrot_parents.eval.questions` reads a question CSV;
* :mod:`~parrot_parents.eval.scorer` scores a run (recall/precision/iou@k, recall@Bc,
  chars@k) with the definitions of the shared benchmark scorer;
* :mod:`~parrot_parents.eval.runner` ingests corpora into a fresh collection, runs every
  question through the bot and times both (``parrot-parents eval``).
"""

from parrot_parents.eval.questions import (
    Question,
    Reference,
    check_references,
    load_corpora,
    load_questions,
)
from parrot_parents.eval.runner import EvalConfig, EvalResult, run_eval
from parrot_parents.eval.scorer import load_run, score_by_corpus, score_run, write_run

__all__ = [
    "EvalConfig",
    "EvalResult",
    "Question",
    "Reference",
    "check_references",
    "load_corpora",
    "load_questions",
    "load_run",
    "run_eval",
    "score_by_corpus",
    "score_run",
    "write_run",
]

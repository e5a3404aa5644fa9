"""Evaluation: question sets with character-span references, a run scorer, and a runner.

* :mod:`~parrot_parents.eval.questions` reads a question CSV;
* :mod:`~parrot_parents.eval.scorer` scores a run (recall/precision/iou@k, recall@Bc,
  chars@k) with the definitions of the shared benchmark scorer;
* :mod:`~parrot_parents.eval.intervals` gives bootstrap intervals of those means, and of
  the difference of two runs;
* :mod:`~parrot_parents.eval.runner` ingests corpora into a fresh collection, runs every
  question through the bot and times both (``parrot-parents eval``).

The names below load on first use (:mod:`parrot_parents.lazy`): scoring run files
(``parrot-parents compare``) needs neither the database stack nor the model.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

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
    "score_per_question",
    "score_run",
    "write_run",
]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.eval.questions import (
        Question,
        Reference,
        check_references,
        load_corpora,
        load_questions,
    )
    from parrot_parents.eval.runner import EvalConfig, EvalResult, run_eval
    from parrot_parents.eval.scorer import (
        load_run,
        score_by_corpus,
        score_per_question,
        score_run,
        write_run,
    )

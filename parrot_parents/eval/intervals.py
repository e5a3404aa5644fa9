"""How far a mean over questions could move with another draw of questions: bootstrap intervals.

Method: the **percentile bootstrap** over questions (Efron & Tibshirani, *An Introduction
to the Bootstrap*, Chapman & Hall 1993, ch. 13, "the percentile interval"). The question
set is resampled with replacement ``resamples`` times (same size as the set); the metric's
mean is taken on each resample; the interval runs from the ``(1 - confidence) / 2`` to the
``(1 + confidence) / 2`` quantile of those means (linear interpolation between order
statistics, numpy's default).

For the difference of two runs on one question set, the resampling is **paired** (ibid.:
resample the units, here questions, that carry both measurements): each resample draws
questions, and both runs are scored on the same drawn questions, so the interval is the
percentile interval of the mean per-question difference ``B - A``. Pairing removes the
spread that comes from some questions being harder than others, which both runs share.

All resampling uses one seeded generator (:data:`DEFAULT_SEED`), so the same inputs give
the same interval to the last digit; every metric of one call is resampled with the same
drawn questions. Values are per-question metric values (ratios in ``[0, 1]`` or character
counts); intervals are in the same unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from parrot_parents.eval.scorer import mean_of

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "Difference",
    "Interval",
    "paired_differences",
    "percentile_interval",
    "percentile_intervals",
]

#: Bootstrap resamples per interval.
DEFAULT_RESAMPLES = 2000
#: Coverage of the intervals (0.95: the 2.5 % and 97.5 % quantiles).
DEFAULT_CONFIDENCE = 0.95
#: Seed of the resampling; fixed so that a report can be reproduced.
DEFAULT_SEED = 20240901

#: ``(low, high)``, in the metric's unit.
Interval = tuple[float, float]


@dataclass(frozen=True)
class Difference:
    """Run B minus run A for one metric, over the same questions.

    Attributes:
        a: A's mean (the scorer's figure).
        b: B's mean.
        diff: ``b - a``.
        low: lower end of the paired percentile interval of ``diff``.
        high: upper end.
        higher: questions where B's value is above A's.
        lower: questions where B's value is below A's.
        tied: questions where both are equal.
    """

    a: float
    b: float
    diff: float
    low: float
    high: float
    higher: int
    lower: int
    tied: int


def _check(resamples: int, confidence: float) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive int, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _resample_counts(n: int, resamples: int, seed: int) -> npt.NDArray[np.float64]:
    """How often each of ``n`` questions is drawn in each resample: ``(resamples, n)``.

    A draw of ``n`` question indices is the same as these counts, so a resample's mean is
    one dot product: ``counts[r] @ values / n``.
    """
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n, size=(resamples, n))
    offsets = np.arange(resamples, dtype=np.int64)[:, None] * n
    counts = np.bincount((drawn + offsets).ravel(), minlength=resamples * n)
    return counts.reshape(resamples, n).astype(np.float64)


def _intervals(
    columns: npt.NDArray[np.float64],
    points: Sequence[float],
    resamples: int,
    confidence: float,
    seed: int,
) -> list[Interval]:
    n = columns.shape[0]
    if n == 0:
        return [(p, p) for p in points]
    tail = (1.0 - confidence) / 2 * 100
    counts = _resample_counts(n, resamples, seed)
    out: list[Interval] = []
    for j, point in enumerate(points):
        column = np.ascontiguousarray(columns[:, j])
        if np.all(column == column[0]):
            # Every resample has the same mean: the interval is the point itself (the
            # dot products would scatter it over the last digit).
            out.append((point, point))
            continue
        # One column at a time: a matrix product over several would round each column
        # according to its neighbours, and a metric's interval would change in the last
        # digit with the other metrics asked for.
        means = (counts @ column) / n
        low, high = (float(x) for x in np.percentile(means, [tail, 100 - tail]))
        # Rounding alone can put a resample mean a last-place digit outside the values,
        # or the point outside a quantile it equals in exact arithmetic: the interval is
        # held to the values' range, then widened to hold the point.
        low, high = max(low, float(column.min())), min(high, float(column.max()))
        out.append((min(low, point), max(high, point)))
    return out


def percentile_intervals(
    per_question: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> dict[str, Interval]:
    """Percentile bootstrap interval of each metric's mean over questions.

    Args:
        per_question: ``{metric: values}``, one value per question, every list of the same
            length ``n`` and in the same question order (as
            :func:`~parrot_parents.eval.scorer.score_per_question` gives them).
        resamples: bootstrap resamples (default 2000).
        confidence: coverage, strictly between 0 and 1 (default 0.95).
        seed: seed of the resampling (default :data:`DEFAULT_SEED`).

    Returns:
        ``{metric: (low, high)}`` in the metric's unit; each interval holds the metric's
        mean (:func:`~parrot_parents.eval.scorer.mean_of`). A metric constant over the
        questions, or no questions at all, gives ``(mean, mean)``.

    Raises:
        ValueError: lists of different lengths, a bad ``resamples`` or ``confidence``.
    """
    _check(resamples, confidence)
    names = list(per_question)
    lengths = {len(per_question[name]) for name in names}
    if len(lengths) > 1:
        raise ValueError(f"per-question lists of different lengths: {sorted(lengths)}")
    if not names:
        return {}
    columns = np.array([per_question[name] for name in names], dtype=np.float64).T
    columns = columns.reshape(lengths.pop(), len(names))
    points = [float(mean_of(per_question[name])) for name in names]
    return dict(zip(names, _intervals(columns, points, resamples, confidence, seed), strict=True))


def percentile_interval(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """:func:`percentile_intervals` of one metric: ``(low, high)`` around ``mean_of(values)``.

    Raises:
        ValueError: a bad ``resamples`` or ``confidence``.
    """
    return percentile_intervals(
        {"": values}, resamples=resamples, confidence=confidence, seed=seed
    )[""]


def paired_differences(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> dict[str, Difference]:
    """``B - A`` for each metric of two runs on one question set, with paired intervals.

    Args:
        a: ``{metric: values}`` of run A, one value per question in qid order.
        b: the same for run B: the same metrics, lists of the same length.
        resamples: bootstrap resamples (default 2000).
        confidence: coverage, strictly between 0 and 1 (default 0.95).
        seed: seed of the resampling (default :data:`DEFAULT_SEED`).

    Returns:
        ``{metric: Difference}`` in ``a``'s order. ``diff`` is ``mean_of(b) - mean_of(a)``
        (the difference of the two printed figures); the interval is the percentile
        interval of the mean per-question difference, both runs resampled with the same
        questions. A run compared with itself gives ``diff == 0`` and ``(0, 0)``.

    Raises:
        ValueError: different metrics, lists of different lengths, a bad ``resamples`` or
            ``confidence``.
    """
    _check(resamples, confidence)
    if list(a) != list(b):
        raise ValueError(f"the runs have different metrics: {list(a)} and {list(b)}")
    names = list(a)
    lengths = {len(v) for v in (*a.values(), *b.values())}
    if len(lengths) > 1:
        raise ValueError(f"per-question lists of different lengths: {sorted(lengths)}")
    if not names:
        return {}
    n = lengths.pop()
    va = np.array([a[name] for name in names], dtype=np.float64).T.reshape(n, len(names))
    vb = np.array([b[name] for name in names], dtype=np.float64).T.reshape(n, len(names))
    delta = vb - va
    means_a = [float(mean_of(a[name])) for name in names]
    means_b = [float(mean_of(b[name])) for name in names]
    points = [mb - ma for ma, mb in zip(means_a, means_b, strict=True)]
    intervals = _intervals(delta, points, resamples, confidence, seed)
    out: dict[str, Difference] = {}
    for j, name in enumerate(names):
        column = delta[:, j]
        out[name] = Difference(
            a=means_a[j],
            b=means_b[j],
            diff=points[j],
            low=intervals[j][0],
            high=intervals[j][1],
            higher=int(np.count_nonzero(column > 0)),
            lower=int(np.count_nonzero(column < 0)),
            tied=int(np.count_nonzero(column == 0)),
        )
    return out

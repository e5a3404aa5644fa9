"""Sentence-grain trimming: which sentences of the hits fill a character budget.

When the hits do not all fit, handing over whole children spends the budget on the
sentences of a child that do not answer the question. Trimming keeps the best children
whole and fills the rest of the budget with single sentences, as an extractive context
compressor does (RECOMP's extractive compressor, Xu et al. 2023; the coarse stage of
LongLLMLingua, Jiang et al. 2023), but inside the packer and on exact source spans:

1. **Whole children first.** Hits in rank order are taken whole while they fit in the
   first ``whole_share`` of the budget (default 0.5); the first that does not ends this.
2. **Then sentences.** Every sentence of the remaining hits is scored by its cosine
   similarity to the question, discounted by its hit's rank among them:
   ``max(cos, 0) / (1 + rank_decay * r)`` (``r`` = 0 for the first remaining hit,
   ``rank_decay`` 0.1 by default), and the best are taken while they fit. The sentences
   of a heading line are not scored: they come with the sentence after them, at its
   cost, and never alone.
3. Consecutive sentences of one hit join into one span (the whitespace between them
   counts), so a hit hands over one or more runs of whole sentences, in document order.

The sentence vectors were pooled at ingest (:mod:`parrot_parents.stores.records.sentences`);
no model runs here. The defaults: docs/benchmarks.md, "Sentence trimming".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RANK_DECAY", "WHOLE_SHARE", "Candidate", "Choice", "choose_sentences"]

#: Share of the budget for whole children, before sentences fill the rest.
WHOLE_SHARE = 0.5
#: How fast a sentence's score falls with its hit's rank.
RANK_DECAY = 0.1

Span = tuple[int, int]


@dataclass(frozen=True)
class Candidate:
    """One hit as trimming sees it: its span and its sentences (characters).

    Attributes:
        span: the hit's ``(start, end)`` in its document.
        sentences: its sentences' spans, in document order, inside ``span``.
        similarities: cosine similarity of each sentence to the question.
        headings: indexes of the sentences of heading lines: never kept on their own (a
            title without its text answers nothing), only with the sentence after them.
    """

    span: Span
    sentences: Sequence[Span]
    similarities: np.ndarray
    headings: frozenset[int] = frozenset()


@dataclass
class Choice:
    """What trimming keeps of one hit: nothing, all of it, or runs of its sentences.

    Attributes:
        spans: the kept spans, in document order (the hit's own span when whole).
        whole: the hit is kept whole.
        dropped: the hit's sentences left out (only for a hit partly kept).
    """

    spans: list[Span] = field(default_factory=list)
    whole: bool = False
    dropped: list[Span] = field(default_factory=list)

    @property
    def cost(self) -> int:
        return sum(e - s for s, e in self.spans)


def _runs(sentences: Sequence[Span], chosen: set[int]) -> list[Span]:
    """Spans of the runs of consecutive chosen sentences (gaps between them included)."""
    out: list[Span] = []
    prev = -2
    for i in sorted(chosen):
        s, e = sentences[i]
        if i == prev + 1 and out:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
        prev = i
    return out


def choose_sentences(
    candidates: Sequence[Candidate],
    budget: int,
    *,
    whole_share: float = WHOLE_SHARE,
    rank_decay: float = RANK_DECAY,
) -> list[Choice]:
    """One :class:`Choice` per candidate (module docstring), costing at most ``budget``
    characters in all: the kept spans' lengths add up to at most ``budget``.

    Args:
        candidates: the hits in rank order.
        budget: characters, >= 0.
        whole_share: share of the budget for whole hits, in [0, 1].
        rank_decay: >= 0.

    Raises:
        ValueError: ``whole_share`` or ``rank_decay`` out of range.
    """
    if not 0.0 <= whole_share <= 1.0:
        raise ValueError(f"whole_share must be in [0, 1], got {whole_share!r}")
    if rank_decay < 0:
        raise ValueError(f"rank_decay must be >= 0, got {rank_decay!r}")
    choices = [Choice() for _ in candidates]
    used = 0
    first = len(candidates)
    for i, c in enumerate(candidates):
        if c.sentences and len(c.headings) >= len(c.sentences):
            continue  # only headings: nothing to hand over, whole or in part
        length = c.span[1] - c.span[0]
        if used + length > whole_share * budget:
            first = i
            break
        choices[i] = Choice([c.span], whole=True)
        used += length
    units: list[tuple[float, int, int]] = []
    for i in range(first, len(candidates)):
        c = candidates[i]
        weight = 1.0 / (1.0 + rank_decay * (i - first))
        for j, sim in enumerate(c.similarities[: len(c.sentences)]):
            if j not in c.headings:
                units.append((max(float(sim), 0.0) * weight, i, j))
    # Best first; ties by rank, then document order, so the choice is deterministic.
    units.sort(key=lambda u: (-u[0], u[1], u[2]))
    chosen: dict[int, set[int]] = {}
    for _, i, j in units:
        sentences, headings = candidates[i].sentences, candidates[i].headings
        group = {j}
        while j - len(group) in headings:  # the heading line(s) right above it
            group.add(j - len(group))
        picked = chosen.get(i, set())
        before = sum(e - s for s, e in _runs(sentences, picked))
        after = sum(e - s for s, e in _runs(sentences, picked | group))
        if used + after - before <= budget:
            chosen[i] = picked | group
            used += after - before
    for i, picked in chosen.items():
        c = candidates[i]
        runs = _runs(c.sentences, picked)
        extra = (c.span[1] - c.span[0]) - sum(e - s for s, e in runs)
        if len(picked) == len(c.sentences) and used + extra <= budget:
            # Every sentence: the child as it is, with whatever surrounds its sentences.
            used += extra
            choices[i] = Choice([c.span], whole=True)
            continue
        dropped = [s for k, s in enumerate(c.sentences) if k not in picked]
        choices[i] = Choice(runs, dropped=dropped)
    return choices

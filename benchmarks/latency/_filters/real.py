"""The filter benchmark's cases on real text: the distractor benchmark's collection.

``python -m benchmarks run distractors --build-only`` writes the three dev corpora and the
pages of Debian's manuals (``benchmarks/quality/distractors.py``), each document with two
keys beside its ``document_id``: ``package`` (the Debian package, ``chunking_eval`` for
the dev corpora; eleven values of very unequal size) and ``position`` (the document's place
in the corpus order, packages one after another). Unlike the synthetic keys, these are
correlated with the text, as a department or a date range is. Per kind, the filter kept
for query ``i`` keeps about the target share of the children where the data allows it:

* ``equality``: ``{"document_id": ...}`` of a document with about that many children
  (0.1 %), else ``{"package": ...}``, a package whose share is within 2× of the target
  (several take turns with ``i``; the "kept" column of the report says what they kept);
* ``in``: ``{"document_id": {"$in": [...]}}``, documents drawn (seeded by ``i``, the
  larger ones likelier, at most the product's 1,000 values) until they hold the target;
* ``range``: ``{"position": {"$gte": a, "$lt": b}}``, neighbouring documents holding the
  target, starting at a place that moves with ``i``;
* ``scope``: a bot scoped to :data:`REAL_SCOPE` (the two largest manuals, 56 % of the
  children) asked with a range of ``position`` that keeps the target inside the scope.

The questions are the dev set's, embedded by the collection's own model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.latency._filters.cases import Case, Children

__all__ = ["REAL_COLUMNS", "REAL_SCOPE", "RealCases"]

#: The keys :meth:`Children.read` reads of the real-text collection.
REAL_COLUMNS = {"document_id": "text", "package": "text", "position": "int"}
#: The scoped bot's scope on real text.
REAL_SCOPE: dict[str, Any] = {"package": {"$in": ["postgresql-doc-15", "python3.11-doc"]}}
#: The most values an ``$in`` may hold (``parrot_parents.stores.filters``).
_MAX_IN = 1000


class RealCases:
    """The cases over the documents of ``children`` (read with :data:`REAL_COLUMNS`)."""

    def __init__(self, children: Children) -> None:
        positions = children.keys["position"]
        order = np.argsort(positions, kind="stable")
        first = np.unique(positions[order], return_index=True)
        # One entry per document, in position order: its id, package and children.
        self.positions = first[0]
        starts = first[1]
        self.counts = np.diff(np.append(starts, len(order)))
        self.doc_ids = children.keys["document_id"][order][starts]
        self.packages = children.keys["package"][order][starts]
        self.total = int(self.counts.sum())
        scoped = np.isin(self.packages, REAL_SCOPE["package"]["$in"])
        self._cumulative = np.concatenate([[0], np.cumsum(self.counts)])
        self._scoped_cumulative = np.concatenate([[0], np.cumsum(self.counts * scoped)])
        shares: dict[str, int] = {}
        for package, n in zip(self.packages.tolist(), self.counts.tolist(), strict=True):
            shares[package] = shares.get(package, 0) + int(n)
        self.package_children = shares

    def _near(self, sizes: dict[Any, int], target: float) -> list[Any]:
        """The keys of ``sizes`` within 2× of ``target``, nearest first (ratio)."""
        within = [k for k, n in sizes.items() if target / 2 <= n <= target * 2]
        return sorted(within, key=lambda k: (abs(np.log(sizes[k] / target)), str(k)))

    def _window(self, cumulative: np.ndarray, target: float, i: int) -> tuple[int, int]:
        """A ``[low, high)`` range of positions whose children (by ``cumulative``) make
        about ``target``, its start moving with ``i``."""
        last = int(np.searchsorted(cumulative, cumulative[-1] - target, side="right"))
        start = (i * 37) % max(1, last)
        end = int(np.searchsorted(cumulative, cumulative[start] + target, side="left"))
        end = min(max(end, start + 1), len(self.positions))
        high = (
            int(self.positions[end]) if end < len(self.positions) else int(self.positions[-1]) + 1
        )
        return int(self.positions[start]), high

    def case(self, kind: str, permille: int, i: int) -> Case | None:
        """The filter of ``kind`` keeping about ``permille`` ‰ of the children for query
        ``i``, or None where the data has none within 2× (an equality at 50 %)."""
        target = self.total * permille / 1000
        if kind == "equality":
            if permille <= 1:
                docs = self._near(
                    dict(zip(self.doc_ids.tolist(), self.counts.tolist(), strict=True)), target
                )
                if not docs:
                    return None
                doc = docs[i % min(len(docs), 20)]
                return Case({"document_id": doc}, None, lambda c: c.keys["document_id"] == doc)
            packages = self._near(self.package_children, target)
            if not packages:
                return None
            package = packages[i % len(packages)]
            return Case({"package": package}, None, lambda c: c.keys["package"] == package)
        if kind == "in":
            rng = np.random.default_rng(i)
            drawn = rng.choice(
                len(self.counts), size=len(self.counts), replace=False, p=self.counts / self.total
            )
            held = np.cumsum(self.counts[drawn])
            take = min(_MAX_IN, int(np.searchsorted(held, target, side="left")) + 1)
            ids = sorted(self.doc_ids[drawn[:take]].tolist())
            chosen = set(ids)
            return Case(
                {"document_id": {"$in": ids}},
                None,
                lambda c: np.fromiter((d in chosen for d in c.keys["document_id"]), bool),
            )
        if kind in ("range", "scope"):
            scoped = kind == "scope"
            low, high = self._window(
                self._scoped_cumulative if scoped else self._cumulative, target, i
            )

            def keeps(c: Children) -> np.ndarray:
                inside = (c.keys["position"] >= low) & (c.keys["position"] < high)
                if scoped:
                    inside &= np.isin(c.keys["package"], REAL_SCOPE["package"]["$in"])
                return inside

            return Case(
                {"position": {"$gte": low, "$lt": high}}, REAL_SCOPE if scoped else None, keeps
            )
        raise ValueError(f"unknown filter kind {kind!r}")

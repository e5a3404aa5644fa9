"""Where a passage lies in its document: section path, ordinals, layer and pages.

:class:`Section` reads back the markers the loaders record
(:mod:`parrot_parents.stores.records.structure_markers`) so that a passage can be cited
without a second query. A passage built from several rows takes the section of the row it
stands for (a parent its own, a window its hit's, a packed span its best-ranked part's);
its pages cover every row it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from parrot_parents.stores.records.structure_markers import (
    LAYER,
    ORDINAL,
    PAGE,
    PAGE_END,
    SECTION_ORDINAL,
    SECTION_PATH,
)

__all__ = ["CITATION_SEPARATOR", "SECTION_PATH_SEPARATOR", "Section"]

#: How the loaders join the headings of a stored ``section_path``.
SECTION_PATH_SEPARATOR = " > "
#: How a citation line joins them.
CITATION_SEPARATOR = " › "


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Section:
    """A passage's place in its document's structure (all None/empty when unknown).

    Attributes:
        path: heading titles from the document's root to the section, outermost first
            (empty before the first heading, for a whole document, or for an unstructured
            source).
        section_ordinal: the number in the section's heading ("Chapter 3" → 3, 0 when the
            heading has none).
        ordinal: position of the section in the document (1-based; 0 before the first
            heading).
        layer: ``section``, ``table_row``, ``table`` or ``document``.
        page, page_end: first and last page (1-based), for sources that have pages (PDF).
    """

    path: tuple[str, ...] = ()
    section_ordinal: int | None = None
    ordinal: int | None = None
    layer: str | None = None
    page: int | None = None
    page_end: int | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Section:
        """The section a row's ``cmetadata`` records (missing or mistyped keys: None)."""
        raw = metadata.get(SECTION_PATH)
        path: tuple[str, ...] = ()
        if isinstance(raw, str) and raw:
            path = tuple(raw.split(SECTION_PATH_SEPARATOR))
        elif isinstance(raw, list | tuple):
            path = tuple(str(x) for x in raw)
        layer = metadata.get(LAYER)
        page = _int(metadata.get(PAGE))
        page_end = _int(metadata.get(PAGE_END))
        return cls(
            path=path,
            section_ordinal=_int(metadata.get(SECTION_ORDINAL)),
            ordinal=_int(metadata.get(ORDINAL)),
            layer=layer if isinstance(layer, str) else None,
            page=page,
            page_end=page_end if page_end is not None else page,
        )

    def spanning(self, others: Iterable[Section]) -> Section:
        """This section, with its pages widened to cover ``others`` too."""
        sections = [self, *others]
        firsts = [s.page for s in sections if s.page is not None]
        lasts = [s.page_end for s in sections if s.page_end is not None]
        return replace(
            self,
            page=min(firsts) if firsts else None,
            page_end=max(lasts) if lasts else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """``section_path`` (a list of titles), ``section_ordinal``, ``ordinal``, ``layer``,
        ``page``, ``page_end``: the JSON keys of a passage."""
        out = asdict(self)
        return {"section_path": list(out.pop("path")), **out}

    def citation(self) -> str | None:
        """``"Employee Handbook › 4. Pay and Payroll, pages 12-13"``: the headings joined by
        `` › ``, then the pages; None when neither is known."""
        parts = []
        if self.path:
            parts.append(CITATION_SEPARATOR.join(self.path))
        if self.page is not None:
            end = self.page_end if self.page_end is not None else self.page
            parts.append(f"page {self.page}" if end == self.page else f"pages {self.page}-{end}")
        return ", ".join(parts) or None

"""Metadata keys of the structure-aware hierarchy, kept beside the spec's markers.

Every row of a structured document records:

* ``layer``: ``section`` (prose cut from a section, and section parents), ``table_row``
  (a group of table rows), ``table`` (a table stored as its own parent) or ``document``;
* ``section_path``: the headings from the root, joined by `` > ``;
* ``ordinal``: the position of its section in the document (1, 2, 3…; 0 before the first
  heading);
* ``section_ordinal``: the number in the heading itself ("Chapter 3" → 3, "Foreword" → 0).

Table rows also carry ``parent_table_id``; rows of a PDF carry ``page`` and ``page_end``
(1-based). ``retrieval_preamble`` is text embedded and lexically indexed with a child but
never returned (the returned text is always the exact source span).
"""

from __future__ import annotations

__all__ = [
    "LAYER",
    "LAYERS",
    "LAYER_DOCUMENT",
    "LAYER_SECTION",
    "LAYER_TABLE",
    "LAYER_TABLE_ROW",
    "ORDINAL",
    "PAGE",
    "PAGE_END",
    "PARENT_TABLE_ID",
    "RETRIEVAL_PREAMBLE",
    "SECTION_ORDINAL",
    "SECTION_PATH",
]

LAYER = "layer"
SECTION_PATH = "section_path"
ORDINAL = "ordinal"
SECTION_ORDINAL = "section_ordinal"
PARENT_TABLE_ID = "parent_table_id"
RETRIEVAL_PREAMBLE = "retrieval_preamble"
PAGE = "page"
PAGE_END = "page_end"

LAYER_SECTION = "section"
LAYER_TABLE_ROW = "table_row"
LAYER_TABLE = "table"
LAYER_DOCUMENT = "document"
LAYERS = frozenset({LAYER_SECTION, LAYER_TABLE_ROW, LAYER_TABLE, LAYER_DOCUMENT})

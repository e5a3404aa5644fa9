"""Structure-aware hierarchy: readers that find headings and tables with exact offsets,
and the builder that turns sections into parents and table rows into children.

* :mod:`.tree`: :class:`Structure`, :class:`Heading`, :class:`Table`;
* readers: :mod:`.markdown` (markdown-it-py), :mod:`.html` (html.parser), :mod:`.pdf`
  (pypdf), chosen by file type in :mod:`.reading`;
* :mod:`.ordinals`: the number in a heading ("Chapter 3" → 3);
* :mod:`.sections`: the section tree and the units that become parents;
* :mod:`.builder`: the rows.
"""

from parrot_parents.loaders.structure.ordinals import section_ordinal
from parrot_parents.loaders.structure.tree import Heading, Structure, Table

__all__ = ["Heading", "Structure", "Table", "section_ordinal"]

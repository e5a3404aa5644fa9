"""Structure-aware hierarchy: readers that find headings and tables with exact offsets,
and the builder that turns sections into parents and table rows into children (each
module's job: docs/architecture.md, "Structure-aware hierarchy").
"""

from parrot_parents.loaders.structure.ordinals import section_ordinal
from parrot_parents.loaders.structure.tree import Heading, Structure, Table

__all__ = ["Heading", "Structure", "Table", "section_ordinal"]

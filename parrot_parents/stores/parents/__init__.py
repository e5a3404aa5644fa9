"""Parent searchers: resolve a child's ``parent_document_id`` to its parent.

The names below load on first use (:mod:`parrot_parents.lazy`).
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__all__ = ["AbstractParentSearcher", "InTableParentSearcher"]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher
    from parrot_parents.stores.parents.in_table import InTableParentSearcher

"""Parent searchers: resolve a child's ``parent_document_id`` to its parent."""

from parrot_parents.stores.parents.abstract import AbstractParentSearcher
from parrot_parents.stores.parents.in_table import InTableParentSearcher

__all__ = ["AbstractParentSearcher", "InTableParentSearcher"]

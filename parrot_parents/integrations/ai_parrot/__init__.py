"""parrot-parents inside ai-parrot (optional extra ``parrot-parents[ai-parrot]``).

Importing this package registers two names in ai-parrot's own registries:

* the vector store ``parrot_parents`` (:class:`ParrotParentsStore`), so a bot row's
  ``vector_store_config = {"name": "parrot_parents", "table": "my_docs"}`` searches a
  parrot-parents collection through ai-parrot's ``configure_store``;
* the parent searcher type ``parrot_parents`` (:class:`ParrotParentsSearcher`), so
  ``parent_searcher_config = {"type": "parrot_parents"}`` resolves through ai-parrot's
  ``create_parent_searcher``.

:class:`ParentChildMixin` runs the whole pipeline inside any ai-parrot bot class, and
:func:`ingest_documents` moves ai-parrot ``Document``s into a collection. Usage, setup
and figures: docs/integrations.md, "ai-parrot".

Raises:
    ImportError: ai-parrot is not installed (the message names the extra).
    ConfigurationError: ai-parrot cannot find its configuration root (``SITE_ROOT``).
"""

from __future__ import annotations

from parrot_parents.integrations.ai_parrot.framework import EXTRA
from parrot_parents.integrations.ai_parrot.ingest import ingest_documents
from parrot_parents.integrations.ai_parrot.mixin import ParentChildMixin
from parrot_parents.integrations.ai_parrot.reranker import FrameworkRerankerAdapter
from parrot_parents.integrations.ai_parrot.searcher import (
    TYPE_NAME,
    ParrotParentsSearcher,
    register,
)
from parrot_parents.integrations.ai_parrot.store import (
    STORE_NAME,
    ParrotParentsStore,
    register_store,
)

__all__ = [
    "EXTRA",
    "STORE_NAME",
    "TYPE_NAME",
    "FrameworkRerankerAdapter",
    "ParentChildMixin",
    "ParrotParentsSearcher",
    "ParrotParentsStore",
    "ingest_documents",
    "register",
    "register_store",
]

register()
register_store()

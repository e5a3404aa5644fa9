"""The one place that imports ai-parrot: its classes, or a clear error naming the extra.

ai-parrot's configuration layer (navconfig) resolves a project root on first use: the
``SITE_ROOT`` environment variable, else the folder above the active virtual environment,
and needs ``env/<ENV>/.env`` and ``etc/config.ini`` there (``kardex env create`` writes
them; docs/integrations.md, "ai-parrot"). Importing its bots also creates working folders
(``agents/``, ``logs/``, ``plugins/``...) in that root. Neither is this package's to do:
a missing root is reported here with what to set, before any of our models load.
"""

from __future__ import annotations

from parrot_parents.errors import ConfigurationError

__all__ = [
    "EXTRA",
    "PARENT_SEARCHER_TYPES",
    "AbstractBot",
    "AbstractStore",
    "ConfigError",
    "FrameworkDocument",
    "FrameworkParentSearcher",
    "FrameworkReranker",
    "FrameworkSearchResult",
    "create_parent_searcher",
    "supported_stores",
]

#: What to install for this integration.
EXTRA = "pip install 'parrot-parents[ai-parrot]'"


def _missing(exc: ImportError) -> ImportError:
    return ImportError(
        "parrot_parents.integrations.ai_parrot needs the ai-parrot package "
        f"(ai-parrot and ai-parrot-embeddings): {EXTRA} ({exc})"
    )


def _no_root(exc: Exception) -> ConfigurationError:
    return ConfigurationError(
        f"ai-parrot could not load its configuration: {exc}",
        hint="set SITE_ROOT to a folder holding env/<ENV>/.env and etc/config.ini "
        "(`kardex env create` writes them there), and ENV to that environment",
    )


try:
    from parrot.stores.models import Document as FrameworkDocument
    from parrot.stores.models import SearchResult as FrameworkSearchResult
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise _missing(exc) from exc

try:
    from navconfig.project import ProjectDetectionError
except ImportError as exc:  # pragma: no cover - ai-parrot depends on navconfig
    raise _missing(exc) from exc

try:
    from parrot.bots.abstract import AbstractBot
    from parrot.exceptions import ConfigError
    from parrot.rerankers.abstract import AbstractReranker as FrameworkReranker
    from parrot.stores import supported_stores
    from parrot.stores.abstract import AbstractStore
    from parrot.stores.parents.abstract import AbstractParentSearcher as FrameworkParentSearcher
    from parrot.stores.parents.factory import PARENT_SEARCHER_TYPES, create_parent_searcher
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise _missing(exc) from exc
except (OSError, ProjectDetectionError) as exc:
    # navconfig raises FileExistsError (an OSError) when the root lacks its files, and
    # its own error when it finds no root at all.
    raise _no_root(exc) from exc

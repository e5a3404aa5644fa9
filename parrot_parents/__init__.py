"""parrot-parents: parent-child ("small-to-big") retrieval on PostgreSQL + pgvector.

The main names are importable from here; each is loaded on first use, so that
``import parrot_parents`` (and ``parrot-parents --help``) stays fast::

    from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore, TextLoader

    store = PgVectorStore(table="my_docs")
    TextLoader("docs/").ingest_sync(store)
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
    context, meta = bot.get_vector_context_sync("How will I be paid?", budget=2000)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

__version__ = "0.1.0"

__all__ = [
    "AbstractBot",
    "AbstractParentSearcher",
    "AbstractReranker",
    "AbstractStore",
    "BotManager",
    "Chatbot",
    "ConfigurationError",
    "CrossEncoderReranker",
    "ExpansionMode",
    "InTableParentSearcher",
    "LateChunkingEmbedder",
    "MilvusParentSearcher",
    "MilvusStore",
    "ParrotParentsError",
    "Passage",
    "PgVectorStore",
    "Retrieval",
    "RetrievalMeta",
    "RetrievalOptions",
    "Retriever",
    "SentenceTransformerEmbeddings",
    "StoreError",
    "TextLoader",
    "__version__",
    "run_sync",
]


__getattr__, __dir__ = lazy_exports(__name__, globals())


if TYPE_CHECKING:
    from parrot_parents.bots.abstract import AbstractBot
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.bots.manager import BotManager
    from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.errors import ConfigurationError, ParrotParentsError, StoreError
    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.rerankers.abstract import AbstractReranker
    from parrot_parents.rerankers.cross_encoder import CrossEncoderReranker
    from parrot_parents.retrieval.meta import RetrievalMeta
    from parrot_parents.retrieval.modes import ExpansionMode
    from parrot_parents.retrieval.options import RetrievalOptions
    from parrot_parents.retrieval.passages import Passage
    from parrot_parents.retrieval.pipeline import Retrieval, Retriever
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.milvus.parents import MilvusParentSearcher
    from parrot_parents.stores.milvus.store import MilvusStore
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher
    from parrot_parents.stores.parents.in_table import InTableParentSearcher
    from parrot_parents.stores.postgres import PgVectorStore
    from parrot_parents.sync import run_sync

"""parrot-parents: parent-child ("small-to-big") retrieval on PostgreSQL + pgvector."""

__version__ = "0.1.0"

__all__ = ["__version__"]

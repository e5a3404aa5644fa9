"""Where a Milvus connection's details come from when code does not pass them: for bot
rows of type ``milvus`` and the command line's ``--store milvus:URI``. A module of its
own, so that reading the names imports nothing of the backend."""

__all__ = ["MILVUS_TOKEN_ENV", "MILVUS_URI_ENV"]

#: Milvus URI used by bot rows of type ``milvus`` (the row never names a URI or path).
MILVUS_URI_ENV = "PARROT_PARENTS_MILVUS_URI"
#: Token of that Milvus (``user:password`` or an API key).
MILVUS_TOKEN_ENV = "PARROT_PARENTS_MILVUS_TOKEN"

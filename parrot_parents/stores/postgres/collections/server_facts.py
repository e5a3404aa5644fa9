"""What a server offers the collections made on it, as ``parrot-parents doctor`` reports it:
its version and preloaded libraries, the extensions the product can use, and the lexical
backend a new collection gets there. Every fact is read, none is changed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from parrot_parents.stores.postgres.collections.partitions import partitioned_collections
from parrot_parents.stores.postgres.collections.setup import ExtensionVersions
from parrot_parents.stores.postgres.connections.engine import make_engine, store_errors
from parrot_parents.stores.postgres.search.bm25_guard import describe_guard, read_superuser
from parrot_parents.stores.postgres.search.bm25_index import bm25_unavailable, bm25_unsafe

__all__ = ["EXTENSIONS", "ServerFacts", "server_facts"]

#: The extensions reported: pgvector (required), and those the product can use.
EXTENSIONS = ("vector", "pg_textsearch", "vectorscale")


@dataclass
class ServerFacts:
    """A server's facts; ``problems`` is empty when the product can use it.

    Attributes:
        server: ``version``, ``preload`` (``shared_preload_libraries``),
            ``lexical_backend`` (``"pg_textsearch"`` or ``"sql"``) and ``bm25_guard``
            (what the store does to a ``bm25`` index here, one line:
            :func:`~parrot_parents.stores.postgres.search.bm25_guard.describe_guard`).
        extensions: for each of :data:`EXTENSIONS`, ``library`` (the server's version,
            None: not available) and ``in_this_database`` (None: not created); for
            pg_textsearch also ``preloaded``.
    """

    server: dict[str, Any] = field(default_factory=dict)
    extensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def server_facts(dsn: str | None) -> ServerFacts:
    """Read the facts of the server at ``dsn`` (None: the environment's, else the embedded
    server, which is started for it).

    Raises:
        StoreError: the server cannot be reached or refuses the reads.
    """
    facts = ServerFacts()
    engine = await make_engine(dsn, pool_size=1)
    try:
        async with store_errors("reading the server's facts"), engine.connect() as conn:
            facts.server["version"] = (await conn.execute(text("SHOW server_version"))).scalar()
            facts.server["preload"] = (
                await conn.execute(text("SHOW shared_preload_libraries"))
            ).scalar()
            rows = await conn.execute(
                text(
                    "SELECT name, default_version, installed_version"
                    " FROM pg_available_extensions WHERE name = ANY(:names)"
                ),
                {"names": list(EXTENSIONS)},
            )
            found = {r[0]: (r[1], r[2]) for r in rows}
            why = await conn.run_sync(lambda c: bm25_unavailable(c) or bm25_unsafe(c))
            superuser = await conn.run_sync(read_superuser)
            partitioned = await conn.run_sync(partitioned_collections)
    finally:
        await engine.dispose()
    facts.server["lexical_backend"] = "sql" if why else "pg_textsearch"
    facts.server["partitioned"] = partitioned
    default, installed = found.get("pg_textsearch", (None, None))
    shown = installed or default
    version = None if shown is None else tuple(int(p) for p in re.findall(r"\d+", shown)[:3])
    facts.server["bm25_guard"] = describe_guard(version, superuser)
    if why:
        facts.notes.append(f"new collections rank BM25 in SQL, not with pg_textsearch: {why}")
    preload = {p.strip() for p in str(facts.server["preload"] or "").split(",")}
    for name in EXTENSIONS:
        library, installed = found.get(name, (None, None))
        entry: dict[str, Any] = {"library": library, "in_this_database": installed}
        if name == "pg_textsearch" and library is not None:
            entry["preloaded"] = name in preload
        facts.extensions[name] = entry
    vector = facts.extensions["vector"]
    if vector["library"] is None:
        facts.problems.append("the server has no pgvector library (CREATE EXTENSION vector)")
    elif vector["in_this_database"] is not None:
        note = ExtensionVersions(vector["in_this_database"], vector["library"]).note()
        if note:
            facts.notes.append(note)
    return facts

"""Round trips of one query, counted on the wire (issue 11).

A proxy between the store and PostgreSQL (``tests/stores/wire.py``) counts the messages
that end a round trip (``Sync`` and simple ``Query``). Each call runs twice and the second
is counted (the first prepares statements and sets the session). The query vector is
given, so only the database's round trips are counted.

Compare two checkouts in one sitting (``--src``: the product code of another checkout,
counted through this tree's proxy)::

    python -m benchmarks run round_trips --src /path/to/old/checkout
    python -m benchmarks run round_trips
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import subprocess
import uuid
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from benchmarks.common import REPO_ROOT, child
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embedded.server import resolve_dsn
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.engine import make_engine

WIRE = REPO_ROOT / "tests" / "stores" / "wire.py"

DOC = "\n\n".join(
    f"Section {i}. The {w} policy says employees may claim {w} costs up to {i * 10} euros. "
    f"Claims for {w} need a receipt within {i} days."
    for i, w in enumerate(["travel", "meal", "phone", "training", "parking", "book"] * 2)
)


def _proxy_class() -> Any:
    spec = importlib.util.spec_from_file_location("wire", WIRE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RoundTripProxy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=None, help="count this checkout's product code")
    args = ap.parse_args(argv)
    if args.src is not None:
        cmd, env = child(__name__, [], args.src)
        return subprocess.call(cmd, env=env)
    asyncio.run(count())
    return 0


async def count() -> None:
    """Print the table: each call's round trips and the messages that ended them."""
    proxy = _proxy_class()(resolve_dsn(None))
    engine = await make_engine(await proxy.start(), pool_size=1, max_overflow=0)
    store = PgVectorStore(table="rt_" + uuid.uuid4().hex[:8], engine=engine)
    await store.connect()
    await TextLoader(child_chunk_size=120).chunk_documents(
        [Document(page_content=DOC, metadata={"document_id": "p"})],
        vector_store=store,
        parent_chunk_threshold_tokens=800,
        parent_chunk_size_tokens=800,
        parent_chunk_overlap_tokens=0,
    )
    vector = await store.embedding.aembed_query("phone costs")

    class Given:
        async def aembed_query(self, text: str) -> list[float]:
            return vector

    store.embedding = Given()  # type: ignore[assignment]
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    calls = {
        "similarity_search_by_vector": lambda: store.similarity_search_by_vector(vector, limit=5),
        "get_vector_context, parent": lambda: bot.retrieve(
            "phone costs", expand_to_parent=True, limit=4
        ),
        "get_vector_context, window:1": lambda: bot.retrieve(
            "phone costs", expand_to_parent=True, mode="window:1", limit=4
        ),
    }
    print("| call | round trips | messages |\n|---|---:|---|")
    try:
        for name, call in calls.items():
            await call()
            proxy.reset()
            await call()
            print(f"| {name} | {proxy.round_trips} | {''.join(proxy.kinds)} |")
    finally:
        await store.drop()
        await store.close()
        await engine.dispose()
        await proxy.stop()

"""From a parsed spec to what ingestion needs: the indexer, its model, its report.

The edges (``parrot-parents ingest``/``eval``, benchmarks) call :func:`indexer_for`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from parrot_parents.errors import LLMNotConfiguredError
from parrot_parents.llm.client import BASE_URL_ENV, MODEL_ENV, ChatCompletionsClient
from parrot_parents.loaders.extractive import ExtractiveIndexer
from parrot_parents.loaders.indexing import ChunkIndexer
from parrot_parents.strategies.cache import PromptCache
from parrot_parents.strategies.guarded import ChatClient, GuardedModel
from parrot_parents.strategies.indexer import StrategyIndexer
from parrot_parents.strategies.spec import StrategySpec

__all__ = ["collection_record", "free_report", "indexer_for"]


def indexer_for(
    spec: StrategySpec,
    *,
    client: ChatClient | None = None,
    cache: PromptCache | None = None,
    concurrency: int = 4,
) -> ChunkIndexer | None:
    """The indexer of ``spec``; None for the four free strategies (nothing to index).

    ``contextual:extractive`` gets the loaders' own
    :class:`~parrot_parents.loaders.extractive.ExtractiveIndexer`, the one ``TextLoader()``
    uses by default, so that every way in writes the same rows.

    Args:
        spec: the parsed strategy.
        client: the chat client; None: one from the environment (model-backed only). A
            spec naming ``model=`` sends that model name instead of the client's.
        cache: the reply cache; None: the default file (:func:`default_cache_path`).
        concurrency: model calls in flight at once.

    Raises:
        LLMNotConfiguredError: a model-backed strategy and no client, given or configured.
    """
    if not spec.indexes_rows:
        return None
    if not spec.needs_model:
        return ExtractiveIndexer()
    owned = client is None
    if client is None:
        env_client = ChatCompletionsClient.from_env()
        if env_client is None:
            raise LLMNotConfiguredError(
                f"strategy {str(spec)!r} calls a model, and none is configured",
                hint=f"set {BASE_URL_ENV} and {MODEL_ENV} (any OpenAI-compatible server: "
                "llama.cpp, vLLM, Ollama), or use contextual:extractive",
            )
        if spec.model:
            settings = dataclasses.replace(env_client.settings, model=spec.model)
            env_client = ChatCompletionsClient(settings)
        client = env_client
    model = GuardedModel(
        client,
        model=spec.model,
        cache=cache if cache is not None else PromptCache(),
        concurrency=concurrency,
        owns_client=owned,
    )
    return StrategyIndexer(spec, model)


def free_report(spec: StrategySpec, children: int, parents: int) -> dict[str, Any]:
    """The report of a free strategy: nothing enriched, no model call, and its
    ``expansion`` (searched units per retrievable unit): children per parent for
    ``parent-document``, where the parent is what comes back, else 1; None when nothing
    was written."""
    report = ChunkIndexer(str(spec), "context").report()
    report["expansion"] = 1.0 if children or parents else None
    if spec.name == "parent-document" and parents:
        report["expansion"] = round(children / parents, 4)
    return report


def collection_record(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A collection's totals from its per-document records
    (:meth:`~parrot_parents.stores.postgres.PgVectorStore.ingestion_records`):
    ``strategies`` used, ``enriched`` of ``of``, ``indexed_rows``, ``documents``, and
    ``partial`` when some chunk or document stayed plain."""
    enriched = sum(int(r.get("enriched", 0)) for r in records.values())
    of = sum(int(r.get("of", 0)) for r in records.values())
    return {
        "strategies": sorted({str(r.get("strategy")) for r in records.values()}),
        "documents": len(records),
        "enriched": enriched,
        "of": of,
        "partial": enriched < of,
        "indexed_rows": sum(int(r.get("indexed_rows", 0)) for r in records.values()),
    }

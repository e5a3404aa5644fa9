"""OpenAPI 3.1 description of the HTTP service.

:func:`build_spec` derives the request schemas from the pydantic models the service
validates with, so the description cannot drift from the validation. The same document is
shipped as ``openapi.json`` and ``openapi.yaml`` next to this module; regenerate both with
``python -m parrot_parents.server.openapi`` (a test checks that they are current).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from parrot_parents import __version__
from parrot_parents.bots.settings import BotSettings
from parrot_parents.server.schemas import AskRequest, ContextRequest

__all__ = ["build_spec", "shipped_yaml"]

_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": _json(_ref("Error"))}


_PASSAGE = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "text": {"type": "string"},
        "source": {"type": ["string", "null"]},
        "document_id": {"type": ["string", "null"]},
        "start_index": {"type": ["integer", "null"], "description": "character offset"},
        "end_index": {"type": ["integer", "null"], "description": "character offset"},
        "score": {
            "type": ["number", "null"],
            "description": "the best hit's search score, higher is better: the fused "
            "(weighted RRF) value in hybrid mode, the cosine similarity in dense mode, null "
            "in lexical mode",
        },
        "dense_rank": {
            "type": ["integer", "null"],
            "description": "the best hit's 1-based rank in the dense branch (null: not in it)",
        },
        "dense_score": {
            "type": ["number", "null"],
            "description": "the best hit's cosine similarity (null: not in the dense branch)",
        },
        "lexical_rank": {
            "type": ["integer", "null"],
            "description": "the best hit's 1-based rank in the lexical (BM25) branch "
            "(null: not in it)",
        },
        "lexical_score": {
            "type": ["number", "null"],
            "description": "the best hit's BM25 score (null: not in the lexical branch)",
        },
        "kind": {"enum": ["child", "parent", "parent_chunk", "window", "merged"]},
        "child_ids": {"type": "array", "items": {"type": "string"}},
        "section_path": {
            "type": "array",
            "items": {"type": "string"},
            "description": "heading titles from the document's root to the passage's "
            "section (a parent's own section, a window's hit's); empty when unknown",
        },
        "section_ordinal": {
            "type": ["integer", "null"],
            "description": "the number in the section's heading ('4. Pay and Payroll': 4)",
        },
        "ordinal": {
            "type": ["integer", "null"],
            "description": "position of the section in the document (1-based, 0 before "
            "the first heading)",
        },
        "layer": {
            "type": ["string", "null"],
            "description": "section, table_row, table or document",
        },
        "page": {
            "type": ["integer", "null"],
            "description": "first page (1-based) for sources with pages (PDF), else null",
        },
        "page_end": {
            "type": ["integer", "null"],
            "description": "last page (1-based) for sources with pages (PDF), else null",
        },
    },
}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "hint": {"type": "string"},
        "details": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "message": {"type": "string"}},
            },
        },
        "request_id": {"type": "string"},
    },
}
_CONTEXT_RESPONSE = {
    "type": "object",
    "properties": {
        "bot": {"type": "string"},
        "context": {"type": "string", "description": "passages joined under source headers"},
        "passages": {"type": "array", "items": _ref("Passage")},
        "meta": {
            "type": "object",
            "description": "children, parents, fallbacks, timings_ms; prf.terms when "
            "pseudo-relevance feedback ran; lexical.backend (pg_textsearch or sql, with "
            "lexical.why when not the collection's own) when a lexical branch ran; "
            "filter_plan (estimate, search: exact, index, 'index, then exact', 'exact, "
            "then index' or 'exact, then index, then exact', exact_below, children, "
            "sampled) when a metadata filter was planned",
        },
    },
}
_ASK_RESPONSE = {
    "type": "object",
    "properties": {
        "bot": {"type": "string"},
        "answer": {"type": "string"},
        "passages": {"type": "array", "items": _ref("Passage")},
        "meta": {"type": "object", "description": "retrieval meta plus meta.llm"},
    },
}
_DOCUMENT_ROW = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "kind": {"enum": ["parent", "parent_chunk", "child"]},
        "start_index": {"type": ["integer", "null"], "description": "character offset"},
        "end_index": {"type": ["integer", "null"], "description": "character offset"},
        "parent_document_id": {"type": ["string", "null"], "description": "a child's parent"},
        "chunk_index": {"type": ["integer", "null"]},
        "length": {"type": "integer", "description": "characters of the row's text"},
    },
}
_DOCUMENT = {
    "type": "object",
    "properties": {
        "bot": {"type": "string"},
        "collection": {"type": "string"},
        "document_id": {"type": "string"},
        "counts": {
            "type": "object",
            "description": "rows per kind",
            "properties": {k: {"type": "integer"} for k in ("parent", "parent_chunk", "child")},
        },
        "rows": {
            "type": "array",
            "description": "parents first, then by start_index and id; no row text",
            "items": _ref("DocumentRow"),
        },
    },
}
_BOT = {
    "allOf": [
        _ref("BotSettings"),
        {
            "type": "object",
            "properties": {
                "status": {"enum": ["loaded", "failed", "disabled"]},
                "error": {"type": "string"},
                "created_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"},
            },
        },
    ]
}
_HEALTH = {
    "type": "object",
    "properties": {
        "status": {"enum": ["ok", "degraded", "unavailable"]},
        "database": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "bots": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"parent_searcher": {"type": ["boolean", "null"]}},
            },
        },
        "failed_bots": {"type": "array", "items": {"type": "string"}},
    },
}
_LIVENESS = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"enum": ["ok", "unavailable"]}},
}
_COLLECTION = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "schema": {"type": "string"},
        "children": {"type": "integer", "description": "child rows (the searched units)"},
        "parents": {"type": "integer", "description": "parent rows"},
        "indexed": {"type": "integer", "description": "rows an ingestion strategy wrote"},
        "documents": {
            "type": ["integer", "null"],
            "description": "documents-table rows (null: the collection has no such table)",
        },
        "dimension": {"type": ["integer", "null"], "description": "embedding length"},
        "embedding_model": {
            "type": ["string", "null"],
            "description": "the model the collection records (null: none recorded)",
        },
        "model_fingerprint": {
            "type": ["string", "null"],
            "description": "12 hex characters identifying the recorded model's vectors",
        },
        "reembedding": {
            "type": "boolean",
            "description": "a `reindex --model` pass is unfinished",
        },
        "strategies": {"type": "array", "items": {"type": "string"}},
        "lexical_backend": {
            "type": ["string", "null"],
            "description": "what ranks BM25: pg_textsearch (its bm25 index) or sql; null "
            "without a lexical index",
        },
        "text_search_config": {"type": ["string", "null"]},
    },
}
_DOCUMENT_INFO = {
    "type": "object",
    "properties": {
        "document_id": {"type": "string"},
        "source": {"type": ["string", "null"]},
        "characters": {
            "type": ["integer", "null"],
            "description": "length of the text in characters (null: no documents-table row)",
        },
        "children": {"type": "integer"},
        "parents": {"type": "integer"},
        "ingested_at": {"type": ["string", "null"], "format": "date-time"},
    },
}
_DELETE_REQUEST = {
    "type": "object",
    "required": ["document_ids"],
    "additionalProperties": False,
    "properties": {
        "document_ids": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1000,
            "items": {"type": "string", "minLength": 1, "maxLength": 1024},
        }
    },
}
_DELETE_REPORT = {
    "type": "object",
    "properties": {
        "collection": {"type": "string"},
        "deleted": {
            "type": "object",
            "description": "rows removed, by document id",
            "additionalProperties": {"type": "integer"},
        },
        "unknown": {
            "type": "array",
            "description": "ids that name no document",
            "items": {"type": "string"},
        },
    },
}

_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_COLLECTION_NAME = {
    "name": "collection",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
}
_FORCE = {
    "name": "force",
    "in": "query",
    "required": False,
    "description": "true: accept a collection that does not exist yet",
    "schema": {"enum": ["true", "false"]},
}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
_COMMON = {
    "401": _error("missing or wrong bearer token (when the server has one)"),
    "404": _error("no bot of that name, or its collection was dropped"),
}


def _op(summary: str, responses: dict[str, Any], body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": _AUTH, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    return op


def _ok(schema_name: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": _json(_ref(schema_name))}


@cache
def build_spec() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    schemas = {
        m.__name__: m.model_json_schema(ref_template=_REF)
        for m in (ContextRequest, AskRequest, BotSettings)
    }
    put = dict(schemas["BotSettings"], required=["collection"], title="BotWrite")
    patch = {
        "type": "object",
        "description": "Any subset of the BotSettings keys; dotted keys such as "
        "'reranker_config.batch_size' change one key of a JSON config.",
    }
    schemas.update(
        BotWrite=put,
        BotPatch=patch,
        Passage=_PASSAGE,
        Error=_ERROR,
        ContextResponse=_CONTEXT_RESPONSE,
        AskResponse=_ASK_RESPONSE,
        Bot=_BOT,
        Health=_HEALTH,
        Liveness=_LIVENESS,
        Collection=_COLLECTION,
        DocumentInfo=_DOCUMENT_INFO,
        DeleteRequest=_DELETE_REQUEST,
        DeleteReport=_DELETE_REPORT,
        DocumentRow=_DOCUMENT_ROW,
        Document=_DOCUMENT,
    )
    bad = {"400": _error("malformed body: the message and details say what is wrong")}
    big = {"413": _error("body larger than the limit (64 KiB by default)")}
    unavailable = {
        "503": {
            **_error(
                "the bot failed to load (it is retried on the next request), or the "
                "database is unavailable (retry after Retry-After seconds)"
            ),
            "headers": {
                "Retry-After": {
                    "description": "seconds to wait (database outages)",
                    "schema": {"type": "integer"},
                }
            },
        }
    }
    writes = {"403": _error("bot writes are disabled (the server has no token)")}
    no_collection = {"404": _error("no collection of that name")}
    collection_writes = {"403": _error("collection writes are disabled (the server has no token)")}
    unknown_collection = {
        "400": _error(
            "malformed body, or a collection that does not exist (add ?force=true to save "
            "the bot anyway)"
        )
    }
    collection_paths = {
        "/api/v1/collections": {
            "get": _op(
                "The collections, with row counts, model, strategies and lexical backend",
                {
                    "200": {
                        "description": "OK",
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "collections": {"type": "array", "items": _ref("Collection")}
                                },
                            }
                        ),
                    },
                    "401": _COMMON["401"],
                    **unavailable,
                },
            )
        },
        "/api/v1/collections/{collection}": {
            "parameters": [_COLLECTION_NAME],
            "delete": _op(
                "Drop a collection and everything stored with it",
                {
                    "204": {"description": "dropped"},
                    "400": _error("not a valid collection name"),
                    "401": _COMMON["401"],
                    **collection_writes,
                    **no_collection,
                    **unavailable,
                },
            ),
        },
        "/api/v1/collections/{collection}/documents": {
            "parameters": [_COLLECTION_NAME],
            "get": _op(
                "A collection's documents: ids, sources, sizes and ingest times",
                {
                    "200": {
                        "description": "OK",
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "collection": {"type": "string"},
                                    "documents": {
                                        "type": "array",
                                        "items": _ref("DocumentInfo"),
                                    },
                                },
                            }
                        ),
                    },
                    "400": _error("not a valid collection name"),
                    "401": _COMMON["401"],
                    **no_collection,
                    **unavailable,
                },
            ),
        },
        "/api/v1/collections/{collection}/documents/delete": {
            "parameters": [_COLLECTION_NAME],
            "post": _op(
                "Delete documents (children, parents and documents-table rows) by id",
                {
                    "200": _ok("DeleteReport"),
                    **bad,
                    **big,
                    "401": _COMMON["401"],
                    **collection_writes,
                    **no_collection,
                    **unavailable,
                },
                "DeleteRequest",
            ),
        },
        "/api/v1/collections/{collection}/documents/{document_id}": {
            "parameters": [
                _COLLECTION_NAME,
                {
                    "name": "document_id",
                    "in": "path",
                    "required": True,
                    "description": "URL-encoded; at most 1024 bytes of UTF-8",
                    "schema": {"type": "string", "maxLength": 1024},
                },
            ],
            "delete": _op(
                "Delete one document",
                {
                    "204": {"description": "deleted"},
                    **bad,
                    "401": _COMMON["401"],
                    **collection_writes,
                    "404": _error("no collection of that name, or no document of that id"),
                    **unavailable,
                },
            ),
        },
    }
    bot_path = {
        "parameters": [_NAME],
        "get": _op("One bot's row and load status", {"200": _ok("Bot"), **_COMMON}),
        "put": {
            **_op(
                "Create a bot, or replace its settings",
                {
                    "200": _ok("Bot"),
                    "201": _ok("Bot", "created"),
                    **unknown_collection,
                    **writes,
                    **_COMMON,
                },
                "BotWrite",
            ),
            "parameters": [_FORCE],
        },
        "patch": {
            **_op(
                'Change some settings, e.g. {"expand_to_parent": true}',
                {"200": _ok("Bot"), **unknown_collection, **writes, **_COMMON},
                "BotPatch",
            ),
            "parameters": [_FORCE],
        },
        "delete": _op("Remove a bot", {"204": {"description": "removed"}, **writes, **_COMMON}),
    }
    paths = {
        "/health": {
            "get": {
                "summary": "Liveness: whether the service is up (no token needed, no bot names)",
                "security": [],
                "responses": {
                    "200": _ok("Liveness", "up: the database answers"),
                    "503": _ok("Liveness", "the database does not answer"),
                },
            }
        },
        "/api/v1/health": {
            "get": _op(
                "Database and each bot's parent-searcher readiness",
                {
                    "200": _ok("Health", "the database is up"),
                    "401": _COMMON["401"],
                    "503": _ok("Health", "the database is down"),
                },
            )
        },
        "/api/v1/bots": {
            "get": _op(
                "The bots, loaded and failed",
                {
                    "200": {
                        "description": "OK",
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {"bots": {"type": "array", "items": _ref("Bot")}},
                            }
                        ),
                    },
                    "401": _COMMON["401"],
                },
            )
        },
        "/api/v1/bots/{name}": bot_path,
        "/api/v1/bots/{name}/context": {
            "parameters": [_NAME],
            "post": _op(
                "Retrieve the passages for a question",
                {"200": _ok("ContextResponse"), **bad, **big, **_COMMON, **unavailable},
                "ContextRequest",
            ),
        },
        "/api/v1/bots/{name}/ask": {
            "parameters": [_NAME],
            "post": _op(
                "Answer a question with the LLM, from the bot's passages",
                {
                    "200": _ok("AskResponse"),
                    **bad,
                    **big,
                    **_COMMON,
                    "501": _error("no LLM is configured"),
                    "502": _error("the LLM request failed"),
                    **unavailable,
                },
                "AskRequest",
            ),
        },
        "/api/v1/bots/{name}/documents/{document_id}": {
            "parameters": [
                _NAME,
                {
                    "name": "document_id",
                    "in": "path",
                    "required": True,
                    "description": "the document_id of the rows (URL-encoded; at most 1024 "
                    "bytes of UTF-8)",
                    "schema": {"type": "string", "maxLength": 1024},
                },
            ],
            "get": _op(
                "One document's stored hierarchy (the inspector's document view)",
                {
                    "200": _ok("Document"),
                    **bad,
                    "401": _COMMON["401"],
                    "404": _error("no bot of that name, or no rows of that document"),
                    **unavailable,
                },
            ),
        },
        "/api/v1/reload": {
            "post": _op("Rebuild every bot from its row now", {"200": {"description": "OK"}})
        },
        **collection_paths,
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "parrot-parents",
            "version": __version__,
            "description": "Parent-child retrieval bots over HTTP. Send "
            "'Authorization: Bearer <token>' when the server was started with a token.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def shipped_yaml() -> str:
    """The ``openapi.yaml`` file shipped with the package."""
    return (resources.files(__package__) / "openapi.yaml").read_text(encoding="utf-8")


def write_files(directory: Path | None = None) -> None:
    """Write ``openapi.json`` and ``openapi.yaml`` (needs PyYAML)."""
    import yaml

    out = directory or Path(__file__).parent
    spec = json.loads(json.dumps(build_spec()))  # no shared objects: no YAML anchors
    (out / "openapi.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    (out / "openapi.yaml").write_text(
        yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
    )


if __name__ == "__main__":
    write_files()

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


def _field(kind: str, description: str | None = None, *, null: bool = False) -> dict[str, Any]:
    field: dict[str, Any] = {"type": [kind, "null"] if null else kind}
    if description is not None:
        field["description"] = description
    return field


def _array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    array: dict[str, Any] = {"type": "array"}
    if description is not None:
        array["description"] = description
    array["items"] = items
    return array


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


_STRING = _field("string")
_OFFSET = _field("integer", "character offset", null=True)
_PASSAGE = _object(
    id=_STRING,
    text=_STRING,
    source=_field("string", null=True),
    document_id=_field("string", null=True),
    start_index=_OFFSET,
    end_index=_OFFSET,
    score=_field(
        "number",
        "the best hit's search score, higher is better: the fused (weighted RRF) value in "
        "hybrid mode, the cosine similarity in dense mode, null in lexical mode",
        null=True,
    ),
    dense_rank=_field(
        "integer", "the best hit's 1-based rank in the dense branch (null: not in it)", null=True
    ),
    dense_score=_field(
        "number", "the best hit's cosine similarity (null: not in the dense branch)", null=True
    ),
    lexical_rank=_field(
        "integer",
        "the best hit's 1-based rank in the lexical (BM25) branch (null: not in it)",
        null=True,
    ),
    lexical_score=_field(
        "number", "the best hit's BM25 score (null: not in the lexical branch)", null=True
    ),
    kind={"enum": ["child", "parent", "parent_chunk", "window", "merged"]},
    child_ids=_array(_STRING),
    section_path=_array(
        _STRING,
        "heading titles from the document's root to the passage's section (a parent's own "
        "section, a window's hit's); empty when unknown",
    ),
    section_ordinal=_field(
        "integer", "the number in the section's heading ('4. Pay and Payroll': 4)", null=True
    ),
    ordinal=_field(
        "integer",
        "position of the section in the document (1-based, 0 before the first heading)",
        null=True,
    ),
    layer=_field("string", "section, table_row, table or document", null=True),
    page=_field(
        "integer", "first page (1-based) for sources with pages (PDF), else null", null=True
    ),
    page_end=_field(
        "integer", "last page (1-based) for sources with pages (PDF), else null", null=True
    ),
)
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": _STRING,
        "hint": _STRING,
        "details": _array(_object(key=_STRING, message=_STRING)),
        "request_id": _STRING,
    },
}
_CONTEXT_RESPONSE = _object(
    bot=_STRING,
    context=_field("string", "passages joined under source headers"),
    passages=_array(_ref("Passage")),
    meta=_field(
        "object",
        "children, parents, fallbacks, timings_ms; prf.terms when pseudo-relevance feedback "
        "ran; lexical.backend (pg_textsearch or sql, with lexical.why when not the "
        "collection's own) when a lexical branch ran; filter_plan (estimate, search: exact, "
        "index, 'index, then exact', 'exact, then index' or 'exact, then index, then exact', "
        "exact_below, children, sampled) when a metadata filter was planned",
    ),
)
_ASK_RESPONSE = _object(
    bot=_STRING,
    answer=_STRING,
    passages=_array(_ref("Passage")),
    meta=_field("object", "retrieval meta plus meta.llm"),
)
_ROW_KINDS = ("parent", "parent_chunk", "child")
_DOCUMENT_ROW = _object(
    id=_STRING,
    kind={"enum": list(_ROW_KINDS)},
    start_index=_OFFSET,
    end_index=_OFFSET,
    parent_document_id=_field("string", "a child's parent", null=True),
    chunk_index=_field("integer", null=True),
    length=_field("integer", "characters of the row's text"),
)
_DOCUMENT = _object(
    bot=_STRING,
    collection=_STRING,
    document_id=_STRING,
    counts={
        "type": "object",
        "description": "rows per kind",
        "properties": {k: _field("integer") for k in _ROW_KINDS},
    },
    rows=_array(_ref("DocumentRow"), "parents first, then by start_index and id; no row text"),
)
_DATE_TIME = {"type": "string", "format": "date-time"}
_BOT = {
    "allOf": [
        _ref("BotSettings"),
        _object(
            status={"enum": ["loaded", "failed", "disabled"]},
            error=_STRING,
            created_at=_DATE_TIME,
            updated_at=_DATE_TIME,
        ),
    ]
}
_HEALTH = _object(
    status={"enum": ["ok", "degraded", "unavailable"]},
    database=_object(ok=_field("boolean")),
    bots={
        "type": "object",
        "additionalProperties": _object(parent_searcher=_field("boolean", null=True)),
    },
    failed_bots=_array(_STRING),
)
_LIVENESS = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"enum": ["ok", "unavailable"]}},
}
_COLLECTION = _object(
    name=_STRING,
    schema=_STRING,
    children=_field("integer", "child rows (the searched units)"),
    parents=_field("integer", "parent rows"),
    indexed=_field("integer", "rows an ingestion strategy wrote"),
    documents=_field(
        "integer", "documents-table rows (null: the collection has no such table)", null=True
    ),
    dimension=_field("integer", "embedding length", null=True),
    embedding_model=_field(
        "string", "the model the collection records (null: none recorded)", null=True
    ),
    model_fingerprint=_field(
        "string", "12 hex characters identifying the recorded model's vectors", null=True
    ),
    reembedding=_field("boolean", "a `reindex --model` pass is unfinished"),
    strategies=_array(_STRING),
    lexical_backend=_field(
        "string",
        "what ranks BM25: pg_textsearch (its bm25 index) or sql; null without a lexical index",
        null=True,
    ),
    text_search_config=_field("string", null=True),
)
_DOCUMENT_INFO = _object(
    document_id=_STRING,
    source=_field("string", null=True),
    characters=_field(
        "integer", "length of the text in characters (null: no documents-table row)", null=True
    ),
    children=_field("integer"),
    parents=_field("integer"),
    ingested_at={"type": ["string", "null"], "format": "date-time"},
)
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
_DELETE_REPORT = _object(
    collection=_STRING,
    deleted={
        "type": "object",
        "description": "rows removed, by document id",
        "additionalProperties": _field("integer"),
    },
    unknown=_array(_STRING, "ids that name no document"),
)

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
_UNAUTHORIZED = _error("missing or wrong bearer token (when the server has one)")
_COMMON = {
    "401": _UNAUTHORIZED,
    "404": _error("no bot of that name, or its collection was dropped"),
}
_BAD = {"400": _error("malformed body: the message and details say what is wrong")}
_BIG = {"413": _error("body larger than the limit (64 KiB by default)")}
_UNAVAILABLE = {
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
_BOT_WRITES = {"403": _error("bot writes are disabled (the server has no token)")}
_COLLECTION_WRITES = {"403": _error("collection writes are disabled (the server has no token)")}
_NO_COLLECTION = {"404": _error("no collection of that name")}
_BAD_NAME = {"400": _error("not a valid collection name")}
_UNKNOWN_COLLECTION = {
    "400": _error(
        "malformed body, or a collection that does not exist (add ?force=true to save "
        "the bot anyway)"
    )
}


def _op(summary: str, responses: dict[str, Any], body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": _AUTH, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    return op


def _ok(schema: str | dict[str, Any], description: str = "OK") -> dict[str, Any]:
    content = _ref(schema) if isinstance(schema, str) else schema
    return {"description": description, "content": _json(content)}


def _document_id(description: str) -> dict[str, Any]:
    return {
        "name": "document_id",
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "maxLength": 1024},
    }


def _collection_paths() -> dict[str, Any]:
    return {
        "/api/v1/collections": {
            "get": _op(
                "The collections, with row counts, model, strategies and lexical backend",
                {
                    "200": _ok(_object(collections=_array(_ref("Collection")))),
                    "401": _UNAUTHORIZED,
                    **_UNAVAILABLE,
                },
            )
        },
        "/api/v1/collections/{collection}": {
            "parameters": [_COLLECTION_NAME],
            "delete": _op(
                "Drop a collection and everything stored with it",
                {
                    "204": {"description": "dropped"},
                    **_BAD_NAME,
                    "401": _UNAUTHORIZED,
                    **_COLLECTION_WRITES,
                    **_NO_COLLECTION,
                    **_UNAVAILABLE,
                },
            ),
        },
        "/api/v1/collections/{collection}/documents": {
            "parameters": [_COLLECTION_NAME],
            "get": _op(
                "A collection's documents: ids, sources, sizes and ingest times",
                {
                    "200": _ok(_object(collection=_STRING, documents=_array(_ref("DocumentInfo")))),
                    **_BAD_NAME,
                    "401": _UNAUTHORIZED,
                    **_NO_COLLECTION,
                    **_UNAVAILABLE,
                },
            ),
        },
        "/api/v1/collections/{collection}/documents/delete": {
            "parameters": [_COLLECTION_NAME],
            "post": _op(
                "Delete documents (children, parents and documents-table rows) by id",
                {
                    "200": _ok("DeleteReport"),
                    **_BAD,
                    **_BIG,
                    "401": _UNAUTHORIZED,
                    **_COLLECTION_WRITES,
                    **_NO_COLLECTION,
                    **_UNAVAILABLE,
                },
                "DeleteRequest",
            ),
        },
        "/api/v1/collections/{collection}/documents/{document_id}": {
            "parameters": [
                _COLLECTION_NAME,
                _document_id("URL-encoded; at most 1024 bytes of UTF-8"),
            ],
            "delete": _op(
                "Delete one document",
                {
                    "204": {"description": "deleted"},
                    **_BAD,
                    "401": _UNAUTHORIZED,
                    **_COLLECTION_WRITES,
                    "404": _error("no collection of that name, or no document of that id"),
                    **_UNAVAILABLE,
                },
            ),
        },
    }


def _bot_paths() -> dict[str, Any]:
    writes = {**_UNKNOWN_COLLECTION, **_BOT_WRITES, **_COMMON}
    return {
        "/api/v1/bots": {
            "get": _op(
                "The bots, loaded and failed",
                {"200": _ok(_object(bots=_array(_ref("Bot")))), "401": _UNAUTHORIZED},
            )
        },
        "/api/v1/bots/{name}": {
            "parameters": [_NAME],
            "get": _op("One bot's row and load status", {"200": _ok("Bot"), **_COMMON}),
            "put": {
                **_op(
                    "Create a bot, or replace its settings",
                    {"200": _ok("Bot"), "201": _ok("Bot", "created"), **writes},
                    "BotWrite",
                ),
                "parameters": [_FORCE],
            },
            "patch": {
                **_op(
                    'Change some settings, e.g. {"expand_to_parent": true}',
                    {"200": _ok("Bot"), **writes},
                    "BotPatch",
                ),
                "parameters": [_FORCE],
            },
            "delete": _op(
                "Remove a bot", {"204": {"description": "removed"}, **_BOT_WRITES, **_COMMON}
            ),
        },
        "/api/v1/bots/{name}/context": {
            "parameters": [_NAME],
            "post": _op(
                "Retrieve the passages for a question",
                {"200": _ok("ContextResponse"), **_BAD, **_BIG, **_COMMON, **_UNAVAILABLE},
                "ContextRequest",
            ),
        },
        "/api/v1/bots/{name}/ask": {
            "parameters": [_NAME],
            "post": _op(
                "Answer a question with the LLM, from the bot's passages",
                {
                    "200": _ok("AskResponse"),
                    **_BAD,
                    **_BIG,
                    **_COMMON,
                    "501": _error("no LLM is configured"),
                    "502": _error("the LLM request failed"),
                    **_UNAVAILABLE,
                },
                "AskRequest",
            ),
        },
        "/api/v1/bots/{name}/documents/{document_id}": {
            "parameters": [
                _NAME,
                _document_id(
                    "the document_id of the rows (URL-encoded; at most 1024 bytes of UTF-8)"
                ),
            ],
            "get": _op(
                "One document's stored hierarchy (the inspector's document view)",
                {
                    "200": _ok("Document"),
                    **_BAD,
                    "401": _UNAUTHORIZED,
                    "404": _error("no bot of that name, or no rows of that document"),
                    **_UNAVAILABLE,
                },
            ),
        },
    }


@cache
def build_spec() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    schemas = {
        m.__name__: m.model_json_schema(ref_template=_REF)
        for m in (ContextRequest, AskRequest, BotSettings)
    }
    schemas.update(
        BotWrite=dict(schemas["BotSettings"], required=["collection"], title="BotWrite"),
        BotPatch={
            "type": "object",
            "description": "Any subset of the BotSettings keys; dotted keys such as "
            "'reranker_config.batch_size' change one key of a JSON config.",
        },
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
                    "401": _UNAUTHORIZED,
                    "503": _ok("Health", "the database is down"),
                },
            )
        },
        **_bot_paths(),
        "/api/v1/reload": {
            "post": _op("Rebuild every bot from its row now", {"200": {"description": "OK"}})
        },
        **_collection_paths(),
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

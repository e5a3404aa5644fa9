"""OpenAPI 3.1 description of the HTTP service.

:func:`build_spec` derives the request schemas from the pydantic models the service
validates with, the catalog's answers from the dataclasses the routes serialise, and the
paths, methods and summaries from the route tables and their handlers' docstrings, so the
description cannot drift from the code. The same document is shipped as ``openapi.json``
and ``openapi.yaml`` next to this module; regenerate both with
``python -m parrot_parents.server.openapi`` (a test checks that they are current).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.web import RouteDef
from pydantic import TypeAdapter

from parrot_parents import __version__
from parrot_parents.bots.settings import BotSettings
from parrot_parents.server import catalog_routes, routes
from parrot_parents.server.middleware import json_response
from parrot_parents.server.schemas import (
    MAX_DOCUMENT_ID,
    AskRequest,
    ContextRequest,
    DeleteRequest,
)
from parrot_parents.stores.postgres.collections.catalog import (
    CollectionInfo,
    DeleteReport,
    DocumentInfo,
)
from parrot_parents.stores.results import DocumentRow

__all__ = ["build_spec", "openapi_routes", "shipped_yaml"]

_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


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


def _dataclass(cls: type, **extra: dict[str, Any]) -> dict[str, Any]:
    """The schema of a dataclass the routes answer with (its ``to_dict``), plus ``extra``
    properties the route adds around it."""
    schema = TypeAdapter(cls).json_schema(ref_template=_REF)
    schema["properties"] = {**extra, **schema["properties"]}
    return schema


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
        "exact_below, children, sampled) when a metadata filter was planned; scope (filter, "
        "withheld: ids expansion held back as outside it; partial_parents: parents inside it "
        "held back for a child outside it) when the bot has a scope",
    ),
)
_ASK_RESPONSE = _object(
    bot=_STRING,
    answer=_STRING,
    passages=_array(_ref("Passage")),
    meta=_field("object", "retrieval meta plus meta.llm"),
)
_DOCUMENT = _object(
    bot=_STRING,
    collection=_STRING,
    document_id=_STRING,
    counts={
        "type": "object",
        "description": "rows per kind",
        "properties": {k: _field("integer") for k in ("parent", "parent_chunk", "child")},
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
#: The schemas of the path parameters, by name: each path takes those its template names.
_PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "name": {"type": "string"},
    "collection": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
    "document_id": {
        "type": "string",
        "maxLength": MAX_DOCUMENT_ID,
        "description": f"URL-encoded; at most {MAX_DOCUMENT_ID} bytes of UTF-8",
    },
}
_FORCE = {
    "name": "force",
    "in": "query",
    "required": False,
    "description": "true: accept a collection that does not exist yet",
    "schema": {"enum": ["true", "false"]},
}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
#: The error answers the operations name, with status and description (and "unavailable").
_ERRORS = {
    "bad": ("400", "malformed body: the message and details say what is wrong"),
    "bad_name": ("400", "not a valid collection name"),
    "unknown_collection": (
        "400",
        "malformed body, or a collection that does not exist (add ?force=true to save "
        "the bot anyway)",
    ),
    "auth": ("401", "missing or wrong bearer token (when the server has one)"),
    "bot_writes": ("403", "bot writes are disabled (the server has no token)"),
    "collection_writes": ("403", "collection writes are disabled (the server has no token)"),
    "no_bot": ("404", "no bot of that name, or its collection was dropped"),
    "no_rows": ("404", "no bot of that name, or no rows of that document"),
    "no_collection": ("404", "no collection of that name"),
    "no_document": ("404", "no collection of that name, or no document of that id"),
    "big": ("413", "body larger than the limit (64 KiB by default)"),
    "no_llm": ("501", "no LLM is configured"),
    "llm": ("502", "the LLM request failed"),
}
#: "unavailable": the answer of a bot that failed to load, or of a database outage.
_UNAVAILABLE = {
    "description": "the bot failed to load (it is retried on the next request), or the "
    "database is unavailable (retry after Retry-After seconds)",
    "content": _json(_ref("Error")),
    "headers": {
        "Retry-After": {
            "description": "seconds to wait (database outages)",
            "schema": {"type": "integer"},
        }
    },
}


def _error(name: str) -> tuple[str, dict[str, Any]]:
    if name == "unavailable":
        return "503", _UNAVAILABLE
    status, description = _ERRORS[name]
    return status, {"description": description, "content": _json(_ref("Error"))}


def _op(
    answers: dict[str, Any],
    errors: str = "",
    body: str | None = None,
    query: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An operation behind the token: its answers, then the ``_ERRORS`` named in
    ``errors`` (space-separated), the request body schema ``body`` and a ``query``
    parameter."""
    responses = {**answers, **dict(_error(name) for name in errors.split())}
    op: dict[str, Any] = {"security": _AUTH, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    if query is not None:
        op["parameters"] = [query]
    return op


def _ok(
    schema: str | dict[str, Any] | None, description: str = "OK", status: str = "200"
) -> dict[str, Any]:
    """``{status: answer}``: ``schema`` names a component or is one (None: no body)."""
    if schema is None:
        return {status: {"description": description}}
    content = _ref(schema) if isinstance(schema, str) else schema
    return {status: {"description": description, "content": _json(content)}}


def _operations() -> dict[Callable[..., Any], dict[str, Any]]:
    """What each documented handler takes and answers; its summary is its docstring's
    first paragraph, its path and method those of its route."""
    bot_writes = "unknown_collection auth bot_writes no_bot"
    documents = _object(collection=_STRING, documents=_array(_ref("DocumentInfo")))
    return {
        routes.health: {
            "security": [],
            "responses": {
                **_ok("Liveness", "up: the database answers"),
                **_ok("Liveness", "the database does not answer", "503"),
            },
        },
        routes.bots_health: _op(
            {**_ok("Health", "the database is up"), **_ok("Health", "the database is down", "503")},
            "auth",
        ),
        routes.list_bots: _op(_ok(_object(bots=_array(_ref("Bot")))), "auth"),
        routes.get_bot: _op(_ok("Bot"), "auth no_bot"),
        routes.put_bot: _op(
            {**_ok("Bot"), **_ok("Bot", "created", "201")}, bot_writes, "BotWrite", _FORCE
        ),
        routes.patch_bot: _op(_ok("Bot"), bot_writes, "BotPatch", _FORCE),
        routes.delete_bot: _op(_ok(None, "removed", "204"), "auth bot_writes no_bot"),
        routes.reload: _op(_ok(None)),
        routes.context: _op(
            _ok("ContextResponse"), "bad auth no_bot big unavailable", "ContextRequest"
        ),
        routes.document_rows: _op(_ok("Document"), "bad auth no_rows unavailable"),
        routes.ask: _op(
            _ok("AskResponse"), "bad auth no_bot big no_llm llm unavailable", "AskRequest"
        ),
        catalog_routes.list_collections: _op(
            _ok(_object(collections=_array(_ref("Collection")))), "auth unavailable"
        ),
        catalog_routes.list_documents: _op(
            _ok(documents), "bad_name auth no_collection unavailable"
        ),
        catalog_routes.delete_documents: _op(
            _ok("DeleteReport"),
            "bad auth collection_writes no_collection big unavailable",
            "DeleteRequest",
        ),
        catalog_routes.delete_document: _op(
            _ok(None, "deleted", "204"), "bad auth collection_writes no_document unavailable"
        ),
        catalog_routes.drop_collection: _op(
            _ok(None, "dropped", "204"),
            "bad_name auth collection_writes no_collection unavailable",
        ),
    }


def _paths() -> dict[str, Any]:
    """The documented routes by path (without the pattern of a parameter), each after the
    parameters its template names."""
    operations = _operations()
    paths: dict[str, Any] = {}
    for route in [*routes.routes, *catalog_routes.catalog_routes]:
        if not isinstance(route, RouteDef) or route.handler not in operations:
            continue
        path = re.sub(r"{(\w+):[^}]*}", r"{\1}", route.path)
        names = re.findall(r"{(\w+)}", path)
        parameters = [
            {"name": n, "in": "path", "required": True, "schema": _PATH_PARAMETERS[n]}
            for n in names
        ]
        summary = " ".join((inspect.getdoc(route.handler) or "").split("\n\n")[0].split())
        paths.setdefault(path, {"parameters": parameters} if parameters else {})
        paths[path][route.method.lower()] = {
            "summary": summary.replace("``", "`"),
            **operations[route.handler],
        }
    return paths


@cache
def build_spec() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    schemas = {
        m.__name__: m.model_json_schema(ref_template=_REF)
        for m in (ContextRequest, AskRequest, DeleteRequest, BotSettings)
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
        Collection=_dataclass(CollectionInfo),
        DocumentInfo=_dataclass(DocumentInfo),
        DeleteReport=_dataclass(DeleteReport, collection=_STRING),
        DocumentRow=_dataclass(DocumentRow),
        Document=_DOCUMENT,
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "parrot-parents",
            "version": __version__,
            "description": "Parent-child retrieval bots over HTTP. Send "
            "'Authorization: Bearer <token>' when the server was started with a token.",
        },
        "paths": _paths(),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def shipped_yaml() -> str:
    """The ``openapi.yaml`` file shipped with the package."""
    return (resources.files(__package__) / "openapi.yaml").read_text(encoding="utf-8")


#: The routes that serve this description (behind the token, like every route but ``/health``).
openapi_routes = web.RouteTableDef()


@openapi_routes.get("/openapi.json")
async def openapi_json(request: web.Request) -> web.Response:
    """The OpenAPI 3.1 description of this service."""
    return json_response(build_spec())


@openapi_routes.get("/openapi.yaml")
async def openapi_yaml(request: web.Request) -> web.Response:
    """The same description as YAML (the file shipped with the package)."""
    return web.Response(text=shipped_yaml(), content_type="application/yaml")


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

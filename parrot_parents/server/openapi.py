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
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

from parrot_parents import __version__
from parrot_parents.bots.settings import NAME_PATTERN, BotSettings
from parrot_parents.server import catalog_routes, routes
from parrot_parents.server.middleware import BOT_NOT_LOADED, COLLECTION_MISSING, json_response
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
    "description": "Every error the service answers, from a bad token to a request line "
    "over the HTTP parser's limit, has this form.",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": _field("string", "what went wrong, for a person"),
        "code": _field(
            "string",
            "where the status alone does not say what to do: "
            f"'{COLLECTION_MISSING}' (a collection the request needs does not exist) or "
            f"'{BOT_NOT_LOADED}' (the bot's row did not load; details say why)",
        ),
        "hint": _field("string", "what to do about it"),
        "details": _array(_object(key=_STRING, message=_STRING), "one per bad key"),
        "request_id": _field("string", "the id the server logged the request under"),
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
        "exact_below, children, sampled; partition_index when a value's own indexes ranked, "
        "checked: the keys an exact ranking checked on the rows it read; anded: the keys "
        "an index plan's lexical branch read through their indexes) when a metadata "
        "filter was planned; scope (filter, "
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
_FAILED_BOT = {
    "type": "object",
    "description": "In the list of bots: an enabled row that did not load, with the reason.",
    "required": ["name", "status", "error"],
    "additionalProperties": False,
    "properties": {"name": _STRING, "status": {"const": "failed"}, "error": _STRING},
}
_RELOAD = _object(
    loaded=_array(_STRING, "the bots that loaded"),
    failed={
        "type": "object",
        "description": "the bots that did not load, with the reason",
        "additionalProperties": _STRING,
    },
    removed=_array(_STRING, "the bots no longer served (row deleted or disabled)"),
)
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
#: A UTF-8 character takes at most 4 bytes: the longest id a JSON Schema ``maxLength``
#: (which counts characters) can promise to fit in the service's limit in bytes.
_ID_CHARACTERS = MAX_DOCUMENT_ID // 4
_DOCUMENT_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": _ID_CHARACTERS,
    "pattern": "^[^\\x00]*$",
    "description": f"the service takes ids of up to {MAX_DOCUMENT_ID} bytes of UTF-8 (400 "
    f"past it); {_ID_CHARACTERS} characters always fit. In a path: URL-encoded, and the "
    "request line is limited to 8190 bytes",
}
#: The schemas of the path parameters, by name: each path takes those its template names.
_PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": NAME_PATTERN},
    "collection": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
    "document_id": _DOCUMENT_ID,
}
_FORCE = {
    "name": "force",
    "in": "query",
    "required": False,
    "description": "true: accept a collection that does not exist yet. Exactly 'true' or "
    "'false', lowercase (absent: false); any other value is a 400",
    "schema": {"type": "string", "enum": ["true", "false"]},
}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
#: What every operation may answer 400 for: the HTTP parser refuses a request line (the
#: URL) or a header over its limit before any route sees the request.
_UNREADABLE = "the request line or a header is over the HTTP parser's limit, or not HTTP"
#: The error answers the operations name, with status and description (and "unavailable").
_ERRORS = {
    "bad": (
        "400",
        f"malformed body or parameter: the message and details say what; or {_UNREADABLE}",
    ),
    "bad_name": ("400", f"not a valid collection name; or {_UNREADABLE}"),
    "auth": ("401", "missing or wrong bearer token (when the server has one)"),
    "bot_writes": ("403", "bot writes are disabled (the server has no token)"),
    "collection_writes": ("403", "collection writes are disabled (the server has no token)"),
    "no_bot": ("404", "no bot of that name"),
    "no_rows": ("404", "no bot of that name, or no rows of that document"),
    "no_collection": ("404", "no collection of that name"),
    "no_document": ("404", "no collection of that name, or no document of that id"),
    "slow": ("408", "the body did not arrive within the body timeout (30 s by default)"),
    "not_loaded": (
        "409",
        f"the bot did not load (code '{BOT_NOT_LOADED}': details say why, e.g. its collection "
        f"does not exist), or its collection was dropped since (code '{COLLECTION_MISSING}'). "
        "It lasts until the row is fixed or the collection ingested: not worth a retry",
    ),
    "unknown_collection": (
        "409",
        f"the body names a collection that does not exist (code '{COLLECTION_MISSING}'); add "
        "?force=true to save the bot anyway",
    ),
    "big": ("413", "body larger than the limit (64 KiB by default)"),
    "media": ("415", "a body sent with another Content-Type than application/json"),
    "no_llm": ("501", "no LLM is configured"),
    "llm": ("502", "the LLM request failed"),
}
#: The errors of every operation that takes a JSON body.
_BODY_ERRORS = "bad slow big media"
#: "unavailable": the answer of a database outage, or of a collection and a server that
#: disagree on the embedding model.
_UNAVAILABLE = {
    "description": "the database is unavailable (retry after Retry-After seconds), or the "
    "bot's collection was embedded with another model than the server's",
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
    ``errors`` (space-separated; a body adds :data:`_BODY_ERRORS`), the request body
    schema ``body`` and a ``query`` parameter. Every operation may answer 400
    (:data:`_UNREADABLE`)."""
    names = errors.split() + (_BODY_ERRORS.split() if body is not None else [])
    responses = {**answers, **_unreadable(), **dict(_error(name) for name in names)}
    op: dict[str, Any] = {"security": _AUTH, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    if query is not None:
        op["parameters"] = [query]
    return op


def _unreadable() -> dict[str, Any]:
    """The 400 of a request the HTTP parser refused, which any path may answer."""
    return {"400": {"description": _UNREADABLE, "content": _json(_ref("Error"))}}


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
    bot_writes = "unknown_collection auth bot_writes no_bot unavailable"
    documents = _object(collection=_STRING, documents=_array(_ref("DocumentInfo")))
    return {
        routes.health: {
            "security": [],
            "responses": {
                **_ok("Liveness", "up: the database answers"),
                **_unreadable(),
                **_ok("Liveness", "the database does not answer", "503"),
            },
        },
        routes.bots_health: _op(
            {**_ok("Health", "the database is up"), **_ok("Health", "the database is down", "503")},
            "auth",
        ),
        routes.list_bots: _op(
            _ok(_object(bots=_array({"anyOf": [_ref("Bot"), _ref("FailedBot")]}))), "auth"
        ),
        routes.get_bot: _op(_ok("Bot"), "auth no_bot unavailable"),
        routes.put_bot: _op(
            {**_ok("Bot"), **_ok("Bot", "created", "201")}, bot_writes, "BotWrite", _FORCE
        ),
        routes.patch_bot: _op(_ok("Bot"), bot_writes, "BotPatch", _FORCE),
        routes.delete_bot: _op(_ok(None, "removed", "204"), "auth bot_writes no_bot unavailable"),
        routes.reload: _op(_ok(_RELOAD), "auth unavailable"),
        routes.context: _op(
            _ok("ContextResponse"), "auth no_bot not_loaded unavailable", "ContextRequest"
        ),
        routes.document_rows: _op(_ok("Document"), "bad auth no_rows not_loaded unavailable"),
        routes.ask: _op(
            _ok("AskResponse"),
            "auth no_bot not_loaded no_llm llm unavailable",
            "AskRequest",
        ),
        catalog_routes.list_collections: _op(
            _ok(_object(collections=_array(_ref("Collection")))), "auth unavailable"
        ),
        catalog_routes.list_documents: _op(
            _ok(documents), "bad_name auth no_collection unavailable"
        ),
        catalog_routes.delete_documents: _op(
            _ok("DeleteReport"),
            "auth collection_writes no_collection unavailable",
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


#: A string without NUL: the service refuses NUL anywhere in a body (PostgreSQL cannot
#: store it), apart from filters and scopes, whose own language refuses it.
_NO_NUL = "^[^\\x00]*$"


def _blank_class() -> str:
    """A regex class of NUL and of the characters Python's ``str.strip`` removes, which
    a question must hold something besides (JSON Schema's ``\\s`` is another set)."""
    spaces = [c for c in map(chr, range(0x3001)) if c.isspace()]
    return "[\\x00" + "".join(f"\\u{ord(c):04x}" for c in spaces) + "]"


#: A question: no NUL, and not blank (:func:`~parrot_parents.stores.questions.question_problem`).
_QUESTION = f"^[^\\x00]*[^{_blank_class()[1:-1]}][^\\x00]*$"


def _no_nul(schema: Any) -> Any:
    """``schema`` with :data:`_NO_NUL` on every string that has no pattern of its own."""
    if isinstance(schema, list):
        return [_no_nul(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _no_nul(v) for k, v in schema.items()}
    kind = out.get("type")
    if (kind == "string" or (isinstance(kind, list) and "string" in kind)) and not (
        "pattern" in out or "enum" in out or "const" in out
    ):
        out["pattern"] = _NO_NUL
    return out


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, each default as the JSON the model serialises it to
    (pydantic writes a default's dataclass fields, e.g. an object for a mode string)."""
    schema = model.model_json_schema(ref_template=_REF)
    for name, field in model.model_fields.items():
        prop = schema["properties"].get(name, {})
        kind = field.annotation
        if "default" in prop and field.default is not PydanticUndefined and kind is not None:
            prop["default"] = TypeAdapter(kind).dump_python(field.default, mode="json")
    return schema


def _bot_schemas(settings: dict[str, Any]) -> dict[str, Any]:
    """The bot schemas made from ``BotSettings``' schema: the write bodies, the answer."""
    props = settings["properties"]
    # The name is the path's: PUT refuses another (400); the body need not repeat it.
    write = {k: v for k, v in props.items() if k != "name"}
    patch = {k: {n: v for n, v in p.items() if n != "default"} for k, p in props.items()}
    configs = "|".join(k for k, p in props.items() if '"object"' in json.dumps(p))
    # The one rule between two keys of a body: expansion needs a parent searcher.
    expansion = {
        "if": {
            "properties": {"expand_to_parent": {"const": True}},
            "required": ["expand_to_parent"],
        },
        "then": {"properties": {"parent_searcher_config": {"type": "object"}}},
    }
    return {
        "BotWrite": _no_nul(
            dict(
                settings,
                title="BotWrite",
                description="A bot's settings; absent keys take their defaults. The name is "
                "the path's ('name' in the body must equal it).",
                properties=write,
                required=["collection"],
                **expansion,
            )
        ),
        "BotPatch": _no_nul(
            {
                "type": "object",
                "title": "BotPatch",
                "description": "Any subset of the BotSettings keys ('name' renames the bot); "
                "dotted keys such as 'reranker_config.batch_size' change one key of a JSON "
                "config. The result is validated as a whole.",
                "properties": patch,
                "patternProperties": {f"^({configs})\\..+$": {}},
                "additionalProperties": False,
                **expansion,
            }
        ),
        "Bot": dict(
            settings,
            title="Bot",
            description="A bot's row and its load status.",
            properties={
                **props,
                "status": {"enum": ["loaded", "failed", "disabled"]},
                "error": _field("string", "why it did not load (status 'failed')"),
                "created_at": _DATE_TIME,
                "updated_at": _DATE_TIME,
            },
            required=["name", "collection", "status"],
        ),
        "FailedBot": _FAILED_BOT,
    }


@cache
def build_spec() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    schemas = {
        m.__name__: _model_schema(m)
        for m in (ContextRequest, AskRequest, DeleteRequest, BotSettings)
    }
    for name in ("ContextRequest", "AskRequest"):
        schemas[name]["properties"]["question"]["pattern"] = _QUESTION
    for name in ("ContextRequest", "AskRequest", "DeleteRequest"):
        schemas[name] = _no_nul(schemas[name])
    # The model counts characters (the byte limit is checked apart): the description
    # promises what always fits.
    schemas["DeleteRequest"]["properties"]["document_ids"]["items"] = _DOCUMENT_ID
    schemas.update(
        **_bot_schemas(schemas["BotSettings"]),
        Passage=_PASSAGE,
        Error=_ERROR,
        ContextResponse=_CONTEXT_RESPONSE,
        AskResponse=_ASK_RESPONSE,
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

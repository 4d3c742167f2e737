"""Build the OpenAPI 3.1 document of the store API from the route table and the pydantic models.

Generated, never hand-written, so it always describes what the server does: every route of
`agl_core.store.http.routes.ROUTES`, its parameters, body and answers (the tests compare it with the
server's router).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from agl_core.store.http import models as m
from agl_core.store.http.routes import ROUTES, Route

__all__ = ["openapi_document"]

_REF_TEMPLATE = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"{(\w+)}")
_COMPONENT_NAME = re.compile(r"[^A-Za-z0-9._-]")
_ERROR_STATUSES = {
    "400": "Bad request: malformed JSON or an invalid argument (typed error in the body).",
    "401": "Missing or wrong bearer token.",
    "404": "Unknown id (typed error) or unknown route.",
    "413": "Request body over the server's size limit.",
    "422": "Body or parameters do not match the schema.",
    "500": "Server fault (logged on the server).",
    "503": "The server is shutting down or its store is closed; retry.",
}


def _schema_of(type_: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """JSON schema of `type_`, moving its definitions into `defs` (shared components)."""
    schema = TypeAdapter(type_).json_schema(
        ref_template=_REF_TEMPLATE, schema_generator=GenerateJsonSchema, mode="validation"
    )
    for name, definition in schema.pop("$defs", {}).items():
        defs.setdefault(name, definition)
    title = schema.get("title")
    if isinstance(type_, type) and title and "properties" in schema:
        name = _COMPONENT_NAME.sub("_", title)  # OpenAPI component names: letters, digits, . _ -
        defs.setdefault(name, schema)
        return {"$ref": _REF_TEMPLATE.format(model=name)}
    return schema


def _parameters(route: Route, defs: dict[str, Any]) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PATH_PARAM.findall(route.path)
    ]
    if route.query is None:
        return params
    schema = TypeAdapter(route.query).json_schema(ref_template=_REF_TEMPLATE)
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        entry: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if name.endswith("_in"):
            entry["explode"] = True
            entry["style"] = "form"
            entry["description"] = "Repeat the parameter for several values."
        params.append(entry)
    return params


def _request_body(route: Route, defs: dict[str, Any]) -> dict[str, Any] | None:
    if route.kind == "otlp":
        return {
            "required": False,
            "description": "An OTLP ExportTraceServiceRequest; Content-Encoding gzip is accepted.",
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": {"type": "object", "description": "OTLP/JSON encoding"}},
            },
        }
    if route.body is None:
        return None
    return {
        "required": route.body_required,
        "content": {"application/json": {"schema": _schema_of(route.body, defs)}},
    }


def _responses(route: Route, defs: dict[str, Any]) -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": _REF_TEMPLATE.format(model="ErrorResponse")}}}
    responses: dict[str, Any] = {}
    if route.kind == "none":
        responses["501"] = {"description": "This OTLP signal is not supported.", "content": error}
        return responses
    if route.kind == "otlp":
        responses["200"] = {
            "description": "ExportTraceServiceResponse (partial_success counts dropped spans).",
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
        responses["415"] = {"description": "Unsupported Content-Type.", "content": error}
    else:
        responses[str(route.status)] = {
            "description": "Success.",
            "content": {"application/json": {"schema": _schema_of(route.response, defs)}},
        }
    for code, text in _ERROR_STATUSES.items():
        if code == "401" and not route.auth:
            continue
        responses[code] = {"description": text, "content": error}
    return responses


@functools.cache
def _document() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    _schema_of(m.ErrorResponse, defs)
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        operation: dict[str, Any] = {
            "operationId": route.name,
            "summary": route.summary,
            "tags": [route.tag],
            "parameters": _parameters(route, defs),
            "responses": _responses(route, defs),
        }
        body = _request_body(route, defs)
        if body is not None:
            operation["requestBody"] = body
        if not route.auth:
            operation["security"] = []
        if route.mutating:
            operation["parameters"].append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 200},
                    "description": "A retry with the same key gets the first answer, not a second effect.",
                }
            )
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agl LightningStore API",
            "version": "1",
            "description": "The LightningStore contract over HTTP (`agl store serve`) and OTLP/HTTP traces.",
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(defs.items())),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document (built once per process; do not mutate the result)."""
    return _document()

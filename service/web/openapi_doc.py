"""The OpenAPI document as the service states it: FastAPI's, with what `service.web.strict_input`
refuses in every text a request sends. Text holding NUL cannot be stored (PostgreSQL), so every
string of a parameter or request body (and of the components they use) that the document
describes without a pattern, enum or format of its own gets the pattern that says so; a client
(or a fuzzer) that keeps to the document is never refused for it. Answers are left as they
are: a 422 echoes the refused input, NUL included. FastAPI's 422 body is documented with the
``request_id`` every error body carries (`service.web.request_ids`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

NO_NUL = "^[^\\x00]*$"


def _strict_strings(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string" and not (
            {"pattern", "enum", "const", "format"} & set(node)
        ):
            node["pattern"] = NO_NUL
        for value in node.values():
            _strict_strings(value)
    elif isinstance(node, list):
        for value in node:
            _strict_strings(value)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def strict_request_strings(document: dict[str, Any]) -> None:
    """Add `NO_NUL` to the plain strings of every parameter and request body of ``document``,
    and of the components they reference (transitively)."""
    request_schemas = []
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            request_schemas += [p.get("schema") for p in operation.get("parameters", [])]
            body = operation.get("requestBody", {}).get("content", {})
            request_schemas += [media.get("schema") for media in body.values()]
    components = document.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    pending = [schema for schema in request_schemas if schema is not None]
    while pending:
        schema = pending.pop()
        _strict_strings(schema)
        for ref in _refs(schema):
            name = ref.rsplit("/", 1)[-1]
            if ref.startswith("#/components/schemas/") and name not in seen and name in components:
                seen.add(name)
                pending.append(components[name])


def _validation_errors_name_their_request(document: dict[str, Any]) -> None:
    """FastAPI's 422 body, as `service.web.request_ids` sends it: with ``request_id``."""
    schema = document.get("components", {}).get("schemas", {}).get("HTTPValidationError")
    if schema is not None:
        schema.setdefault("properties", {})["request_id"] = {
            "type": "string",
            "title": "Request Id",
            "description": "the request's id, as in X-Request-ID (every error body has it)",
        }


def install_openapi(app: FastAPI) -> None:
    """Serve ``app``'s document with `NO_NUL` on its requests' plain strings (built once,
    cached)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            strict_request_strings(document)
            _validation_errors_name_their_request(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

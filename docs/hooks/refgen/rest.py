"""``reference/rest.md``: the app's OpenAPI document as Markdown: every path and method with its
parameters, request body and responses, then every component schema."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from refgen.markdown import GENERATED, cell, code, md_cell, slug, table, text

METHODS = ("get", "put", "post", "patch", "delete", "head", "options")


def rest_page() -> str:
    """The REST reference from the app's OpenAPI document."""
    from service.entry.app import create_app
    from service.shared.settings import Settings

    with tempfile.TemporaryDirectory(prefix="tunehub-docs-") as data_dir:
        app = create_app(Settings(data_dir=Path(data_dir)), run_reaper=False)
        document = app.openapi()
    return render_openapi(document)


def render_openapi(doc: dict[str, Any]) -> str:
    schemas = doc.get("components", {}).get("schemas", {})
    info = doc.get("info", {})
    out = [
        GENERATED,
        "",
        "# REST API",
        "",
        f"{text(info.get('description'))} OpenAPI {doc.get('openapi', '')}, "
        f"API version {info.get('version', '')}.",
        "",
        "This page is generated from the app's own OpenAPI document, the one a running server "
        "serves at `/openapi.json` (and as Swagger UI at `/docs`, ReDoc at `/redoc`). Routes "
        "marked *bearer token* need `Authorization: Bearer <token>` when auth is on; which "
        "scope each needs is in [Security](../security.md#scopes).",
        "",
        "## Operations",
        "",
    ]
    operations = [
        (path, method, op)
        for path, item in sorted(doc.get("paths", {}).items())
        for method, op in sorted(item.items(), key=lambda kv: _method_order(kv[0]))
        if method in METHODS
    ]
    out += table(
        ["method and path", "summary"],
        [
            [f"[{code(f'{m.upper()} {p}')}](#{slug(f'{m.upper()} {p}')})", cell(op.get("summary"))]
            for p, m, op in operations
        ],
    )
    for path, method, op in operations:
        out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name in sorted(schemas):
        out += _schema_section(name, schemas[name])
    return "\n".join(out).rstrip() + "\n"


def _method_order(method: str) -> int:
    return METHODS.index(method) if method in METHODS else len(METHODS)


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    out = [f"### {code(f'{method.upper()} {path}')}", ""]
    facts = [f"**{text(op.get('summary'))}**"] if op.get("summary") else []
    if op.get("tags"):
        facts.append("tags: " + ", ".join(code(t) for t in op["tags"]))
    if op.get("security"):
        facts.append("*bearer token*")
    if facts:
        out += [" · ".join(facts), ""]
    if op.get("description"):
        out += [text(op["description"]), ""]
    params = op.get("parameters", [])
    if params:
        rows = []
        for p in params:
            schema = p.get("schema", {})
            rows.append(
                [
                    code(p.get("name", "")),
                    p.get("in", ""),
                    "yes" if p.get("required") else "no",
                    md_cell(type_of(schema)),
                    cell(p.get("description") or schema.get("description", "")),
                ]
            )
        out += ["Parameters:", ""]
        out += table(["name", "in", "required", "type", "description"], rows)
    body = op.get("requestBody")
    if body:
        kinds = [
            f"{code(ctype)}: {type_of(media.get('schema', {}))}"
            for ctype, media in sorted(body.get("content", {}).items())
        ]
        need = "required" if body.get("required") else "optional"
        out += [f"Request body ({need}): " + "; ".join(kinds), ""]
    responses = op.get("responses", {})
    if responses:
        rows = []
        for status in sorted(responses):
            answer = responses[status]
            description = cell(answer.get("description"))
            headers = sorted(answer.get("headers", {}))
            if headers:
                description += " Headers: " + ", ".join(code(h) for h in headers) + "."
            content = [
                f"{code(ctype)}: {type_of(media.get('schema', {}))}"
                for ctype, media in sorted(answer.get("content", {}).items())
            ]
            rows.append([code(status), description, md_cell("; ".join(content))])
        out += ["Responses:", ""]
        out += table(["status", "description", "body"], rows)
    return out


def _schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    if schema.get("description"):
        out += [text(schema["description"]), ""]
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        rows = [
            [
                code(field),
                md_cell(type_of(prop)),
                "yes" if field in required else "no",
                md_cell(code(prop["default"]) if "default" in prop else ""),
                cell(prop.get("description", "")),
            ]
            for field, prop in properties.items()
        ]
        out += table(["field", "type", "required", "default", "description"], rows)
    elif "properties" not in schema:
        out += [f"Type: {type_of({k: v for k, v in schema.items() if k != 'description'})}", ""]
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    if properties and alternatives:
        fields = [", ".join(code(f) for f in alt.get("required", [])) for alt in alternatives]
        if all(fields) and all(set(alt) == {"required"} for alt in alternatives):
            out += ["Exactly one of: " + "; ".join(fields) + ".", ""]
    if properties and schema.get("additionalProperties") is False:
        out += ["No other fields are accepted.", ""]
    return out


def type_of(schema: dict[str, Any]) -> str:
    """A JSON Schema as a short phrase in Markdown (component references as links)."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{slug(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema and any(set(s) - {"required"} for s in schema[key]):
            parts = [type_of(s) for s in schema[key]]
            return " or ".join(dict.fromkeys(parts)) + _limits(schema)
    if "const" in schema:
        return code(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(code(v) for v in schema["enum"])
    kind = schema.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        phrase = f"array of {type_of(schema.get('items', {}))}"
    elif kind == "object" or "properties" in schema or "additionalProperties" in schema:
        phrase = "object"
        if schema.get("properties"):
            phrase += " with " + ", ".join(code(k) for k in schema["properties"])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            phrase += f" (values: {type_of(extra)})"
    elif kind:
        phrase = str(kind)
        if schema.get("format"):
            phrase += f" ({schema['format']})"
    elif "contentMediaType" in schema:
        phrase = str(schema["contentMediaType"])
    else:
        phrase = "any"
    return phrase + _limits(schema)


def _limits(schema: dict[str, Any]) -> str:
    bounds = []
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is not None or high is not None:
        lo = "" if low is None else ("> " if "exclusiveMinimum" in schema else "≥ ") + _num(low)
        hi = "" if high is None else ("< " if "exclusiveMaximum" in schema else "≤ ") + _num(high)
        bounds.append(", ".join(b for b in (lo, hi) if b))
    for key, what in (("minLength", "≥ {} chars"), ("maxLength", "≤ {} chars"),
                      ("minItems", "≥ {} items"), ("maxItems", "≤ {} items")):  # fmt: skip
        if key in schema:
            bounds.append(what.format(_num(schema[key])))
    return f" ({'; '.join(bounds)})" if bounds else ""


def _num(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

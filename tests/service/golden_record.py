"""The golden record's machinery: a recording HTTP client, what it normalises, the parts of the
OpenAPI document it compares, and how a difference is reported (`test_api_golden` seeds the
store and tours the API with it)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx

RECORDED_HEADERS = (
    "content-type",
    "etag",
    "x-content-sha256",
    "content-disposition",
    "www-authenticate",
    "retry-after",
    "cache-control",
    "x-total-count",
    "link",
)

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")

TOKEN_TEXT = re.compile(r"thb_[A-Za-z0-9_-]+")

LONG_TEXT = 1000


@dataclass
class Normaliser:
    """Replaces what differs from run to run (see the module docstring)."""

    data_dir: str

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if key == "heartbeat_age_s" and isinstance(value, (int, float)):
            return "<age>"
        if key == "request_id" and isinstance(value, str):  # fresh on every request
            return "<request_id>"
        if key == "host" and isinstance(value, dict):  # GET /targets: this machine's target
            return {k: "<host>" for k in value}
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def text(self, value: str) -> str:
        value = TIME.sub("<time>", value.replace(self.data_dir, "<data_dir>"))
        value = TOKEN_TEXT.sub("<token>", value)
        if len(value) > LONG_TEXT:
            digest = hashlib.sha256(value.encode()).hexdigest()
            return f"<{len(value)} characters, sha256 {digest}>"
        return value

    def events(self, text: str) -> list[str]:
        """A server-sent event stream, line by line, each ``data:`` line's JSON normalised."""
        lines = []
        for line in text.split("\n"):
            if line.startswith("data: "):
                line = "data: " + json.dumps(self(json.loads(line[len("data: ") :])))
            lines.append(line)
        return lines


def _route_regex(route: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(route)))


@dataclass
class Recorder:
    """An HTTP client that records every exchange (see the module docstring)."""

    http: httpx.Client
    tokens: dict[str, str]
    normalise: Normaliser
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    openapi: dict[str, Any] | None = None

    def call(
        self,
        method: str,
        route: str,
        who: str = "root",
        query: dict[str, Any] | None = None,
        body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        why: str | None = None,
        keep_etag: bool = False,
        **path: Any,
    ) -> httpx.Response:
        """``method`` on ``route`` (a path template, its ``{fields}`` from ``path``)."""
        sent = dict(headers or {})
        if who in self.tokens:
            sent["Authorization"] = f"Bearer {self.tokens[who]}"
        extra: dict[str, Any] = {}
        if body is not None:
            extra["json"] = body
        if content is not None:
            extra["content"] = content
            sent.setdefault("Content-Type", "application/json")
        url = route.format(**path)
        response = self.http.request(method, url, params=query, headers=sent, **extra)
        request = unquote(response.request.url.raw_path.decode("ascii"))
        assert _route_regex(route).fullmatch(request.split("?")[0]), (route, request)
        entry: dict[str, Any] = {"route": f"{method} {route}", "request": f"{method} {request}"}
        entry["as"] = who
        if why:
            entry["why"] = why
        if body is not None:
            entry["body"] = self.normalise(body)
        elif content is not None:
            text = content.decode("utf-8", "replace")
            if len(text) > LONG_TEXT:
                text = f"<{len(content)} bytes>"
            entry["body_text"] = self.normalise.text(text)
        entry["status"] = response.status_code
        entry["headers"] = {
            name: response.headers[name] for name in RECORDED_HEADERS if name in response.headers
        }
        if "etag" in entry["headers"] and not keep_etag:
            entry["headers"]["etag"] = "<etag>"
        ctype = response.headers.get("content-type", "")
        if route == "/openapi.json" and response.status_code == 200:
            self.openapi = response.json()
            entry["json"] = "<the OpenAPI document: its compared parts are under 'openapi'>"
        elif ctype.startswith("application/json"):
            entry["json"] = self.normalise(response.json())
        elif ctype.startswith("text/event-stream"):
            entry["events"] = self.normalise.events(response.text)
        elif route == "/metrics" and response.status_code == 200:
            entry["families"] = [
                line.removeprefix("# TYPE ")
                for line in response.text.splitlines()
                if line.startswith("# TYPE ")
            ]
        elif response.content:
            entry["content"] = {
                "bytes": len(response.content),
                "sha256": hashlib.sha256(response.content).hexdigest(),
            }
        self.exchanges.append(entry)
        return response


# The dashboard's HTML pages and stylesheet: tested in a browser (tests/dashboard), not here.
DASHBOARD_PAGES = ("service.dashboard.pages", "service.dashboard")


def app_routes(app: Any) -> set[str]:
    """``"METHOD path"`` of every route the app serves (HEAD only where it is not GET's), but
    the dashboard's pages."""
    try:  # FastAPI >= 0.16x includes routers lazily: walk the effective routes
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is flat
        routes: Any = app.routes
    else:
        routes = iter_route_contexts(app.routes)
    found = set()
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        if getattr(endpoint, "__module__", "") in DASHBOARD_PAGES:
            continue
        methods = set(getattr(route, "methods", None) or ())
        if "GET" in methods:
            methods.discard("HEAD")
        found |= {f"{method} {route.path}" for method in methods}
    return found


def openapi_summary(document: dict[str, Any]) -> dict[str, Any]:
    """Per ``"METHOD path"``: the documented status codes, the request body's content types
    with their schema ``$ref`` (the schema where there is none) and the parameters."""
    summary = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            summary[f"{method.upper()} {path}"] = {
                "parameters": sorted(
                    (
                        {"name": p["name"], "in": p["in"], "required": p.get("required", False)}
                        for p in operation.get("parameters", [])
                    ),
                    key=lambda p: (p["in"], p["name"]),
                ),
                "request_body": None
                if body is None
                else {
                    "required": body.get("required", False),
                    "content": {
                        ctype: media.get("schema", {}).get("$ref", media.get("schema"))
                        for ctype, media in sorted(body.get("content", {}).items())
                    },
                },
                "responses": sorted(operation.get("responses", {})),
            }
    return dict(sorted(summary.items()))


def changed_parts(golden: dict[str, Any], live: dict[str, Any]) -> str:
    """Which exchanges (by number and request) and which other parts differ, for the reader
    of a failure."""
    lines = []
    old, new = golden.get("exchanges", []), live["exchanges"]
    for number in range(max(len(old), len(new))):
        was = old[number] if number < len(old) else None
        now = new[number] if number < len(new) else None
        if json.dumps(was) != json.dumps(now):
            request = (now or was or {}).get("request")
            lines.append(f"  exchange {number}: {request} ({(now or was or {}).get('as')})")
    if len(lines) > 20:
        lines[20:] = [f"  ... and {len(lines) - 20} more exchanges"]
    for part in ("routes", "openapi"):
        if json.dumps(golden.get(part)) != json.dumps(live[part]):
            lines.append(f"  {part}")
    return "differing parts:\n" + "\n".join(lines)

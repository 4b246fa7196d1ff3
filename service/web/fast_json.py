"""Pre-serialised JSON answers for the hot read routes (schedule and job lookups).

A route that returns a dict has FastAPI validate and serialise it on every request; these
routes build their JSON once with ``json.dumps`` and return it as a `Response` (the route's
``response_model`` still documents the shape). A schedule's trace is stored as JSON text and a
stored text never changes, so its compact form is cached by content (`compact_json`): no
invalidation, and a replaced best simply brings a new text. `json_answer` adds an ``ETag`` (a
hash of the body) and answers ``If-None-Match`` with a 304.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from fastapi import Request, Response

_COMPACT = (",", ":")


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON (ASCII: any stored text can be written)."""
    return json.dumps(value, separators=_COMPACT).encode()


CACHED_TEXT_BYTES = 64 << 10  # larger texts are compacted per call, not kept


def compact_json(text: str) -> str:
    """The JSON document ``text`` re-written compactly (validated once per distinct text up to
    `CACHED_TEXT_BYTES`: the cache holds at most 1024 of them, 64 MiB at worst)."""
    if len(text) > CACHED_TEXT_BYTES:
        return _compact(text)
    return _compact_cached(text)


def _compact(text: str) -> str:
    return json.dumps(json.loads(text), separators=_COMPACT)


_compact_cached = lru_cache(maxsize=1024)(_compact)


def with_raw_fields(body: Mapping[str, Any], raw: dict[str, str]) -> bytes:
    """``body`` as JSON with ``raw`` (name → JSON text) appended as fields, text as is."""
    head = json_bytes(body)
    tail = "".join(f",{json.dumps(name)}:{text}" for name, text in raw.items()).encode()
    return head[:-1] + tail + b"}" if body else b"{" + tail[1:] + b"}"


def etag_of(body: bytes) -> str:
    """A strong ETag for a body."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def json_answer(request: Request, body: bytes, etag: bool = False) -> Response:
    """A 200 with the JSON ``body``; with ``etag``, its ETag, or a 304 when the request's
    ``If-None-Match`` names it."""
    if not etag:
        return Response(body, media_type="application/json")
    tag = etag_of(body)
    wanted = request.headers.get("if-none-match")
    if wanted and (wanted.strip() == "*" or tag in _tags(wanted)):
        return Response(status_code=304, headers={"ETag": tag})
    return Response(body, media_type="application/json", headers={"ETag": tag})


def _tags(header: str) -> set[str]:
    return {part.strip().removeprefix("W/") for part in header.split(",")}

"""The light client's errors: an error answer of the service (`TunehubError`, made from a
response by `answer_error`) and a download whose sha256 is not the one announced
(`IntegrityError`)."""

from __future__ import annotations

import json
from typing import Any

import httpx


def answer_error(response: httpx.Response) -> TunehubError:
    """The `TunehubError` of an error answer: its status, FastAPI's ``detail`` (the text when
    the body is not a JSON object) and the whole JSON body."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else response.text
    return TunehubError(response.status_code, detail, body)


class TunehubError(Exception):
    """An error answer of the service: ``status``, FastAPI's ``detail`` and the JSON ``body``
    (None when it was not JSON; a `service.web.refusals` body has a ``type`` and more fields)."""

    def __init__(self, status: int, detail: Any, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body

    def describe(self) -> str:
        """For people: a 422 as one line per field (``operator.params.M: Input should be
        greater than or equal to 1 (got 0)``), anything else as the status and detail."""
        errors = self.detail if isinstance(self.detail, list) else None
        if not errors or not all(isinstance(e, dict) for e in errors):
            return str(self)
        lines = [f"HTTP {self.status}: {len(errors)} field(s) refused"]
        lines += [f"  {_field(e.get('loc'))}: {e.get('msg', 'invalid')}{_got(e)}" for e in errors]
        return "\n".join(lines)


def _field(loc: Any) -> str:
    """A FastAPI error location as a dotted field name, without its ``body``/``query``/``path``."""
    parts = [str(part) for part in loc] if isinstance(loc, list) else [str(loc)]
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts)


def _got(error: dict[str, Any]) -> str:
    """`` (got X)`` for a short scalar input, else nothing."""
    value = error.get("input")
    if isinstance(value, (dict, list)) or value is None:
        return ""
    text = json.dumps(value)
    return f" (got {text})" if len(text) <= 60 else ""


class IntegrityError(Exception):
    """A downloaded artifact whose sha256 differs from what the service announced."""


class UnsafeArtifact(IntegrityError):
    """A downloaded library that `tuning.checks.library_check` refuses (it would run code
    when loaded, or call beyond TVM's runtime and libm): never written where it was asked."""


class Offline(Exception):
    """The server cannot be reached and nothing usable is cached for the request."""


class OfflineWarning(UserWarning):
    """The server did not answer: what is used comes from the local cache (the message says
    from when)."""


class TuneMissingWarning(UserWarning):
    """A build could not send its missing tasks to be tuned (no ``submit-code`` scope, a cap, a
    task the service refuses, or no answer): it builds with what the service has, and says why."""

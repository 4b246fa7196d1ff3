"""401, 403 and 429 answers that say why in a machine-readable way:
``{"detail": "<readable reason>", "type": "<rule>", ...}`` (the shape of `service.web.limits`' 413),
with extra fields where they help a client (``scope``, ``loc``, ``retry_after_s``); and the 429
and 503 of isolation in the OpenAPI document (`ISOLATION_RESPONSES`)."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse


class Refusal(HTTPException):
    """An HTTP error with a ``type`` and extra fields in its JSON body."""

    def __init__(
        self,
        status_code: int,
        detail: str,
        kind: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(status_code=status_code, detail=detail, headers=headers)
        self.kind = kind
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer."""
        return {"detail": self.detail, "type": self.kind, **self.extra}


async def refusal_handler(_: Request, exc: Exception) -> JSONResponse:
    """Render a `Refusal` (register with ``app.add_exception_handler(Refusal, ...)``)."""
    assert isinstance(exc, Refusal)
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


def refusal_schema(description: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An OpenAPI response object for a `Refusal` status."""
    response: dict[str, Any] = {
        "description": description,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["detail", "type"],
                    "properties": {
                        "detail": {"type": "string"},
                        "type": {"type": "string"},
                        "request_id": {"type": "string"},  # service.web.request_ids
                    },
                }
            }
        },
    }
    if headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    return response


# What a route that parses user code may answer besides its own statuses (its 429 widens
# auth's).
ISOLATION_RESPONSES: dict[int | str, dict[str, Any]] = {
    429: refusal_schema(
        "the identity's write rate or job cap is exhausted; or its parse-time quota is in debt "
        "(type parse_quota_exhausted), it has an upload being parsed already "
        "(parse_in_progress), or no parser came free in time (parsers_busy)",
        {"Retry-After": "seconds to wait"},
    ),
    503: refusal_schema("User code cannot be isolated on this host: refused, never parsed"),
}

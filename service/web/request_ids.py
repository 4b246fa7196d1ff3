"""A request id on every request: in the ``X-Request-ID`` answer header, in every log line
written while the request is served, and in every JSON error body (``"request_id"``).

The id is the client's ``X-Request-ID`` when it is well formed (`WELL_FORMED`: 1 to 64
letters, digits, ``.``, ``_``, ``-``; a proxy's id then follows the request through), else a
fresh one (32 hex digits). Nothing else a client sends reaches a log line this way, so a
crafted id can neither forge a line nor grow one.

`RequestIds` is a pure ASGI middleware, the app's outermost: it sets the id in `current`
(a context variable, which the threads and tasks the request starts inherit), in the scope
(``scope["tunehub.request_id"]``), and adds it to every answer. An answer of status 400 or
more whose body is one JSON object gets ``"request_id"`` as its last key; an exception no
handler answered becomes a JSON 500 with it (then re-raised, for the server's own log), also
when it came while such an answer's start was held for its body (nothing had gone out).
`install_log_records` makes every log record of the process carry ``request_id`` (``-``
outside a request), and `uvicorn_log_config` is the logging `tunehub serve` runs uvicorn
with: every line, the access log's included, shows it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Request-ID"
SCOPE_KEY = "tunehub.request_id"
WELL_FORMED = re.compile(r"[A-Za-z0-9._-]{1,64}")
NO_REQUEST = "-"
MAX_PATCHED_BODY = 2**20  # larger error bodies (none is) pass unchanged

current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default=NO_REQUEST)


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's well-formed ``X-Request-ID``, else a fresh id."""
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if WELL_FORMED.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex


def with_request_id(body: bytes, request_id: str) -> bytes | None:
    """``body`` with ``"request_id"`` added as the last key when it is one JSON object
    without one (the text is spliced, so the rest stays byte for byte); else None."""
    text = body.rstrip()
    if not text.startswith(b"{") or not text.endswith(b"}") or len(body) > MAX_PATCHED_BODY:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or "request_id" in parsed:
        return None
    spaced = b'": ' in text  # json.dumps' default separators, else the compact ones
    comma = (b", " if spaced else b",") if parsed else b""
    colon = b": " if spaced else b":"
    return text[:-1] + comma + b'"request_id"' + colon + b'"' + request_id.encode() + b'"}'


class RequestIds:
    """The middleware of the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope.get("headers", []))
        scope[SCOPE_KEY] = request_id
        # Not reset afterwards: each request runs in a task of its own, and the server's log
        # of an exception that escaped (written after this returns) still shows the id.
        current.set(request_id)
        header = (HEADER.lower().encode(), request_id.encode())
        held: Message | None = None  # an error's start, held until its body is complete
        chunks: list[bytes] = []
        sent = False  # whether a start went to the client (a held one has not)

        async def send_with_id(message: Message) -> None:
            nonlocal held, sent
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
                if message["status"] >= 400 and _is_plain_json(message["headers"]):
                    held = message
                    return
                sent = True
            elif message["type"] == "http.response.body" and held is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                start, held = held, None
                body = b"".join(chunks)
                patched = with_request_id(body, request_id)
                if patched is not None:
                    body = patched
                    start["headers"] = [
                        (k, str(len(body)).encode() if k == b"content-length" else v)
                        for k, v in start["headers"]
                    ]
                sent = True
                await send(start)
                message = {"type": "http.response.body", "body": body}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            if not sent:  # nothing went out, a held error's start included: answer for it
                await _internal_error(send, header, request_id)
            raise


def _is_plain_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """A JSON answer that is not compressed (its body can be read and patched)."""
    found = dict((k.lower(), v) for k, v in headers)
    kind = found.get(b"content-type", b"")
    return kind.startswith(b"application/json") and b"content-encoding" not in found


async def _internal_error(send: Send, header: tuple[bytes, bytes], request_id: str) -> None:
    body = (
        b'{"detail":"internal server error","type":"internal_error","request_id":"'
        + request_id.encode()
        + b'"}'
    )
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        header,
    ]
    await send({"type": "http.response.start", "status": 500, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- log lines
_installed = False


def install_log_records() -> None:
    """Make every log record of this process carry ``request_id`` (`current`; ``-`` outside a
    request), whatever logger writes it. Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    make = logging.getLogRecordFactory()

    def record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made = make(*args, **kwargs)
        made.request_id = current.get()
        return made

    logging.setLogRecordFactory(record)


LINE = "%(asctime)s %(levelprefix)s [%(request_id)s] %(name)s: %(message)s"
ACCESS_LINE = (
    '%(asctime)s %(levelprefix)s [%(request_id)s] %(client_addr)s - "%(request_line)s" '
    "%(status_code)s"
)


def uvicorn_log_config(level: str = "INFO") -> dict[str, Any]:
    """uvicorn's logging for `tunehub serve`: its own and the access log as uvicorn writes
    them, and every other logger through the same handler (``tunehub.*`` from ``level``, the
    libraries' from WARNING), each line with its request id (`LINE`, `ACCESS_LINE`). The
    filter fills the id in for records made before `install_log_records` ran."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "service.web.request_ids.RequestIdFilter"}},
        "formatters": {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": LINE},
            "access": {"()": "uvicorn.logging.AccessFormatter", "fmt": ACCESS_LINE},
        },
        "handlers": {
            "default": {
                "formatter": "default",
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "filters": ["request_id"],
            },
            "access": {
                "formatter": "access",
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "filters": ["request_id"],
            },
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["access"], "level": level, "propagate": False},
            "tunehub": {"level": level},
        },
        "root": {"handlers": ["default"], "level": "WARNING"},
    }


class RequestIdFilter(logging.Filter):
    """Gives a record that has no ``request_id`` the current one (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current.get()
        return True

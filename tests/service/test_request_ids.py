"""The request id (`service.web.request_ids`): in every answer's ``X-Request-ID``, in every JSON
error body, in the log records written while a request is served; a client's id only when it
is well formed. The log lines of `tunehub serve` itself are checked in tests/e2e/test_metrics.py."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.request_ids import with_request_id
from tests.conftest import ServerThread

FRESH = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("ids"), max_body_bytes=1000)
    with ServerThread(create_app(settings, run_reaper=False)) as server:
        yield server.url


def test_a_well_formed_id_is_kept_and_any_other_replaced(url: str) -> None:
    kept = httpx.get(url + "/healthz", headers={"X-Request-ID": "lb-7f3a.2_x"})
    assert kept.headers["X-Request-ID"] == "lb-7f3a.2_x"
    assert FRESH.fullmatch(httpx.get(url + "/healthz").headers["X-Request-ID"])
    for bad in ("two words", "x" * 65, "a;b", "ünï", "", "a\tb"):
        answer = httpx.get(url + "/api/v1/jobs", headers={"X-Request-ID": bad.encode()})
        assert answer.status_code == 200
        assert FRESH.fullmatch(answer.headers["X-Request-ID"]), bad


@pytest.mark.parametrize(
    ("method", "path", "extra", "status"),
    [
        ("GET", "/api/v1/jobs/999", {}, 404),  # HTTPException
        ("GET", "/api/v1/jobs/abc", {}, 422),  # FastAPI's validation
        ("GET", "/api/v1/jobs", {"params": {"limit": 0}}, 422),
        ("POST", "/api/v1/lookup", {"content": b"{" * 2000}, 413),  # the body cap, raw ASGI
        ("GET", "/api/v1/jobs", {"headers": {"Host": "evil.example"}}, 400),  # Host check
        ("DELETE", "/api/v1/jobs", {}, 405),
    ],
)
def test_every_error_body_names_its_request(
    url: str, method: str, path: str, extra: dict[str, object], status: int
) -> None:
    headers = {"X-Request-ID": f"t-{status}", **extra.pop("headers", {})}  # type: ignore[dict-item]
    answer = httpx.request(method, url + path, headers=headers, **extra)  # type: ignore[arg-type]
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["request_id"] == answer.headers["X-Request-ID"] == f"t-{status}"
    assert list(body)[-1] == "request_id" and "detail" in body
    assert int(answer.headers["content-length"]) == len(answer.content)


def test_a_refusal_names_its_request(tmp_path: Path) -> None:
    with ServerThread(create_app(Settings(data_dir=tmp_path, auth=True), run_reaper=False)) as s:
        answer = httpx.get(s.url + "/api/v1/jobs")
    assert answer.status_code == 401
    assert answer.json() == {
        "detail": "an API token is required: Authorization: Bearer <token>",
        "type": "missing_token",
        "request_id": answer.headers["X-Request-ID"],
    }


def _failing_app(tmp_path: Path) -> FastAPI:
    app = create_app(Settings(data_dir=tmp_path), run_reaper=False)

    @app.get("/boom")
    def boom() -> None:  # a sync route: served in a worker thread
        logging.getLogger("tunehub.test").warning("about to fail")
        raise RuntimeError("boom")

    @app.get("/half")
    def half() -> StreamingResponse:  # an error's start is held until its body is complete
        def body() -> Iterator[bytes]:
            yield b'{"detail": '
            raise RuntimeError("half")

        return StreamingResponse(body(), status_code=409, media_type="application/json")

    return app


def test_log_records_and_an_unanswered_exception_carry_the_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        ServerThread(_failing_app(tmp_path)) as server,
        caplog.at_level(logging.WARNING, logger="tunehub.test"),
    ):
        answer = httpx.get(server.url + "/boom", headers={"X-Request-ID": "boom-1"})
    assert answer.status_code == 500
    assert answer.headers["X-Request-ID"] == "boom-1"
    assert answer.json() == {
        "detail": "internal server error",
        "type": "internal_error",
        "request_id": "boom-1",
    }
    (line,) = [r for r in caplog.records if r.getMessage() == "about to fail"]
    assert line.request_id == "boom-1"  # type: ignore[attr-defined]
    outside = logging.getLogger("tunehub.test").makeRecord("x", 20, "f", 1, "m", None, None)
    assert outside.request_id == "-"  # type: ignore[attr-defined]  # no request in this thread


def test_an_exception_during_a_held_error_answer_is_a_500_with_the_id(tmp_path: Path) -> None:
    with ServerThread(_failing_app(tmp_path)) as server:
        answer = httpx.get(server.url + "/half", headers={"X-Request-ID": "half-1"})
    assert answer.status_code == 500
    assert answer.headers["X-Request-ID"] == "half-1"
    assert answer.json() == {
        "detail": "internal server error",
        "type": "internal_error",
        "request_id": "half-1",
    }


def test_only_a_json_object_gains_the_field() -> None:
    assert with_request_id(b'{"detail":"x"}', "r1") == b'{"detail":"x","request_id":"r1"}'
    assert with_request_id(b'{"detail": "x"}', "r1") == b'{"detail": "x", "request_id": "r1"}'
    assert with_request_id(b"{}", "r1") == b'{"request_id":"r1"}'
    for body in (b"[1]", b"not json", b"", b'{"request_id":"mine"}', b'{"a":1} trailing'):
        assert with_request_id(body, "r1") is None, body

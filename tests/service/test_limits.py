"""Request body caps (service.web.limits) over a real uvicorn server: 413 before the body is
read."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread

JOB_CAP, IMPORT_CAP, DEFAULT_CAP = 32 * 1024, 256 * 1024, 4 * 1024
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("limits"),
        max_body_bytes=DEFAULT_CAP,
        max_job_body_bytes=JOB_CAP,
        max_import_body_bytes=IMPORT_CAP,
    )
    with ServerThread(create_app(settings, run_reaper=False)) as running:
        yield running


# The server still answers others promptly after a refused body. The bound is loose on purpose:
# a test started just after one whose processes are still exiting shares the two cores with
# them (1.18 s was seen so); a server stuck on the body would not answer within the timeout.
PROMPT_S = 3


def _healthy(server: ServerThread) -> float:
    """Seconds /healthz took to answer 200."""
    started = time.monotonic()
    assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
    return time.monotonic() - started


def _assert_413(response: httpx.Response, cap: int) -> None:
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["type"] == "body_too_large" and body["limit_bytes"] == cap
    assert str(cap) in body["detail"]


def test_declared_length_over_the_cap_is_refused_before_the_body_is_sent(
    server: ServerThread,
) -> None:
    # Headers only, announcing 1 GB: the answer must come without waiting for any of it.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n{"
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413"), head
        assert b"connection: close" in head.lower()
        assert json.loads(body)["limit_bytes"] == JOB_CAP
        assert sock.recv(65536) == b""  # closed: the rest is never read
    assert _healthy(server) < PROMPT_S


def test_chunked_body_is_cut_off_at_the_cap(server: ServerThread) -> None:
    sent = 0

    def endless() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(1024):  # 64 MiB at most
            sent += 65536
            yield b" " * 65536

    response = httpx.post(server.url + "/api/v1/jobs", content=endless(), headers=JSON, timeout=30)
    _assert_413(response, JOB_CAP)
    # The server stopped reading: far less than the 64 MiB was sent (socket buffers hold some).
    assert sent < 16 * 2**20, sent
    assert _healthy(server) < PROMPT_S


def test_chunked_body_under_the_cap_reaches_the_route(server: ServerThread) -> None:
    body = json.dumps({"operator": {"name": "no-such-op"}, "trials": 1}).encode()
    response = httpx.post(
        server.url + "/api/v1/jobs", content=iter([body[:10], body[10:]]), headers=JSON
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "operator", "name"]


def test_caps_are_per_route(server: ServerThread) -> None:
    padding = {"workloads": "", "records": "", "target": "host", "x": " " * (2 * JOB_CAP)}
    with httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client:
        # Import takes more than a job: this body is past the job cap, not the import cap.
        assert client.post("/import", json=padding).status_code == 422
        _assert_413(client.post("/jobs", json=padding), JOB_CAP)
        _assert_413(
            client.post("/import", content=b" " * (IMPORT_CAP + 1), headers=JSON), IMPORT_CAP
        )
        # Every other route has the default cap, a trailing slash included.
        _assert_413(client.post("/jobs/1/cancel", json=padding), DEFAULT_CAP)
        _assert_413(client.request("GET", "/schedules", json=padding), DEFAULT_CAP)
        _assert_413(client.post("/jobs/", json=padding), JOB_CAP)
    assert _healthy(server) < PROMPT_S


def test_a_slow_upload_does_not_hold_other_requests(server: ServerThread) -> None:
    done, sending = threading.Event(), threading.Event()

    def trickle() -> Iterator[bytes]:
        for _ in range(600):  # a byte every 0.1 s until the check is over (60 s at most)
            if done.is_set():
                return
            yield b" "
            sending.set()  # the first byte went out: the server is reading the upload
            time.sleep(0.1)

    uploader = threading.Thread(
        target=lambda: httpx.post(
            server.url + "/api/v1/jobs", content=trickle(), headers=JSON, timeout=90
        )
    )
    uploader.start()
    try:
        assert sending.wait(timeout=30), "the upload never started"
        assert _healthy(server) < PROMPT_S
        assert uploader.is_alive()  # answered while the upload was still trickling in
    finally:
        done.set()
        uploader.join()


def test_caps_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TUNEHUB_MAX_JOB_BODY_BYTES", "1234")
    monkeypatch.setenv("TUNEHUB_MAX_IMPORT_BODY_BYTES", "5678")
    monkeypatch.setenv("TUNEHUB_MAX_BODY_BYTES", "99")
    settings = Settings.from_env(data_dir=tmp_path)
    assert (settings.max_job_body_bytes, settings.max_import_body_bytes) == (1234, 5678)
    assert settings.max_body_bytes == 99
    defaults = Settings()
    assert defaults.max_body_bytes < defaults.max_job_body_bytes < defaults.max_import_body_bytes


def test_settings_travel_whole_to_child_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # `serve --api-workers N` builds each process's app from as_env(): nothing may be lost.
    given = Settings(auth=True, max_job_body_bytes=4321, write_rate_per_s=0.5, seed=7)
    for name in [k for k in os.environ if k.startswith("TUNEHUB_")]:
        monkeypatch.delenv(name)
    for name, value in given.as_env().items():
        monkeypatch.setenv(name, value)
    got = Settings.from_env()
    for item in fields(Settings):
        if item.name not in ("data_dir", "database_url", "broker_url", "artifact_dir"):
            assert getattr(got, item.name) == getattr(given, item.name), item.name
    assert (got.store_url, got.broker, got.artifacts) == (
        given.store_url,
        given.broker,
        given.artifacts,
    )

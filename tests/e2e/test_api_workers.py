"""`tunehub serve --api-workers N`: N API processes on one port, each with the settings the
command was given (flags and TUNEHUB_* alike), stopped together."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.e2e.helpers import start, stop, wait_http, wait_until

pytestmark = pytest.mark.e2e


def test_api_workers_share_the_port_and_the_settings(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env["TUNEHUB_MAX_JOB_BODY_BYTES"] = "2000"  # from the environment
    log = tmp_path / "serve.log"
    args = ["serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), "--workers", "0"]
    server = start([*args, "--api-workers", "2", "--auth", "--no-access-log"], env, log)
    try:
        wait_http(f"{url}/healthz", server, log)
        wait_until(lambda: log.read_text().count("Application startup complete") == 2, 60, log)
        with httpx.Client(base_url=url + "/api/v1", timeout=30) as client:
            for _ in range(20):  # new connections: both processes answer, both with auth on
                response = client.get("/jobs", headers={"Connection": "close"})
                assert response.status_code == 401, response.text
            too_big = client.post("/jobs", content=b" " * 2001, headers={"Authorization": "x"})
            assert too_big.status_code == 413 and too_big.json()["limit_bytes"] == 2000
        assert "GET /api/v1/jobs" not in log.read_text()  # --no-access-log
    finally:
        assert stop(server) == []

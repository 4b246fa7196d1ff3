"""Issue 25's findings 2 and 6-9 over a real server: DNS rebinding with auth off, a sleeping
upload holding a parser slot, an event stream outliving its revoked token, lookups without a
rate limit, and the interactive docs loading Swagger UI from a CDN without a CSP. Against
c7ee873 each of these tests fails."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.security.payloads import probe_module
from tuning.jail.isolated import _collect
from tuning.jail.spawn import Limits, new_uid


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Auth off (the embedded default), one extra name allowed (``tunehub.example.org``)."""
    data_dir = tmp_path_factory.mktemp("rebinding")
    settings = Settings(data_dir=data_dir, allowed_hosts=("tunehub.example.org", ".corp.example"))
    with ServerThread(create_app(settings, run_reaper=False)) as server:
        yield server.url, data_dir


def _import_body() -> dict[str, Any]:
    import tvm

    from tuning.ir import normalize, structural_hash
    from tuning.publish.interchange import encode_workload_line

    mod = normalize(probe_module()["main"])
    line = encode_workload_line(structural_hash(mod), tvm.ir.save_json(mod))
    return {"target": "host", "database_workload.json": line + "\n",
            "database_tuning_record.json": ""}  # fmt: skip


def test_a_rebinding_page_gets_a_400_and_writes_nothing(open_server: tuple[str, Path]) -> None:
    url, data_dir = open_server
    port = url.rsplit(":", 1)[1]
    evil = f"rebind.attacker.example:{port}"
    headers = {"Host": evil, "Origin": f"http://{evil}", "Sec-Fetch-Site": "same-origin"}
    answer = httpx.post(url + "/api/v1/import", json=_import_body(), headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {
        "detail": "this service does not answer to the host 'rebind.attacker.example': add it "
        "to TUNEHUB_ALLOWED_HOSTS",
        "type": "invalid_host",
        "host": "rebind.attacker.example",
        "request_id": answer.headers["X-Request-ID"],
    }
    for path in ("/", "/docs", "/api/v1/targets"):  # reads and pages alike
        assert httpx.get(url + path, headers={"Host": evil}).status_code == 400
    store = Store(make_engine(f"sqlite:///{data_dir / 'tunehub.db'}"))
    assert store.catalog.list_workloads() == []
    # A load balancer's probe answers whatever its Host; loopback and configured names pass.
    assert httpx.get(url + "/healthz", headers={"Host": evil}).status_code == 200
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}",
                 f"TunеHub.example.org:{port}".replace("е", "e"), "a.b.corp.example",
                 "corp.example"):  # fmt: skip
        assert httpx.get(url + "/api/v1/targets", headers={"Host": host}).status_code == 200, host
    assert (
        httpx.get(url + "/api/v1/targets", headers={"Host": "evilcorp.example"}).status_code == 400
    )


def test_an_idle_child_is_stopped_in_seconds_not_at_its_wall_clock_limit() -> None:
    """A child that sleeps (as the probe's two uploads did for 25 s each, holding both parser
    slots) is stopped once its uid used no CPU for `Limits.idle_seconds`."""
    uid = new_uid()
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "60"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    started = time.monotonic()
    try:
        _, _, stopped = _collect(proc, b"", Limits(wall_seconds=30, idle_seconds=2.0), uid)
    finally:
        proc.kill()
        proc.wait()
    assert stopped == "stayed idle for 2 s"
    assert time.monotonic() - started < 6


@pytest.fixture(scope="module")
def auth_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, TokenStore, Store]]:
    data_dir = tmp_path_factory.mktemp("revoked")
    settings = Settings(data_dir=data_dir, auth=True, write_rate_per_s=1, write_burst=5)
    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    with ServerThread(create_app(settings, run_reaper=False)) as server:
        yield server.url, TokenStore(engine), Store(engine)
    engine.dispose()


def test_an_event_stream_ends_when_its_token_is_revoked(
    auth_server: tuple[str, TokenStore, Store],
) -> None:
    url, tokens, store = auth_server
    admin, _ = tokens.create("streamer", ["admin"])
    headers = {"Authorization": f"Bearer {admin}"}
    body = {"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "trials": 8}
    job = httpx.post(url + "/api/v1/jobs", json=body, headers=headers).json()  # stays queued
    events: list[str] = []
    with httpx.stream("GET", f"{url}/api/v1/jobs/{job['id']}/events", headers=headers,
                      timeout=30) as stream:  # fmt: skip
        lines = stream.iter_lines()
        while not any(line.startswith("event: state") for line in events):
            events.append(next(lines))
        revoked_at = time.monotonic()
        tokens.revoke("streamer")
        events.extend(lines)  # until the server ends the stream
    assert time.monotonic() - revoked_at < 10
    events = [line for line in events if line]
    assert events[-2] == "event: end", events[-5:]
    end = json.loads(events[-1].removeprefix("data: "))
    assert end == {"id": job["id"], "state": "queued", "reason": "token_revoked"}


def test_lookups_spend_the_write_rate(auth_server: tuple[str, TokenStore, Store]) -> None:
    """100 concurrent lookups answered 100 x 200: every POST spends the identity's bucket."""
    url, tokens, _ = auth_server
    reader, _ = tokens.create("batch-reader", ["read"])
    headers = {"Authorization": f"Bearer {reader}"}
    body = {"target": "host", "workloads": ["1234567890"]}

    def lookup(_: int) -> int:
        return httpx.post(url + "/api/v1/lookup", json=body, headers=headers).status_code

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lookup, range(20)))
    refilled = math.ceil(time.monotonic() - started)  # 1 token a second on top of the 5
    assert statuses.count(200) <= 5 + refilled, statuses
    assert statuses.count(429) == 20 - statuses.count(200) >= 20 - 5 - refilled, statuses


def test_the_interactive_docs_load_nothing_from_elsewhere(open_server: tuple[str, Path]) -> None:
    url, _ = open_server
    for page, script in (("/docs", "/static/vendor/swagger-ui-bundle.js"),
                         ("/redoc", "/static/vendor/redoc.standalone.js")):  # fmt: skip
        answer = httpx.get(url + page)
        assert answer.status_code == 200
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'self'" in policy
        assert f'src="{script}"' in answer.text
        assert "http" not in answer.text.replace(url, "")  # no CDN, no other origin
        assert "<script>" not in answer.text  # no inline script
        assert httpx.get(url + script).status_code == 200

"""``GET /metrics`` of a real server: who may read it, the request histogram's labels, the
store's families and the dependencies' health (the scrape during a running job, and several
API processes, are tests/e2e/test_metrics.py)."""

from __future__ import annotations

import logging
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from schedules_db import Store
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, free_port, reset_pg_schema
from tests.schedules_db.store_data import target
from tests.service.deployment import Deployment
from tests.service.scrapes import samples, value


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("metrics")
    with Deployment(root, auth=True, anonymous_reads=True) as deployment:
        yield deployment


def scrape(deployment: Deployment, who: str = "read") -> httpx.Response:
    return httpx.get(
        deployment.server.url + "/metrics",
        headers={"Authorization": f"Bearer {deployment.token[who]}"},
        timeout=30,
    )


def test_metrics_need_a_token_with_the_read_scope(deployment: Deployment) -> None:
    url = deployment.server.url
    assert httpx.get(url + "/api/v1/jobs").status_code == 200  # anonymous reads are on
    anonymous = httpx.get(url + "/metrics")
    assert anonymous.status_code == 401 and anonymous.json()["type"] == "missing_token"
    bad = httpx.get(url + "/metrics", headers={"Authorization": "Bearer thb_nope"})
    assert bad.status_code == 401
    for who in ("read", "submit", "admin"):
        answer = scrape(deployment, who)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "/metrics" not in httpx.get(url + "/openapi.json").json()["paths"]


def test_requests_are_counted_by_route_template(deployment: Deployment) -> None:
    url = deployment.server.url
    assert httpx.get(url + "/api/v1/jobs/987654").status_code == 404
    assert httpx.get(url + "/no/such/987654").status_code == 404
    assert httpx.post(url + "/healthz").status_code == 405
    assert deployment.get("admin", "/jobs").status_code == 200
    answer = scrape(deployment)
    assert "987654" not in answer.text  # a path's ids never become label values
    found = samples(answer.text)
    name = "tunehub_http_request_duration_seconds_count"
    assert value(found, name, method="GET", route="/api/v1/jobs/{job_id}", status="404") >= 1
    assert value(found, name, method="GET", route="unmatched", status="404") >= 1
    assert value(found, name, method="POST", route="/healthz", status="405") >= 1
    assert value(found, name, method="GET", route="/api/v1/jobs", status="200") >= 1
    buckets = [
        s
        for s in found
        if s[0] == "tunehub_http_request_duration_seconds_bucket"
        and ("route", "/api/v1/jobs/{job_id}") in s[1]
    ]
    assert {dict(labels)["le"] for _, labels in buckets} >= {"0.005", "1.0", "+Inf"}


def test_the_store_families_name_jobs_workers_trials_and_stages(deployment: Deployment) -> None:
    store = deployment.store
    queued = deployment.get("admin", "/jobs").json()[0]  # the one `Deployment` queued
    label = queued["target"]["label"]
    store.jobs.record_stage(queued["id"], "search", 42.0)
    store.jobs.record_stage(queued["id"], "verification", 3.0)
    found = samples(scrape(deployment).text)
    assert value(found, "tunehub_jobs", state="queued", target=label) == 1
    assert value(found, "tunehub_queue_depth", target=label) == 1
    assert value(found, "tunehub_trials_per_second", target=label) == 0
    assert value(found, "tunehub_worker_up", worker="w1") == 1  # registered by `Deployment`
    assert value(found, "tunehub_worker_heartbeat_age_seconds", worker="w1") < 600
    assert value(found, "tunehub_workers_live", target=label) == 1
    assert value(found, "tunehub_search_duration_seconds_count", target=label) == 1
    assert value(found, "tunehub_search_duration_seconds_sum", target=label) == 42
    assert value(found, "tunehub_search_duration_seconds_bucket", target=label, le="30.0") == 0
    assert value(found, "tunehub_search_duration_seconds_bucket", target=label, le="60.0") == 1
    assert value(found, "tunehub_verification_duration_seconds_count", target=label) == 1
    assert value(found, "tunehub_dependency_up", dependency="database") == 1
    assert value(found, "tunehub_dependency_up", dependency="broker") == 1
    assert ("tunehub_dependency_up", frozenset({("dependency", "redis")})) not in found


def test_dependencies_are_probed_and_a_dead_one_is_a_zero(tmp_path: Path, redis_url: str) -> None:
    dead = free_port()  # nothing listens there
    # Connections wait in its backlog, unheard; closed whatever the assertions say.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        mute = silent.getsockname()[1]
        cases = {
            "alive": Settings(data_dir=tmp_path / "alive", redis_url=redis_url),
            "dead": Settings(
                data_dir=tmp_path / "dead",
                redis_url=f"redis://127.0.0.1:{dead}/0",
                broker_url=f"pyamqp://guest:guest@127.0.0.1:{dead}//",
            ),
            "silent": Settings(
                data_dir=tmp_path / "silent",
                redis_url=f"redis://127.0.0.1:{mute}/0",
                broker_url=f"pyamqp://guest:guest@127.0.0.1:{mute}//",
            ),
        }
        for case, settings in cases.items():
            with ServerThread(create_app(settings, run_reaper=False)) as server:
                started = time.monotonic()
                answer = httpx.get(server.url + "/metrics", timeout=30)
                assert answer.status_code == 200, answer.text
                assert time.monotonic() - started < 10  # a dead dependency costs a probe's timeout
                found = samples(answer.text)
                up = 1 if case == "alive" else 0
                assert value(found, "tunehub_dependency_up", dependency="database") == 1, case
                assert value(found, "tunehub_dependency_up", dependency="broker") == up, case
                assert value(found, "tunehub_dependency_up", dependency="redis") == up, case
                probe_s = value(found, "tunehub_dependency_probe_seconds", dependency="broker")
                assert probe_s <= 2.5


def _families(text: str) -> set[str]:
    return {name for name, _ in samples(text)}


def test_a_failed_reading_of_the_store_leaves_the_other_families(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path)
    with ServerThread(create_app(settings, run_reaper=False)) as server:
        assert httpx.get(server.url + "/healthz").status_code == 200
        with sqlite3.connect(tmp_path / "tunehub.db") as db:  # a store the reading fails on
            db.execute("DROP TABLE job_stages")
        with caplog.at_level(logging.WARNING, logger="tunehub.api"):
            answer = httpx.get(server.url + "/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    found = samples(answer.text)
    assert value(found, "tunehub_dependency_up", dependency="database") == 1
    count = "tunehub_http_request_duration_seconds_count"
    assert value(found, count, method="GET", route="/healthz", status="200") == 1
    assert "tunehub_jobs" not in _families(answer.text)
    assert any("job_stages" in r.getMessage() for r in caplog.records), caplog.text


def test_a_hung_reading_of_the_store_is_bounded_and_takes_no_pooled_connection(
    tmp_path: Path, pg_database: str
) -> None:
    reset_pg_schema(pg_database)
    app = create_app(Settings(data_dir=tmp_path, database_url=pg_database), run_reaper=False)
    locker = create_engine(pg_database)
    with ServerThread(app) as server, locker.connect() as lock:
        target(Store(locker), "probed")
        assert httpx.get(server.url + "/healthz").status_code == 200  # one request counted
        pool = app.state.services.store.engine.pool
        lock.execute(text("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"))  # every read of jobs waits
        for _ in range(3):
            started = time.monotonic()
            answer = httpx.get(server.url + "/metrics", timeout=30)
            assert time.monotonic() - started < 8  # the probes' 2 s and the reading's 3 s
            assert answer.status_code == 200, answer.text
            found = samples(answer.text)
            assert value(found, "tunehub_dependency_up", dependency="database") == 1
            assert "tunehub_queue_depth" not in _families(answer.text)
            assert "tunehub_http_request_duration_seconds_count" in _families(answer.text)
            assert pool.checkedout() == 0  # the API's connections are left to its requests
        lock.rollback()  # the database recovers: the next scrapes read it again
        deadline = time.monotonic() + 15
        while "tunehub_queue_depth" not in _families(scrape_text(server.url)):
            assert time.monotonic() < deadline, "the store's families did not come back"
    locker.dispose()


def scrape_text(url: str) -> str:
    answer = httpx.get(url + "/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.text

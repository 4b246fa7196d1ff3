"""What an operator's Prometheus sees of a real `tunehub serve`: a scrape while a job runs on
its local worker, the request ids in the server's own log lines, and two API processes that
count their requests together."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import TINY
from tests.e2e.helpers import start_serve, stop, wait_until
from tests.service.scrapes import samples, value

pytestmark = pytest.mark.e2e
COUNT = "tunehub_http_request_duration_seconds_count"


def first_event(
    client: httpx.Client, job_id: int, wanted: Callable[[dict[str, Any]], bool], log: Path
) -> dict[str, Any]:
    """The data of the first event of the job's stream that ``wanted`` accepts (a final job's
    stream ends with an ``end`` event holding its state)."""
    deadline = time.monotonic() + 400
    with client.stream("GET", f"/api/v1/jobs/{job_id}/events") as stream:
        for line in stream.iter_lines():
            if time.monotonic() > deadline:
                break
            if line.startswith("data: ") and wanted(job := json.loads(line[len("data: ") :])):
                return job
    raise AssertionError(f"job {job_id}: no such event:\n{log.read_text()[-4000:]}")


def test_a_scrape_while_a_job_runs_shows_the_job_its_worker_and_the_routes(
    tmp_path: Path,
) -> None:
    server, url, log = start_serve(tmp_path)  # the API and one local worker
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            body = {"operator": {"name": "matmul", "params": TINY}, "target": "host", "trials": 16}
            created = client.post("/api/v1/jobs", json=body)
            assert created.status_code == 201, created.text
            job_id, label = created.json()["id"], created.json()["target"]["label"]

            def measuring(job: dict[str, Any]) -> bool:
                return job.get("state") == "running" and job["progress"]["trials_done"] > 0

            running = first_event(client, job_id, measuring, log)
            found = samples(client.get("/metrics").text)
            assert value(found, "tunehub_jobs", state="running", target=label) == 1
            assert value(found, "tunehub_queue_depth", target=label) == 0
            assert value(found, "tunehub_trials_per_second", target=label) > 0
            assert value(found, "tunehub_worker_up", worker=running["worker"]) == 1
            assert value(found, "tunehub_workers_live", target=label) == 1
            assert value(found, COUNT, method="POST", route="/api/v1/jobs", status="201") == 1
            for dependency in ("database", "broker"):
                assert value(found, "tunehub_dependency_up", dependency=dependency) == 1

            final = first_event(client, job_id, lambda job: "progress" not in job, log)
            assert final["state"] == "succeeded", client.get(f"/api/v1/jobs/{job_id}").text
            found = samples(client.get("/metrics").text)
            assert value(found, "tunehub_jobs", state="succeeded", target=label) == 1
            for stage in ("search", "verification"):
                name = f"tunehub_{stage}_duration_seconds_count"
                assert value(found, name, target=label) == 1, stage

            # The request id, in the error body and in the server's log line of that request.
            missing = client.get("/api/v1/jobs/999", headers={"X-Request-ID": "e2e-404"})
            assert missing.status_code == 404 and missing.json()["request_id"] == "e2e-404"
            line = wait_until(
                lambda: [x for x in log.read_text().splitlines() if "[e2e-404]" in x], 30, log
            )
            assert '"GET /api/v1/jobs/999 HTTP/1.1" 404' in line[0]
    finally:
        stop(server)


def test_api_processes_add_up_their_request_counts(tmp_path: Path) -> None:
    server, url, log = start_serve(tmp_path, "--workers", "0", "--api-workers", "2")
    try:
        (folder,) = (tmp_path / "data").glob("metrics-*")  # made by serve for its processes

        def healthz(_: object = None) -> None:
            assert httpx.get(url + "/healthz").status_code == 200  # a connection of its own

        def serving_processes() -> int:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(healthz, range(16)))
            return len(list(folder.glob("histogram_*.db")))  # one file per process counting

        wait_until(lambda: serving_processes() == 2, 60, log, poll_s=0)

        def totals() -> set[float]:
            return {
                value(samples(httpx.get(url + "/metrics").text), COUNT, method="GET",
                      route="/healthz", status="200")
                for _ in range(6)
            }  # fmt: skip

        (before,) = totals()  # whichever process answers, the same sum
        for _ in range(10):
            healthz()
        assert totals() == {before + 10}
    finally:
        stop(server)
    assert not folder.exists()  # serve removes the folder it made

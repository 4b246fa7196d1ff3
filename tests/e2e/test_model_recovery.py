"""A whole-model job on the production topology (PostgreSQL, RabbitMQ, a supervised worker in
a process of its own): `kill -9` of the worker in the middle of the model loses nothing — the
task job it ran is requeued by the reaper and resumed from its stored records, the other tasks
and the compile follow, and the compiled model is served."""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path

import httpx
import psutil
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, reset_pg_schema
from tests.e2e.helpers import start, stop, wait_until
from tests.e2e.test_fleet import _alive, _records, _workers
from tests.e2e.test_worker_brokers import _amqp_url
from tests.tuning.model_cases import tiny_cnn

pytestmark = pytest.mark.e2e


def test_kill_9_of_the_worker_mid_model_loses_nothing(pg_database: str, tmp_path: Path) -> None:
    reset_pg_schema(pg_database)
    settings = Settings(
        data_dir=tmp_path,
        database_url=pg_database,
        broker_url=_amqp_url(),
        num_trials_per_iter=4,
        heartbeat_every_s=1,
        requeue_after_s=10,
        stale_after_s=6,
        reaper_every_s=1,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env.update(settings.as_env())
    log = tmp_path / "worker.log"
    body = {"name": "tiny", "format": "onnx", "target": "host", "trials": 16,
            "source": base64.b64encode(tiny_cnn(seed=7).SerializeToString()).decode(),
            "inputs": [{"name": "x", "shape": [1, 3, 16, 16]}]}  # fmt: skip
    with (
        ServerThread(create_app(settings, run_reaper=True)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=120) as client,
    ):
        worker = start(["worker", "--target", "host", "--name", "pytest-m@test"], env, log)
        try:
            wait_until(
                lambda: _workers(client).get("pytest-m@test", {}).get("status") == "live", 120, log
            )
            created = client.post("/models", json=body)
            assert created.status_code == 201, created.text
            model_id = created.json()["id"]

            def running_task() -> dict | None:
                tasks = client.get(f"/models/{model_id}").json()["tasks"]
                busy = [t for t in tasks if t["job"]["state"] == "running"]
                return busy[0] if busy and busy[0]["job"]["trials_done"] >= 4 else None

            victim_task = wait_until(running_task, 300, log)
            victim = psutil.Process(_workers(client)["pytest-m@test"]["pid"])
            family = [victim.pid] + [c.pid for c in victim.children(recursive=True)]
            victim.send_signal(signal.SIGKILL)
            wait_until(lambda: not any(psutil.pid_exists(p) and _alive(p) for p in family), 30, log)

            def final() -> dict | None:
                model = client.get(f"/models/{model_id}").json()
                return model if model["state"] in ("succeeded", "failed", "cancelled") else None

            model = wait_until(final, 600, log)
            assert model["state"] == "succeeded", model["error"]
            job = next(t["job"] for t in model["tasks"] if t["name"] == victim_task["name"])
            assert job["state"] == "succeeded"
            assert client.get(f"/jobs/{job['id']}").json()["attempt"] >= 2  # requeued, resumed
            records, distinct_traces = _records(pg_database, job["id"])
            assert records == distinct_traces  # nothing measured twice
            assert {t["job"]["state"] for t in model["tasks"]} == {"succeeded"}
            artifact = client.get(f"/models/{model_id}/artifact")
            assert artifact.status_code == 200
            assert artifact.headers["x-content-sha256"] == model["result"]["artifact_sha256"]
        finally:
            leftovers = stop(worker)
        assert leftovers == [], f"processes left behind: {leftovers}"

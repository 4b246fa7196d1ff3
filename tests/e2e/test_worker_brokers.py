"""A `tunehub worker` process on the production topology: PostgreSQL store, a Redis broker, the
API in another process (here: a real uvicorn server in the test process). RabbitMQ, the other
network broker, carries every job of `tests.e2e.test_replicas` and `tests.e2e.test_fleet`."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, func, select

from schedules_db.tables import TuningRecordRow
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, reset_pg_schema
from tests.e2e.helpers import start, stop, wait_job

pytestmark = pytest.mark.e2e
AMQP_URL = os.environ.get("TUNEHUB_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def _amqp_url() -> str:
    from kombu import Connection

    try:
        with Connection(AMQP_URL, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as err:  # noqa: BLE001
        pytest.fail(f"RabbitMQ at {AMQP_URL} is required and unreachable: {err}")
    return AMQP_URL


def test_worker_on_postgresql_and_a_redis_broker(
    pg_database: str, redis_url: str, tmp_path: Path
) -> None:
    broker, broker_url = "redis", redis_url
    reset_pg_schema(pg_database)
    settings = Settings(
        data_dir=tmp_path, database_url=pg_database, broker_url=broker_url, num_trials_per_iter=4
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env.update(settings.as_env())
    log = tmp_path / "worker.log"
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client,
    ):
        # Submit before the worker exists: the job waits in the broker, not in memory.
        body = {
            "operator": {"name": "matmul", "params": {"M": 32, "N": 48, "K": 16}},
            "target": "host",
            "trials": 8,
        }
        created = client.post("/jobs", json=body)
        assert created.status_code == 201 and created.json()["state"] == "queued"
        worker = start(["worker", "--target", "host", "--name", f"pytest-{broker}@test"], env, log)
        try:
            job = wait_job(client, created.json()["id"], 400, log)
        finally:
            leftovers = stop(worker)
        assert job["state"] == "succeeded", job["error"]
        assert job["worker"] == f"pytest-{broker}@test"
        sched = client.get(f"/schedules/{job['schedule_id']}").json()
        assert sched["max_abs_error"] < 1e-4 and sched["trials"] == 8
        artifact = client.get(f"/schedules/{job['schedule_id']}/artifact")
        assert artifact.status_code == 200 and len(artifact.content) == sched["artifact"]["size"]
    engine = create_engine(pg_database)
    with engine.connect() as conn:
        count = conn.execute(
            select(func.count(TuningRecordRow.id)).where(TuningRecordRow.job_id == job["id"])
        ).scalar()
    engine.dispose()
    assert count == 8
    assert leftovers == [], f"processes left behind: {leftovers}"

"""The worker fleet on the production topology: PostgreSQL store, RabbitMQ broker, workers and
the API in processes of their own. Routing by target, the worker registry, `kill -9` of a worker
mid-job, a restart of the API mid-job, and cancellation."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import create_engine, distinct, func, select

from schedules_db.keys import target_key
from schedules_db.tables import TuningRecordRow
from service.client import TunehubClient
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, free_port, reset_pg_schema
from tests.e2e.helpers import (
    cli,
    start,
    stop,
    unreachable_target_figures,
    wait_http,
    wait_job,
    wait_until,
)
from tests.e2e.test_worker_brokers import _amqp_url
from tests.waiting import eventually
from tuning.hardware.targets import resolve_target

pytestmark = pytest.mark.e2e
TINY = {"M": 16, "N": 24, "K": 8}


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env.update(settings.as_env())
    return env


def _records(database_url: str, job_id: int) -> tuple[int, int]:
    """(records, distinct traces) stored for a job."""
    engine = create_engine(database_url)
    with engine.connect() as conn:
        row = conn.execute(
            select(
                func.count(TuningRecordRow.id), func.count(distinct(TuningRecordRow.trace_sha256))
            ).where(TuningRecordRow.job_id == job_id)
        ).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def _fleet_settings(pg_database: str, data_dir: Path, **timing: float) -> Settings:
    """PostgreSQL (emptied) + RabbitMQ, small batches, fast heartbeats, and ``timing``."""
    reset_pg_schema(pg_database)
    return Settings(
        data_dir=data_dir,
        database_url=pg_database,
        broker_url=_amqp_url(),
        num_trials_per_iter=4,
        heartbeat_every_s=1,
        requeue_after_s=20,
        **timing,
    )


def _workers(client: httpx.Client) -> dict[str, dict]:
    return {w["name"]: w for w in client.get("/workers").json()}


def test_routing_registry_and_recovery_from_kill_9(pg_database: str, tmp_path: Path) -> None:
    settings = _fleet_settings(pg_database, tmp_path, stale_after_s=6, reaper_every_s=1)
    host = resolve_target("host").canonical
    one_core = resolve_target({**host, "num-cores": 1})  # two llvm targets on this machine
    two_cores = resolve_target({**host, "num-cores": 2})
    env = _env(settings)
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b")}
    workers = {}
    with (
        ServerThread(create_app(settings, run_reaper=True)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client,
    ):
        # Before any worker exists, a job waits and says why.
        body_b = {"operator": {"name": "matmul", "params": TINY}, "target": two_cores.canonical}
        job_b = client.post("/jobs", json={**body_b, "trials": 4}).json()
        assert job_b["state"] == "queued" and "no live worker" in job_b["waiting_for"]
        try:
            workers["a"] = start(
                ["worker", "--target", json.dumps(one_core.canonical), "--name", "pytest-a@test"],
                env,
                logs["a"],
            )
            workers["b"] = start(
                ["worker", "--target", json.dumps(two_cores.canonical), "--name", "pytest-b@test"],
                env,
                logs["b"],
            )
            fleet = wait_until(
                lambda: (
                    (w := _workers(client))
                    and all(w.get(f"pytest-{n}@test", {}).get("status") == "live" for n in "ab")
                    and w
                ),
                120,
                logs["a"],
            )
            a = fleet["pytest-a@test"]
            assert [t["label"] for t in a["targets"]] == [one_core.label]
            assert a["fingerprint"]["physical_cores"] >= 1 and a["fingerprint"]["tvm_version"]
            assert a["fingerprint"]["cpu_model"] and "isa_flags" in a["fingerprint"]
            assert a["pid"] != workers["a"].pid  # the supervised worker, not its supervisor
            served = {t["label"]: t["served"] for t in client.get("/targets").json()["targets"]}
            assert served[one_core.label] and served[two_cores.label]

            # Routing: a job names its target by label; each worker runs only its own target.
            job_a = client.post(
                "/jobs",
                json={"operator": {"name": "matmul", "params": TINY}, "target": one_core.label,
                      "trials": 4},
            ).json()  # fmt: skip
            assert job_a["target"]["key"] == target_key(one_core.canonical)
            done_a = wait_job(client, job_a["id"], 300, logs["a"])
            done_b = wait_job(client, job_b["id"], 300, logs["b"])
            assert (done_a["state"], done_a["worker"]) == ("succeeded", "pytest-a@test")
            assert (done_b["state"], done_b["worker"]) == ("succeeded", "pytest-b@test")

            # kill -9 the worker of target A in the middle of a job.
            long_body = {
                "operator": {"name": "matmul", "params": {"M": 64, "N": 48, "K": 32}},
                "target": one_core.label,
                "trials": 12,
            }
            job_k = client.post("/jobs", json=long_body).json()
            wait_until(
                lambda: client.get(f"/jobs/{job_k['id']}").json()["progress"]["trials_done"] >= 4,
                300,
                logs["a"],
            )
            victim = psutil.Process(_workers(client)["pytest-a@test"]["pid"])
            family = [victim.pid] + [c.pid for c in victim.children(recursive=True)]
            assert len(family) > 1  # TVM's popen pools run under the worker
            victim.send_signal(signal.SIGKILL)
            # The supervisor removes the whole process group, TVM popen workers included.
            wait_until(
                lambda: not any(psutil.pid_exists(p) and _alive(p) for p in family), 30, logs["a"]
            )
            # The job goes stale, the reaper requeues it, the restarted worker resumes it.
            done_k = wait_job(client, job_k["id"], 400, logs["a"])
            assert done_k["state"] == "succeeded", done_k["error"]
            assert done_k["attempt"] >= 2 and done_k["worker"] == "pytest-a@test"
            # Resumed, nothing measured twice: 12 trials, or fewer when the resumed search
            # stopped at the workload's roofline (a fast host reaches it on this tiny matmul).
            done = done_k["progress"]["trials_done"]
            records, distinct_traces = _records(pg_database, job_k["id"])
            assert records == distinct_traces == done and 4 < done <= 12
            sched = client.get(f"/schedules/{done_k['schedule_id']}").json()
            assert sched["max_abs_error"] < 1e-4 and sched["speedup_vs_untuned"] > 0
            restarted = _workers(client)["pytest-a@test"]
            assert restarted["status"] == "live" and restarted["pid"] != victim.pid
        finally:
            leftovers = [pid for proc in workers.values() for pid in stop(proc)]
        assert leftovers == [], f"processes left behind: {leftovers}"
        assert {w["status"] for w in _workers(client).values()} == {"stopped"}


def _answers(port: int) -> bool:
    """Whether anything on this machine accepts connections on ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_api_restart_mid_job_and_cancel_on_rabbitmq(pg_database: str, tmp_path: Path) -> None:
    settings = _fleet_settings(pg_database, tmp_path, stale_after_s=30, reaper_every_s=2)
    env = _env(settings)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api_log, worker_log = tmp_path / "api.log", tmp_path / "worker.log"
    api_args = ["serve", "--workers", "0", "--port", str(port)]
    api = start(api_args, env, api_log)
    worker = start(["worker", "--target", "host", "--name", "pytest-w@test"], env, worker_log)
    try:
        wait_http(f"{url}/healthz", api, api_log)
        with TunehubClient(url, timeout=30) as client:
            body = {"M": 64, "N": 32, "K": 32}
            job = client.submit("matmul", body, "host", 16)
            seen: list[dict] = []
            result: dict = {}
            watcher = threading.Thread(
                target=lambda: result.update(
                    client_watch(url, job["id"], seen)  # its own client: a separate connection
                ),
                daemon=True,
            )
            watcher.start()
            wait_until(
                lambda: client.job(job["id"])["progress"]["trials_done"] >= 4, 300, worker_log
            )
            # The API dies hard mid-job and comes back; the worker never notices.
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(timeout=10)
            eventually(lambda: not _answers(port), what=f"port {port} still answers")
            api = start(api_args, env, api_log.with_suffix(".2.log"))
            wait_http(f"{url}/healthz", api, api_log.with_suffix(".2.log"))
            watcher.join(timeout=400)
            assert result.get("state") == "succeeded", result
            final = client.job(job["id"])
            assert final["state"] == "succeeded" and final["attempt"] == 1
            assert final["progress"]["trials_done"] == 16 and final["schedule_id"]
            # The watcher followed the job across the restart, through server-sent events.
            states = [e["state"] for e in seen]
            assert "running" in states and states[-1] in ("running", "succeeded")
            done = [e["progress"]["trials_done"] for e in seen]
            assert done == sorted(done) and max(done) >= 4

            # Cancel mid-job on RabbitMQ. The cancel must land before the search can end by
            # itself: a search whose batch reaches 85% of the roofline stops and succeeds, and
            # a plain 256^3 matmul did so in its first batch on a fast host. Freezing the worker
            # once the job ran raced its first batch (a slow poll on a busy machine came after
            # it); with a roofline no kernel comes near, the 400-trial job runs until the
            # cancel lands, however fast or busy the machine.
            unreachable_target_figures(pg_database)
            long_job = client.submit(
                "matmul", {"M": 256, "N": 256, "K": 256}, "host", 400, space="plain"
            )
            wait_until(lambda: client.job(long_job["id"])["state"] == "running", 300, worker_log)
            cancel = cli(["cancel", str(long_job["id"]), "--server", url], env)
            assert cancel.returncode == 0, cancel.stderr
            watched = cli(["watch", str(long_job["id"]), "--server", url], env, timeout_s=120)
            assert watched.returncode == 1 and "cancelled" in watched.stderr
            cancelled = client.job(long_job["id"])
            assert cancelled["state"] == "cancelled"
            assert 4 <= cancelled["progress"]["trials_done"] < 400
            records, distinct_traces = _records(pg_database, long_job["id"])
            assert records == distinct_traces == cancelled["progress"]["trials_done"]

            # A queued job (no worker serves its target) is cancelled at once; its RabbitMQ
            # message is revoked as a best effort, and nothing runs it.
            unserved = {"kind": "llvm", "mcpu": "skylake", "num-cores": 1}
            waiting = client.submit("matmul", TINY, unserved, 4)
            assert "no live worker" in waiting["waiting_for"]
            started = time.monotonic()
            assert client.cancel(waiting["id"])["state"] == "cancelled"
            assert time.monotonic() - started < 5
    finally:
        leftovers = stop(worker) + stop(api)
    assert leftovers == [], f"processes left behind: {leftovers}"


def client_watch(url: str, job_id: int, seen: list[dict]) -> dict:
    """Follow a job with the client's event stream (reconnecting across API restarts)."""
    with TunehubClient(url, timeout=30) as client:
        return client.watch(job_id, on_progress=seen.append, reconnect_s=0.5)

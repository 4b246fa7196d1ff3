"""A fleet with no shared disk, as separate hosts would run it: two API replicas, each with its
own data dir, and two workers, each in a mount namespace of its own in which every other data
dir is an empty tmpfs; PostgreSQL (store and artifacts), RabbitMQ (broker), Redis (shared
limits). Jobs and a model are submitted through one replica, everything is downloaded through
the other byte for byte as the database holds it, the first replica is killed mid-job (its
reaper lease passes to the other, and the jobs, the model, their events and downloads finish
through it), and an identity's write burst is spent over both replicas."""

from __future__ import annotations

import base64
import hashlib
import signal
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from schedules_db import make_engine, upgrade_schema
from schedules_db.blobs import DatabaseBlobs, StoredBlob
from schedules_db.tables import LeaseRow
from schedules_db.tokens import TokenStore
from service.shared.settings import Settings
from tests.conftest import free_port, reset_pg_schema
from tests.e2e.helpers import serve_env, start, stop, wait_http, wait_until
from tests.e2e.test_fleet import _workers
from tests.e2e.test_worker_brokers import _amqp_url
from tests.tuning.model_cases import tiny_cnn

pytestmark = pytest.mark.e2e
HOSTS = ("api-a", "api-b", "worker-1", "worker-2")


def _env(settings: Settings) -> dict[str, str]:
    env = serve_env()
    env.update(settings.as_env())
    return env


def _replica(settings: Settings, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = start(["serve", "--workers", "0", "--port", str(port)], _env(settings), log)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthz", proc, log)
    return proc, url


def _jailed_worker(
    settings: Settings, hidden: list[Path], name: str, log: Path
) -> subprocess.Popen:
    """`tunehub worker` in a new mount namespace where each of ``hidden`` is an empty tmpfs."""
    mounts = " && ".join(f"mount -t tmpfs -o size=1m tunehub-hidden '{d}'" for d in hidden)
    command = (
        f"{mounts} && exec '{sys.executable}' -m service.entry.cli worker --target host"
        f" --name {name}"
    )
    handle = open(log, "wb")  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", command],
        env=_env(settings),
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proc.log_handle = handle  # type: ignore[attr-defined]
    return proc


def _lease_holder(database_url: str) -> str | None:
    engine = make_engine(database_url)
    with engine.connect() as conn:
        holder = conn.execute(select(LeaseRow.holder).where(LeaseRow.name == "reaper")).scalar()
    engine.dispose()
    return holder


def _events_until_end(url: str, headers: dict[str, str], job_id: int) -> list[str]:
    kinds = []
    with httpx.stream("GET", f"{url}/api/v1/jobs/{job_id}/events", headers=headers,
                      timeout=httpx.Timeout(30, read=600)) as stream:  # fmt: skip
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kinds.append(line.removeprefix("event: "))
                if kinds[-1] == "end":
                    break
    return kinds


def test_replicas_and_workers_on_separate_hosts_share_only_database_and_broker(
    pg_database: str, redis_url: str, tmp_path: Path
) -> None:
    reset_pg_schema(pg_database)
    engine = make_engine(pg_database)
    upgrade_schema(engine)
    run = uuid.uuid4().hex[:8]
    tokens = {who: TokenStore(engine).create(f"{who}-{run}", ["admin"])[0]
              for who in ("fleet", "limited")}  # fmt: skip
    engine.dispose()
    dirs = {host: tmp_path / host for host in HOSTS}
    for host, folder in dirs.items():
        folder.mkdir()
        (folder / "host").write_text(host)  # what only this host sees
    logs = {host: tmp_path / f"{host}.log" for host in HOSTS}
    base = Settings(
        database_url=pg_database,
        broker_url=_amqp_url(),
        redis_url=redis_url,  # and no artifact setting: on PostgreSQL, artifacts go there
        auth=True,
        write_rate_per_s=0.01,
        write_burst=6,
        num_trials_per_iter=4,
        heartbeat_every_s=1,
        reaper_every_s=1,
        stale_after_s=6,
        requeue_after_s=10,
    )
    on = {host: replace(base, data_dir=dirs[host]) for host in HOSTS}
    procs: dict[str, subprocess.Popen] = {}
    fleet = {"Authorization": f"Bearer {tokens['fleet']}"}
    try:
        procs["api-a"], url_a = _replica(on["api-a"], logs["api-a"])
        # A holds the reaper lease before B exists: B must take it over when A dies.
        wait_until(lambda: (_lease_holder(pg_database) or "").split(":")[1:2]
                   == [str(procs["api-a"].pid)], 30, logs["api-a"])  # fmt: skip
        procs["api-b"], url_b = _replica(on["api-b"], logs["api-b"])
        for i, host in enumerate(("worker-1", "worker-2")):
            hidden = [dirs[h] for h in HOSTS if h != host]
            procs[host] = _jailed_worker(on[host], hidden, f"w{i + 1}-{run}@{host}", logs[host])
        a = httpx.Client(base_url=url_a + "/api/v1", headers=fleet, timeout=120)
        b = httpx.Client(base_url=url_b + "/api/v1", headers=fleet, timeout=120)

        # An identity's write burst (6) is spent over both replicas; the 7th write is a 429.
        limited = {"Authorization": f"Bearer {tokens['limited']}"}
        spent = [httpx.post(f"{url}/api/v1/jobs/999999/cancel", headers=limited).status_code
                 for url in (url_a, url_b) * 3]  # fmt: skip
        assert spent == [404] * 6
        refused = httpx.post(f"{url_b}/api/v1/jobs/999999/cancel", headers=limited)
        assert refused.status_code == 429 and refused.json()["type"] == "rate_limited"

        names = {f"w1-{run}@worker-1", f"w2-{run}@worker-2"}
        wait_until(lambda: names <= {n for n, w in _workers(b).items() if w["status"] == "live"},
                   240, logs["worker-2"])  # fmt: skip
        # Each worker sees an empty tmpfs where the other hosts' data dirs are.
        for host in ("worker-1", "worker-2"):
            seen = Path(f"/proc/{_workers(b)[next(n for n in names if host in n)]['pid']}/root")
            for other in HOSTS:
                if other != host:
                    assert list((seen / str(dirs[other]).lstrip("/")).iterdir()) == []
            assert (dirs[host] / "host").read_text() == host  # while the host has its own

        # Operator jobs through A; their libraries through both, as the database holds them.
        jobs = [
            a.post("/jobs", json={"operator": {"name": "matmul", "params": {"M": m, "N": 24,
                                  "K": 8}}, "target": "host", "trials": 8}).json()["id"]
            for m in (16, 20)
        ]  # fmt: skip
        for job_id in jobs:
            job = wait_until(lambda j=job_id: _final(b, j), 300, logs["worker-1"])
            assert job["state"] == "succeeded", job["error"]
            path = f"/schedules/{job['schedule_id']}/artifact"
            from_a, from_b = a.get(path), b.get(path)
            assert from_a.status_code == from_b.status_code == 200
            assert from_a.content == from_b.content == _stored(pg_database, from_b.headers)

        # A model through A; A is killed while its tasks tune.
        onnx = base64.b64encode(tiny_cnn(seed=3).SerializeToString()).decode()
        created = a.post("/models", json={"name": "tiny", "format": "onnx", "target": "host",
                         "trials": 12, "source": onnx,
                         "inputs": [{"name": "x", "shape": [1, 3, 16, 16]}]})  # fmt: skip
        assert created.status_code == 201, created.text
        model_id = created.json()["id"]
        running = wait_until(lambda: _running_task(b, model_id), 300, logs["worker-1"])
        procs["api-a"].send_signal(signal.SIGKILL)
        procs["api-a"].wait(timeout=30)
        with pytest.raises(httpx.TransportError):
            a.get("/jobs")
        # B streams the task's events to its end, takes the reaper lease over, and serves
        # the model compiled by whichever worker took it.
        assert _events_until_end(url_b, fleet, running)[-1] == "end"
        wait_until(lambda: (_lease_holder(pg_database) or "").split(":")[1:2]
                   == [str(procs["api-b"].pid)], 30, logs["api-b"])  # fmt: skip
        model = wait_until(lambda: _final_model(b, model_id), 600, logs["worker-2"])
        assert model["state"] == "succeeded", model["error"]
        got = b.get(f"/models/{model_id}/artifact")
        assert got.status_code == 200
        assert got.headers["x-content-sha256"] == model["result"]["artifact_sha256"]
        assert got.content == _stored(pg_database, got.headers)
        for task in model["tasks"]:
            schedule = b.get(f"/jobs/{task['job']['id']}").json()["schedule_id"]
            library = b.get(f"/schedules/{schedule}/artifact")
            assert library.content == _stored(pg_database, library.headers)
    finally:
        leftovers = {host: stop(proc) for host, proc in procs.items() if proc.poll() is None}
        for proc in procs.values():
            if not proc.log_handle.closed:  # type: ignore[attr-defined]
                proc.log_handle.close()  # type: ignore[attr-defined]
    assert not any(leftovers.values()), f"processes left behind: {leftovers}"


def _final(client: httpx.Client, job_id: int) -> dict | None:
    job = client.get(f"/jobs/{job_id}").json()
    return job if job["state"] in ("succeeded", "failed", "cancelled") else None


def _final_model(client: httpx.Client, model_id: int) -> dict | None:
    model = client.get(f"/models/{model_id}").json()
    return model if model["state"] in ("succeeded", "failed", "cancelled") else None


def _running_task(client: httpx.Client, model_id: int) -> int | None:
    tasks = client.get(f"/models/{model_id}").json()["tasks"]
    return next((t["job"]["id"] for t in tasks if t["job"]["state"] == "running"), None)


def _stored(database_url: str, headers: httpx.Headers) -> bytes:
    """The blob's bytes as the database holds them (and checks them)."""
    sha = headers["x-content-sha256"]
    engine = make_engine(database_url)
    try:
        data = b"".join(DatabaseBlobs(engine).verified_chunks(StoredBlob(sha, 0, "")))
    finally:
        engine.dispose()
    assert hashlib.sha256(data).hexdigest() == sha
    return data

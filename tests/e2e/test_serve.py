"""`tunehub serve` as a user runs it: API + local worker + SQLite store + SQLite broker."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.e2e.helpers import cli, start_serve, stop, wait_job, wait_until

pytestmark = pytest.mark.e2e
SHAPE = {"M": 64, "N": 64, "K": 64}


def test_serve_tunes_verifies_and_serves_a_matmul(tmp_path: Path) -> None:
    import tvm

    server, url, log = start_serve(tmp_path)
    try:
        with httpx.Client(base_url=url + "/api/v1", timeout=30) as client:
            body = {"operator": {"name": "matmul", "params": SHAPE}, "target": "host", "trials": 8}
            created = client.post("/jobs", json=body)
            assert created.status_code == 201, created.text
            job = wait_job(client, created.json()["id"], 400, log)
            assert job["state"] == "succeeded", job["error"]
            assert job["progress"]["trials_done"] == 8 and job["progress"]["best_gflops"] > 0
            assert job["worker"].startswith("local0-")

            sched = client.get(f"/schedules/{job['schedule_id']}").json()
            assert sched["speedup_vs_untuned"] >= 1 and sched["max_abs_error"] < 1e-4

            # The CLI fetches the library and checks its sha256; TVM loads it; it is A @ B.
            lib = tmp_path / "libmatmul.so"
            fetched = cli(["fetch", str(job["schedule_id"]), "-o", str(lib), "--server", url])
            assert fetched.returncode == 0, fetched.stderr
            assert sched["artifact"]["sha256"] in fetched.stdout
            module = tvm.runtime.load_module(str(lib))
            rng = np.random.default_rng(3)
            a = rng.standard_normal((64, 64)).astype("float32")
            b = rng.standard_normal((64, 64)).astype("float32")
            out = tvm.runtime.empty((64, 64), "float32", tvm.cpu(0))
            module["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
            np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)

            # Submitting the same thing again through the CLI is a cache hit.
            again = cli(
                [
                    "submit",
                    "matmul",
                    "--param",
                    "M=64",
                    "--param",
                    "N=64",
                    "--param",
                    "K=64",
                    "--trials",
                    "8",
                    "--wait",
                    "--server",
                    url,
                ]
            )
            assert again.returncode == 0, again.stderr
            assert "cache hit" in again.stdout
            assert f"schedule {job['schedule_id']}:" in again.stdout
            assert "faster than untuned" in again.stdout

            listed = cli(["schedules", "--operator", "matmul", "--server", url])
            assert listed.returncode == 0 and "M=64,N=64,K=64" in listed.stdout

            missing = cli(["fetch", "999", "-o", str(tmp_path / "x.so"), "--server", url])
            assert missing.returncode != 0 and "not found" in missing.stderr
            bad = cli(
                [
                    "submit",
                    "matmul",
                    "--param",
                    "M=0",
                    "--param",
                    "N=1",
                    "--param",
                    "K=1",
                    "--server",
                    url,
                ]
            )
            assert bad.returncode != 0 and "422" in bad.stderr and "M" in bad.stderr

            # Cancel mid-job on the SQLite broker: the search stops after the current batch,
            # the records measured so far stay, and `tunehub watch` reports the end.
            long_job = client.post(
                "/jobs",
                json={
                    "operator": {"name": "matmul", "params": {"M": 96, "N": 64, "K": 32}},
                    "trials": 200,
                },
            ).json()
            running = wait_until(
                lambda: (
                    (j := client.get(f"/jobs/{long_job['id']}").json())["progress"]["trials_done"]
                    >= 4
                    and j
                ),
                120,
                log,
            )
            assert running["state"] == "running"
            cancelled = cli(["cancel", str(long_job["id"]), "--server", url])
            assert cancelled.returncode == 0, cancelled.stderr
            watched = cli(["watch", str(long_job["id"]), "--server", url], timeout_s=120)
            assert watched.returncode == 1 and "cancelled" in watched.stderr, watched
            final = client.get(f"/jobs/{long_job['id']}").json()
            assert final["state"] == "cancelled" and final["schedule_id"] is None
            assert 4 <= final["progress"]["trials_done"] < 200
            assert "trials" in watched.stdout  # the progress bar was drawn from the events
            with sqlite3.connect(tmp_path / "data" / "tunehub.db") as db:
                (kept,) = db.execute(
                    "SELECT COUNT(*) FROM tuning_records WHERE job_id = ?", (long_job["id"],)
                ).fetchone()
            assert kept == final["progress"]["trials_done"]
    finally:
        leftovers = stop(server)
    assert leftovers == [], f"processes left behind: {leftovers}"

"""A worker that measures through a TVM RPC tracker: a real `rpc_tracker` and `rpc_server` on
loopback stand in for a board that cannot run a worker itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, free_port
from tests.e2e.helpers import start, stop, wait_job
from tuning.hardware.targets import resolve_target

pytestmark = pytest.mark.e2e
RPC_KEY = "pytest-board"


def _tvm_exec(module: str, args: list[str], log: Path) -> subprocess.Popen:
    handle = open(log, "wb")  # noqa: SIM115 - closed at the end of the test
    proc = subprocess.Popen(
        [sys.executable, "-m", f"tvm.exec.{module}", *args],
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proc.log_handle = handle  # type: ignore[attr-defined]
    return proc


def _wait_for_server_on_tracker(port: int, timeout_s: float = 60) -> None:
    from tvm import rpc

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            summary = rpc.connect_tracker("127.0.0.1", port).summary()
            if any(RPC_KEY in str(s.get("key", "")) for s in summary.get("server_info", [])):
                return
        except Exception:  # noqa: BLE001 - the tracker is still starting
            pass
        time.sleep(0.5)
    raise AssertionError("the RPC server did not register with the tracker")


def test_tuning_through_an_rpc_tracker(tmp_path: Path) -> None:
    tracker_port, server_port = free_port(), free_port()
    logs = {n: tmp_path / f"{n}.log" for n in ("tracker", "server", "worker")}
    tracker = _tvm_exec(
        "rpc_tracker",
        ["--host", "127.0.0.1", "--port", str(tracker_port), "--port-end", str(tracker_port + 1)],
        logs["tracker"],
    )
    server = _tvm_exec(
        "rpc_server",
        [
            "--host", "127.0.0.1", "--port", str(server_port), "--port-end", str(server_port + 1),
            "--tracker", f"127.0.0.1:{tracker_port}", "--key", RPC_KEY,
        ],
        logs["server"],
    )  # fmt: skip
    settings = Settings(data_dir=tmp_path / "data", num_trials_per_iter=4, heartbeat_every_s=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env.update(settings.as_env())
    # The "board" is this machine's CPU, named by its JSON target as a remote device would be.
    board = resolve_target("host").canonical
    worker = None
    try:
        _wait_for_server_on_tracker(tracker_port)
        worker = start(
            [
                "worker", "--target", json.dumps(board), "--name", "pytest-rpc@test",
                "--rpc-tracker", f"127.0.0.1:{tracker_port}", "--rpc-key", RPC_KEY,
            ],
            env,
            logs["worker"],
        )  # fmt: skip
        with (
            ServerThread(create_app(settings, run_reaper=False)) as api,
            httpx.Client(base_url=api.url + "/api/v1", timeout=30) as client,
        ):
            body = {
                "operator": {"name": "matmul", "params": {"M": 16, "N": 32, "K": 8}},
                "target": board,
                "trials": 4,
            }
            job = wait_job(
                client, client.post("/jobs", json=body).json()["id"], 300, logs["worker"]
            )
            assert job["state"] == "succeeded", job["error"]
            sched = client.get(f"/schedules/{job['schedule_id']}").json()
            assert sched["max_abs_error"] < 1e-4 and sched["trials"] == 4
            registered = {w["name"]: w for w in client.get("/workers").json()}["pytest-rpc@test"]
            assert registered["rpc"] == {"tracker": f"127.0.0.1:{tracker_port}", "key": RPC_KEY}
    finally:
        leftovers = stop(worker) if worker else []
        for proc in (server, tracker):
            proc.terminate()
            proc.wait(timeout=10)
            proc.log_handle.close()  # type: ignore[attr-defined]
    # The candidates and the published kernel ran in the RPC server's sessions.
    server_log = logs["server"].read_text()
    assert server_log.count("connected from") >= 2 or server_log.count("connection from") >= 2, (
        server_log[-3000:]
    )
    assert leftovers == []

"""Starting and stopping real tunehub processes for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.waiting import eventually


def serve_env() -> dict[str, str]:
    """This process's environment for a `tunehub serve` a test starts: no TUNEHUB_ setting
    of the caller's, small search batches (4) and the suite's short kernel timings."""
    from tests.conftest import TIMING_MS

    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env["TUNEHUB_NUM_TRIALS_PER_ITER"] = "4"
    env["TUNEHUB_TIMING_MS"] = TIMING_MS
    return env


def start_serve(folder: Path, *args: str) -> tuple[subprocess.Popen, str, Path]:
    """`tunehub serve ARGS` on a free port with its data under ``folder`` (`serve_env`), once
    it answers: the process, its URL and its log."""
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    log = folder / "serve.log"
    port = url.rsplit(":", 1)[1]
    proc = start(["serve", "--port", port, "--data-dir", str(folder / "data"), *args],
                 serve_env(), log)  # fmt: skip
    try:
        wait_http(f"{url}/healthz", proc, log)
    except BaseException:
        stop(proc)
        raise
    return proc, url, log


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``python -m service.entry.cli ARGS`` in its own process group, logging to ``log``."""
    handle = open(log, "wb")  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.entry.cli", *args],
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proc.log_handle = handle  # type: ignore[attr-defined]
    return proc


def stop(proc: subprocess.Popen) -> list[int]:
    """SIGTERM the process group, SIGKILL it if needed; returns pids of the group still alive."""
    members = [proc.pid]
    with contextlib.suppress(psutil.NoSuchProcess):
        members += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    proc.log_handle.close()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    alive = [p for p in members if psutil.pid_exists(p) and _not_zombie(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if psutil.pid_exists(p) and _not_zombie(p)]
    return alive


def _not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    """Wait until ``url`` answers 200 (fail early if the process died)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer in {timeout_s} s:\n{log.read_text()[-3000:]}")


def wait_job(client: httpx.Client, job_id: int, timeout_s: float, log: Path) -> dict:
    """Poll a job until it is final; fail with the worker log if it takes too long."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(1)
    raise AssertionError(f"job {job_id} not final after {timeout_s} s:\n{log.read_text()[-4000:]}")


def cli(
    args: list[str], env: dict[str, str] | None = None, timeout_s: float = 300
) -> subprocess.CompletedProcess:
    """Run the `tunehub` CLI to completion."""
    return subprocess.run(
        [sys.executable, "-m", "service.entry.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def wait_until(
    condition: Callable[[], Any], timeout_s: float, log: Path, poll_s: float = 0.5
) -> Any:
    """Poll ``condition`` until it returns something truthy (returned); fail with the log."""
    return eventually(condition, timeout_s, poll_s, what=lambda: f"\n{log.read_text()[-4000:]}")


def unreachable_target_figures(store_url: str) -> None:
    """Give every target in the store at ``store_url`` a roofline no kernel comes near: a peak
    and bandwidths of 1e12, measured (so the record says) on a quiet machine, so no search stops
    at the roofline before its budget is spent, and no worker measures them again (a quiet
    measurement keeps the best, `CatalogRows.set_peak`). A job that must still be running when
    a test cancels it needs this: a plain 256^3 matmul reached its roofline in its first batch
    on a fast host."""
    from sqlalchemy import update

    from schedules_db import make_engine
    from schedules_db.tables import TargetRow

    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(
            update(TargetRow).values(
                peak_gflops=1e12, cache_gbps=1e12, memory_gbps=1e12, cache_bytes=1 << 20,
                llc_gbps=None, llc_bytes=None, peak_interference=0.0, bandwidth_interference=0.0,
                bf16_interference=0.0,
            )
        )  # fmt: skip
    engine.dispose()

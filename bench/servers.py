"""`tunehub serve` processes for the API benchmarks (`api_load.py`, `artifact_download.py`):
started in their own process group once they answer, stopped with the group, and the CPU time
they used."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    data_dir: Path,
    store_url: str,
    port: int,
    api_workers: int,
    access_log: bool = True,
    auth: bool = False,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`tunehub serve` in its own process group, once it answers /healthz (its log:
    ``data_dir/serve.log``; ``extra_env``: more TUNEHUB_* settings)."""
    env = {**os.environ, "TUNEHUB_DATABASE_URL": store_url, "TUNEHUB_AUTH": "1" if auth else "0"}
    env.update(extra_env or {})
    command = [sys.executable, "-m", "service.entry.cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", "0", "--data-dir", str(data_dir)]
    command += ["--api-workers", str(api_workers)] if api_workers != 1 else []
    command += [] if access_log else ["--no-access-log"]  # (so older `serve`s run it too)
    log = open(data_dir / "serve.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tunehub serve exited: {(data_dir / 'serve.log').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return proc
        except OSError:
            time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError("tunehub serve did not answer within 120 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def server_cpu_s(procs: list[subprocess.Popen]) -> float:
    """CPU seconds used so far by the server processes and their children."""
    total = 0.0
    for proc in procs:
        try:
            root = psutil.Process(proc.pid)
            for one in [root, *root.children(recursive=True)]:
                times = one.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total

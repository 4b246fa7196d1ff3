"""Process care for workers: a supervisor that restarts a crashed worker and removes whatever it
left behind, and the helpers `tunehub serve` uses to start and stop its local workers.

Each worker runs in a session (process group) of its own together with the TVM popen pools it
starts for building and measuring. When the worker dies, by a crash or a ``kill -9``, the
supervisor kills that whole group, so no popen worker outlives it, and starts a fresh worker
after a back-off. The job it was running goes stale and is resumed from its stored records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time

log = logging.getLogger("tunehub.supervisor")

STOP_GRACE_S = 20.0
MAX_BACKOFF_S = 30.0
HEALTHY_AFTER_S = 60.0  # a worker that ran this long resets the back-off


def die_with_parent() -> None:
    """In a child, before exec: get SIGTERM when the parent dies, even by SIGKILL."""
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def start_group(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new process group that dies with this process."""
    return subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=die_with_parent)


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in a process group (a no-op when it is empty)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM a group leader's group, wait ``grace_s``, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def supervise(argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` (a worker) until it exits cleanly, refuses to start (status
    ``os.EX_CONFIG``: its configuration is wrong) or this process is told to stop; restart it
    with exponential back-off when it dies otherwise. Returns its exit status."""
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def on_stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    backoff = 1.0
    while True:
        started = time.monotonic()
        child = start_group(argv, env)
        log.info("worker started, pid %s", child.pid)
        while True:
            try:
                returncode = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if stopping:
                    try:
                        returncode = child.wait(timeout=STOP_GRACE_S)
                    except subprocess.TimeoutExpired:
                        kill_group(child.pid)
                        returncode = child.wait()
                    break
        kill_group(child.pid)  # popen pools the worker left behind
        if stopping or returncode == 0:
            return returncode
        if returncode == os.EX_CONFIG:  # it refused to start: a restart would refuse again
            log.error("worker pid %s refused to start (see its message); not restarted",
                      child.pid)  # fmt: skip
            return returncode
        if time.monotonic() - started > HEALTHY_AFTER_S:
            backoff = 1.0
        log.warning("worker pid %s died (status %s); restarting in %.0f s", child.pid,
                    returncode, backoff)  # fmt: skip
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.2)
        if stopping:
            return returncode
        backoff = min(backoff * 2, MAX_BACKOFF_S)

"""The worker's one heartbeat: a thread that keeps its registry row and its running job fresh.

Every ``every_s`` seconds the thread writes, each in its own transaction:

* the worker's registry row (`Fleet.heartbeat`, with the job it runs), once `start_registry`
  was called: a worker process (`bootstrap.run_worker`) does, a job run in a test does not;
* the running job's heartbeat (`Jobs.heartbeat`), between `beating(job_id)`'s entry and exit.
  When the store answers that this worker no longer owns the job (another worker reclaimed it
  after this one stopped beating for too long), the job's `JobBeat.lost` turns True and the job
  is beaten no more; the runner reads `lost` between batches and gives the job up.

A failed write (a database hiccup) is logged and tried again at the next beat. The thread runs
while there is something to beat and is a daemon: a killed worker simply goes stale.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from schedules_db.store import Store

log = logging.getLogger("tunehub.worker")

STOP_WAIT_S = 10.0  # how long `stop` waits for a beat in flight (a database write)


class JobBeat:
    """The heartbeat of one running job, as the runner sees it."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self._lost = threading.Event()

    @property
    def lost(self) -> bool:
        """True once the store said another worker owns the job."""
        return self._lost.is_set()

    def mark_lost(self) -> None:
        """The store said another worker owns the job (the heartbeat thread calls this)."""
        self._lost.set()


class Heartbeat:
    """One thread beating the worker's registry row (after `start_registry`) and the job it
    runs (inside `beating`)."""

    def __init__(self, store: Store, worker_name: str, every_s: float) -> None:
        self.store, self.worker_name, self.every_s = store, worker_name, every_s
        self._lock = threading.Lock()
        self._registry = False
        self._job: JobBeat | None = None
        self._stop: threading.Event | None = None  # set: the current thread exits
        self._thread: threading.Thread | None = None

    def start_registry(self) -> None:
        """Beat the worker's registry row from now until `stop`."""
        with self._lock:
            self._registry = True
            self._ensure_thread()

    def stop(self) -> None:
        """Stop beating (the registry row and any job) and wait for a beat in flight, so that
        nothing this heartbeat writes lands after the caller's next write (`Fleet.stopped`)."""
        with self._lock:
            self._registry = False
            self._job = None
            thread = self._thread
            self._stop_thread()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=STOP_WAIT_S)

    @contextmanager
    def beating(self, job_id: int) -> Iterator[JobBeat]:
        """Beat ``job_id`` (claimed by this worker) until the block exits."""
        beat = JobBeat(job_id)
        with self._lock:
            self._job = beat
            self._ensure_thread()
        try:
            yield beat
        finally:
            with self._lock:
                self._job = None
                if not self._registry:
                    self._stop_thread()

    # -- the thread (started and stopped under the lock) --------------------------------------
    def _ensure_thread(self) -> None:
        if self._stop is None:
            self._stop = threading.Event()
            thread = threading.Thread(
                target=self._run, args=(self._stop,), name="tunehub-heartbeat", daemon=True
            )
            thread.start()
            self._thread = thread

    def _stop_thread(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
            self._thread = None

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            with self._lock:
                registry, job = self._registry, self._job
            if registry:
                self._beat_registry(job)
            if job is not None and not job.lost:
                self._beat_job(job)

    def _beat_registry(self, job: JobBeat | None) -> None:
        try:
            self.store.fleet.heartbeat(self.worker_name, job.job_id if job else None)
        except Exception:  # a database hiccup: try again next beat
            log.exception("worker heartbeat failed")

    def _beat_job(self, job: JobBeat) -> None:
        try:
            if not self.store.jobs.heartbeat(job.job_id, self.worker_name):
                job.mark_lost()
        except Exception:  # a database hiccup: try again next beat
            log.exception("heartbeat of job %s failed", job.job_id)

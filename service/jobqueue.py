"""The job queue: Celery delivering job ids to the workers of each target.

A message carries only a job id; the job table is the source of truth. One queue per target key
(`queue_name`); a worker consumes the queues of the targets it has, one job at a time
(``acks_late``, ``prefetch_multiplier=1``, solo pool: measurements never share cores).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from typing import Any

from celery import Celery
from kombu.transport import sqlalchemy as kombu_sqlalchemy

from service.settings import Settings

TASK_NAME = "tunehub.tune_job"
SQLITE_BROKER_POLL_S = 0.5

log = logging.getLogger("tunehub.queue")

# The SQLite broker polls; its interval is a class attribute (transport options do not reach it).
kombu_sqlalchemy.Transport.polling_interval = SQLITE_BROKER_POLL_S


def queue_name(target_key: str) -> str:
    """The Celery queue of a target."""
    return f"tunehub.{target_key}"


def make_celery(settings: Settings) -> Celery:
    """A Celery app for these settings, with the tune task registered."""
    app = Celery("tunehub", broker=settings.broker, set_as_current=False)
    options: dict[str, Any] = {}
    if settings.broker.startswith(("redis://", "rediss://")):
        # Redis redelivers an unacked message after visibility_timeout: longer than any job.
        options["visibility_timeout"] = 7 * 24 * 3600
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_transport_options=options,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    app.task(name=TASK_NAME, bind=False, acks_late=True)(_tune_job_task)
    return app


_worker_context: Any = None


def _tune_job_task(job_id: int) -> str:
    """The Celery task. A message only wakes the worker: it runs the job the store says comes
    next on its targets (priority, fair share, age; see `Store.claim_next`), which is usually
    but not always ``job_id``. Every queued job has a message, so every one gets its turn."""
    from tuning.job_runner import run_next

    if _worker_context is None:
        raise RuntimeError("tune task delivered to a process that is not a tunehub worker")
    log.debug("woken by job %s", job_id)
    return run_next(_worker_context)


class _WorkerBeat(threading.Thread):
    """Keeps the worker's registry row fresh (and says which job it runs)."""

    def __init__(self, context: Any, every_s: float) -> None:
        super().__init__(name="tunehub-worker-beat", daemon=True)
        self.context, self.every_s = context, every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                self.context.store.worker_heartbeat(
                    self.context.worker_name, self.context.current_job_id
                )
            except Exception:  # a database hiccup: try again next beat
                log.exception("worker heartbeat failed")


class JobQueue:
    """Sends job ids to the broker (the API side of the queue)."""

    def __init__(self, settings: Settings) -> None:
        self.app = make_celery(settings)

    def enqueue(self, job_id: int, queue: str) -> str:
        """Hand a job to the broker on its target's queue; returns the message's task id."""
        return self.app.send_task(TASK_NAME, args=[job_id], queue=queue).id

    def revoke(self, task_id: str | None) -> bool:
        """Best effort: ask the workers to drop a message not yet started (a cancelled queued
        job's wake-up). Brokers without broadcast (the SQLite one) cannot; the job's state in
        the store is what stops it either way. Returns whether the request went out."""
        if not task_id:
            return False
        try:
            self.app.control.revoke(task_id)
        except Exception as err:  # noqa: BLE001 - e.g. no fanout exchange on the SQL broker
            log.info("revoke of task %s not delivered: %s", task_id, err)
            return False
        return True

    def close(self) -> None:
        """Release broker connections."""
        self.app.close()


def run_worker(
    settings: Settings,
    target_specs: list[str],
    name: str | None = None,
    loglevel: str = "INFO",
    rpc: Any = None,
) -> None:
    """Run a worker for ``target_specs`` ("host" or JSON targets) until it is stopped (blocks).

    The worker records its targets in the store, registers itself (hostname, pid, targets,
    hardware fingerprint) with a heartbeat, and consumes its targets' queues. With ``rpc`` (a
    `tuning.devices.RpcSpec`) it builds here and measures on the device behind the tracker.

    TVM and the tensor intrinsics its targets need are loaded here, once, before the first job
    (see `tuning.intrinsics`: ~1 s for CPU targets, ~30 s when the CUDA set is needed).
    """
    global _worker_context
    from schedules_db import Store, make_engine, upgrade_schema
    from tuning.intrinsics import load_tensor_intrinsics
    from tuning.job_runner import WorkerContext
    from tuning.targets import HOST, current_tvm_series, host_fingerprint, resolve_target
    from tuning.threads import pin_runtime_threads, target_threads

    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    queues, target_ids = [], []
    machine = host_fingerprint()
    for spec in target_specs:
        known = None if spec == HOST or spec.lstrip().startswith("{") else store.find_target(spec)
        target = resolve_target(json.loads(known.canonical_json) if known else spec)
        fingerprint = machine if spec == HOST else {}
        row = store.get_or_create_target(target.canonical, target.kind, target.label, fingerprint)
        queues.append(queue_name(row.key))
        target_ids.append(row.id)
    canonicals = [json.loads(store.get_target(t).canonical_json) for t in target_ids]
    threads = [n for n in map(target_threads, canonicals) if n is not None]
    if threads and rpc is None:
        # Before any kernel runs: TVM sizes this process's thread pool once (tuning.threads).
        log.info("CPU kernels may use up to %d threads", pin_runtime_threads(max(threads)))
    loaded = load_tensor_intrinsics(canonicals)
    log.info("tensor intrinsics registered: %s", ", ".join(loaded))
    node = name or f"tunehub-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    _worker_context = WorkerContext(
        store=store,
        artifact_dir=settings.artifacts,
        worker_name=node,
        stale_after=timedelta(seconds=settings.stale_after_s),
        heartbeat_every_s=settings.heartbeat_every_s,
        num_trials_per_iter=settings.num_trials_per_iter,
        seed=settings.seed,
        target_ids=tuple(target_ids),
        rpc=rpc,
    )
    store.register_worker(
        node, socket.gethostname(), os.getpid(), target_ids, machine, rpc.as_json() if rpc else None
    )
    beat = _WorkerBeat(_worker_context, settings.heartbeat_every_s)
    beat.start()
    app = make_celery(settings)
    log.info("worker %s consuming %s", node, ", ".join(queues))
    try:
        app.worker_main(
            [
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                f"--loglevel={loglevel}",
                f"--hostname={node}",
                "-Q",
                ",".join(queues),
            ]
        )
    finally:
        beat.stopped.set()
        store.worker_stopped(node)

"""The job queue: Celery delivering job ids to the workers of each target (the API's side).

A message carries only a job id; the job table is the source of truth. One queue per target key
(`queue_name`); a worker consumes the queues of the targets it has, one job at a time
(``acks_late``, ``prefetch_multiplier=1``, solo pool: measurements never share cores).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from kombu.transport import sqlalchemy as kombu_sqlalchemy

from service.shared.settings import Settings

CELERY_TASK_NAME = "tunehub.tune_job"  # the broker message of a job (Celery calls it a task)
SQLITE_BROKER_POLL_S = 0.5

log = logging.getLogger("tunehub.queue")

# The SQLite broker polls; its interval is a class attribute (transport options do not reach it).
kombu_sqlalchemy.Transport.polling_interval = SQLITE_BROKER_POLL_S


def queue_name(target_key: str) -> str:
    """The Celery queue of a target."""
    return f"tunehub.{target_key}"


def make_celery(settings: Settings) -> Celery:
    """A Celery app for these settings (the worker registers the tune task on its own:
    `service.worker.consumer`; the API only sends it by name)."""
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
    return app


class JobQueue:
    """Sends job ids to the broker (the API side of the queue)."""

    def __init__(self, settings: Settings) -> None:
        self.app = make_celery(settings)

    def enqueue(self, job_id: int, queue: str) -> str:
        """Hand a job to the broker on its target's queue; returns the message's task id."""
        task_id: str = self.app.send_task(CELERY_TASK_NAME, args=[job_id], queue=queue).id
        return task_id

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

    def reachable(self, timeout_s: float) -> bool:
        """Whether a connection of its own (never the producers' pool) reaches the broker and
        opens a channel, trying once with ``timeout_s`` to connect (the metrics' probe)."""
        try:
            with self.app.connection_for_write(connect_timeout=timeout_s) as conn:
                conn.ensure_connection(max_retries=0, timeout=timeout_s)
                conn.default_channel  # noqa: B018 - a SQL broker connects only here
        except Exception as err:  # noqa: BLE001 - any failure is the answer
            log.debug("broker unreachable: %s", err)
            return False
        return True

    def close(self) -> None:
        """Release broker connections."""
        self.app.close()

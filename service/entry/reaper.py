"""The reaper: keeps the broker in step with the job table, which is the source of truth.

Every few seconds it (1) puts running jobs whose worker stopped heart-beating back in the queue
(the job then resumes from its stored records), (2) re-sends queued jobs whose message may be
lost (a SQLite-broker message delivered to a worker that was SIGKILLed stays invisible forever),
(3) wakes a worker for each model ready to compile (every task job final, or its compiling
worker gone) whose last wake-up is older than that delay, and (4) deletes delivered messages
that the SQLite broker keeps. Jobs are sent as the routes send
them (`service.app.usecases.dispatch`); a broker that is down ends a sweep, and the next one
retries. Every ``gc_every_s`` it also collects the artifact store's garbage
(`schedules_db.blobs.collect`).

One replica of a deployment reaps at a time: each period every replica's reaper tries to hold
the ``reaper`` lease (`schedules_db.store.leases`) for `LEASE_PERIODS` periods, and only its
holder sweeps. A holder that dies stops renewing; another replica takes the lease at its first
period after the lease expired, so within ``LEASE_PERIODS + 1`` periods.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

from sqlalchemy import create_engine, text

from schedules_db.blobs import BlobStore, collect_garbage
from schedules_db.store import Store
from schedules_db.tables import utcnow
from service.app.usecases.cancel import cancel_abandoned_models
from service.app.usecases.dispatch import dispatch, wake_compile
from service.shared.queue import JobQueue
from service.shared.settings import Settings

log = logging.getLogger("tunehub.reaper")
LEASE = "reaper"
LEASE_PERIODS = 2  # the lease lasts this many reaper periods; the holder renews every period


class Reaper(threading.Thread):
    """A daemon thread of the API process running `sweep` every ``settings.reaper_every_s``
    while it holds the deployment's reaper lease."""

    def __init__(
        self, store: Store, queue: JobQueue, settings: Settings, blobs: BlobStore | None = None
    ) -> None:
        super().__init__(name="tunehub-reaper", daemon=True)
        self.store, self.queue, self.settings, self.blobs = store, queue, settings, blobs
        self.stopped = threading.Event()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._collected_at = time.monotonic()  # the first collection waits one gc period

    def run(self) -> None:
        lease = timedelta(seconds=self.settings.reaper_every_s * LEASE_PERIODS)
        try:
            while not self.stopped.wait(self.settings.reaper_every_s):
                try:
                    if self.store.leases.hold(LEASE, self.holder, lease):
                        self.sweep()
                        self._collect_if_due()
                except Exception:
                    log.exception("reaper sweep failed; retrying next period")
        finally:
            with contextlib.suppress(Exception):
                self.store.leases.release(LEASE, self.holder)  # another replica takes over now

    def _collect_if_due(self) -> None:
        """Collect the artifact store's garbage once every ``gc_every_s``."""
        if self.blobs is None or self.settings.gc_every_s <= 0:
            return
        if time.monotonic() - self._collected_at < self.settings.gc_every_s:
            return
        self._collected_at = time.monotonic()
        grace = timedelta(seconds=self.settings.gc_grace_s)
        done = collect_garbage(self.store.engine, self.blobs, grace)
        log.info("artifact store collected: %s", done)

    def sweep(self) -> dict[str, int]:
        """One pass over the job table; returns how many jobs each duty touched."""
        stale = self.store.jobs.requeue_stale(timedelta(seconds=self.settings.stale_after_s))
        for job in stale:
            log.warning("job %s: worker %s is gone; requeued", job.id, job.worker)
        cutoff = utcnow() - timedelta(seconds=self.settings.requeue_after_s)
        resend = {job.id: job for job in self.store.jobs.queued_not_enqueued_since(cutoff)}
        for job in stale:
            resend[job.id] = job
        for job in resend.values():
            dispatch(self.store, self.queue, job)  # a broker that is down ends the sweep
        stale_after = timedelta(seconds=self.settings.stale_after_s)
        for model_id in cancel_abandoned_models(self.store, stale_after):
            log.warning("model %s: cancelled while its compiling worker was lost", model_id)
        models = self.store.models.not_woken_since(cutoff, stale_after)
        for model in models:
            wake_compile(self.store, self.queue, model)
        purged = purge_delivered_sqlite_messages(self.settings.broker)
        return {
            "requeued_stale": len(stale),
            "resent": len(resend),
            "models_woken": len(models),
            "purged": purged,
        }


def purge_delivered_sqlite_messages(broker_url: str) -> int:
    """Delete messages the SQL broker already delivered (it keeps them with visible=0)."""
    if not broker_url.startswith("sqla+"):
        return 0
    engine = create_engine(broker_url[len("sqla+") :])
    try:
        with engine.begin() as conn:
            try:
                result = conn.execute(text("DELETE FROM kombu_message WHERE visible = 0"))
            except Exception:  # the broker has not created its tables yet
                return 0
            return int(result.rowcount or 0)
    finally:
        engine.dispose()

"""The reaper: keeps the broker in step with the job table, which is the source of truth.

Every few seconds it (1) puts running jobs whose worker stopped heart-beating back in the queue
(the job then resumes from its stored records), (2) re-sends queued jobs whose message may be
lost (a SQLite-broker message delivered to a worker that was SIGKILLed stays invisible forever),
(3) wakes a worker for each model ready to compile (every task job final, or its compiling
worker gone) whose last wake-up is older than that delay, and (4) deletes delivered messages
that the SQLite broker keeps. Jobs are sent as the routes send
them (`service.api.usecases.dispatch`); a broker that is down ends a sweep, and the next one
retries.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from sqlalchemy import create_engine, text

from schedules_db.models import utcnow
from schedules_db.store import Store
from service.api.usecases.dispatch import dispatch, wake_compile
from service.queue import JobQueue
from service.settings import Settings

log = logging.getLogger("tunehub.reaper")


class Reaper(threading.Thread):
    """A daemon thread of the API process running `sweep` every ``settings.reaper_every_s``."""

    def __init__(self, store: Store, queue: JobQueue, settings: Settings) -> None:
        super().__init__(name="tunehub-reaper", daemon=True)
        self.store, self.queue, self.settings = store, queue, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.settings.reaper_every_s):
            try:
                self.sweep()
            except Exception:
                log.exception("reaper sweep failed; retrying next period")

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
        for model_id in self.store.models.cancel_abandoned(stale_after):
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

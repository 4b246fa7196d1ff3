"""The worker's heartbeat: its registry row (and the job it runs) kept fresh."""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("tunehub.worker")


class WorkerBeat(threading.Thread):
    """Keeps the worker's registry row fresh (and says which job it runs)."""

    def __init__(self, context: Any, every_s: float) -> None:
        super().__init__(name="tunehub-worker-beat", daemon=True)
        self.context, self.every_s = context, every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                self.context.store.fleet.heartbeat(
                    self.context.worker_name, self.context.current_job_id
                )
            except Exception:  # a database hiccup: try again next beat
                log.exception("worker heartbeat failed")

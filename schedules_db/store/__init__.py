"""The store: the one interface the REST service and the workers use to read and write,
split by aggregate (`store.catalog`, `store.jobs`, `store.records`, `store.schedules`,
`store.fleet`).

Contract (what every caller may rely on):

* **Jobs.** The `jobs` table, not the broker, is the source of truth. A job is created `queued`
  (or directly `succeeded` with ``cache_hit`` when a verified best already covers its budget).
  A worker owns a job only after `claim_job` returned True: the claim is one conditional
  ``UPDATE ... WHERE state='queued' OR (state='running' AND heartbeat_at < stale)``, so of two
  deliveries of the same message at most one wins. Only the owner writes progress, heartbeats and
  the final state; `fail_job`/`finish_job` are ignored when the caller is no longer the owner.
* **Durability order.** A tuning record is committed in its own transaction as soon as it is
  measured, before the progress that counts it (`update_progress`) is written. An artifact file is
  written and fsynced into the artifact directory, then its row, the schedule row that points to it
  and the job's `succeeded` state are committed in one transaction: a reader that sees a schedule
  can always download its artifact, and a succeeded job always has its schedule.
* **Keys.** Records and schedules are keyed by (workload, target). A record of one target is
  never returned for another: every record query names both. A target's label names that one
  target: labels are unique, and the first target to take a label keeps it.
* **Failed candidates** are stored (they teach the cost model) with ``mean_run_us = NULL`` and are
  never returned as best or top-k.
* **Readers** see committed data only; a schedule row, once present, is always verified against
  the reference (only `finish_job` writes schedules, after verification).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from schedules_db.store.catalog import CatalogRows
from schedules_db.store.fleet import Fleet
from schedules_db.store.jobs import Jobs
from schedules_db.store.records import Records
from schedules_db.store.schedules import Schedules


class Store:
    """The store over one SQLAlchemy engine (SQLite or PostgreSQL), one attribute per aggregate."""

    def __init__(self, engine: Engine, tvm_series: str | None = None) -> None:
        """``tvm_series`` (e.g. "0.27", see `schedules_db.keys.tvm_series`): records and
        schedules of any other TVM series are invisible to this store's lookups (the service and
        the workers set it; None sees every series)."""
        self.engine = engine
        self.series = tvm_series
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        shared = (engine, self._sessions, tvm_series)
        self.catalog = CatalogRows(*shared)
        self.jobs = Jobs(*shared)
        self.records = Records(*shared)
        self.schedules = Schedules(*shared)
        self.fleet = Fleet(*shared)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions.begin() as session:
            yield session

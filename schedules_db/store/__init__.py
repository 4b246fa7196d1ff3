"""The store: the one interface the REST service and the workers use to read and write,
split by aggregate, each module with its own contract:

* `store.catalog` (`schedules_db.store.catalog`): targets and workloads;
* `store.jobs` (`schedules_db.store.jobs`): jobs, claims, fair share, progress, cancel, recovery;
* `store.records` (`schedules_db.store.records`): measured candidates;
* `store.schedules` (`schedules_db.store.schedules`): verified bests, artifacts, publishing;
* `store.fleet` (`schedules_db.store.fleet`): the worker registry;
* `store.models` (`schedules_db.store.models`): whole-model jobs, their tasks and compiles;
* `store.neighbours` (`schedules_db.store.neighbours`): unverified answers from tuned neighbours;
* `store.cost_models` (`schedules_db.store.cost_models`): each target's transferred cost model;
* `store.leases` (`schedules_db.store.leases`): duties one process of a deployment performs;
* `store.readers` (`schedules_db.store.artifact_readers`): where the API processes read
  artifacts (a worker checks it publishes there).

Artifact bytes live in the artifact store (`schedules_db.blobs`), beside the rows.

The read side a TVM build needs (best, top-k, batch lookup) is `schedules_db.reader`, an
implementation of `schedule_reads.ScheduleReader`.

Contract (what every caller may rely on):

* **Values, not rows.** Every method returns frozen dataclasses of `schedules_db.values` (or
  ints, bools, None, lists and dicts of them), detached from any session; a missing row is
  None, which the caller handles.
* **Jobs.** The `jobs` table, not the broker, is the source of truth. A job is created `queued`
  (or directly `succeeded` with ``cache_hit`` when a verified best already covers its budget).
  A worker owns a job only after `Jobs.claim` returned True (or `Jobs.claim_next` its id): the
  claim is one conditional ``UPDATE ... WHERE state='queued' OR (state='running' AND
  heartbeat_at < stale)``, so of two deliveries of the same message at most one wins. Only the
  owner writes progress, heartbeats and the final state; `Jobs.fail` (with a worker) and
  `Schedules.publish` are ignored when the caller is no longer the owner.
* **Durability order.** A tuning record is committed in its own transaction as soon as it is
  measured, before the progress that counts it (`Jobs.update_progress`) is written. An artifact's
  bytes are stored whole in the artifact store (`schedules_db.blobs`), then its row, the
  schedule row that points to it and the job's `succeeded` state are committed in one
  transaction
  (`Schedules.publish`): a reader that sees a schedule can always download its artifact, and a
  succeeded job always has its schedule.
* **Keys.** Records and schedules are keyed by (workload, target, TVM series). A record of one
  target is never returned for another: every record query names both; with ``tvm_series``
  set, nothing of another series is seen. A target's label names that one target: labels are
  unique, and the first target to take a label keeps it.
* **Failed candidates** are stored (they teach the cost model) with ``mean_run_us = NULL`` and are
  never returned as best or top-k. Whether a candidate failed is the caller's word
  (``NewRecord.failed``): the store knows no MetaSchedule marker.
* **Readers** see committed data only; a schedule row, once present, is always verified against
  the reference (only `Schedules.publish` writes schedules, after verification).
* **Thread safety.** One `Store` is shared by the API's thread pool, the reaper thread and the
  worker's heartbeat thread. That is safe: the store and its aggregates hold only immutable
  configuration (engine, sessionmaker, series); every method opens its own session in its own
  transaction from the one sessionmaker and closes it before returning; the engine's pool is
  thread-safe; returned values are frozen dataclasses, each call's own (their JSON fields — params,
  fingerprint, run_secs — are plain dicts and lists: callers do not mutate them). Concurrent writers
  are arbitrated by the database (conditional UPDATEs, unique indexes, row locks), never by the
  Python object.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from schedules_db.store.artifact_readers import ArtifactReaders
from schedules_db.store.catalog import CatalogRows
from schedules_db.store.cost_models import CostModels
from schedules_db.store.fleet import Fleet
from schedules_db.store.jobs import Jobs
from schedules_db.store.leases import Leases
from schedules_db.store.models import Models
from schedules_db.store.neighbours import Neighbours
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
        self.models = Models(*shared)
        self.neighbours = Neighbours(*shared)
        self.cost_models = CostModels(*shared)
        self.leases = Leases(*shared)
        self.readers = ArtifactReaders(*shared)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error. For
        maintenance and tests that must touch rows directly; the aggregates are the API."""
        with self._sessions.begin() as session:
            yield session

"""The metrics computed when ``/metrics`` is scraped: the health of the database, the broker and
Redis (each probed with a short timeout), and what the store says of the fleet
(`schedules_db.gauges`). Computed afresh by whichever API process answers, so they agree across
processes and replicas; `service.web.metrics` adds the process's own request histogram.

Families (label values: a target's label, a worker's name, a job state, a stage):

* ``tunehub_dependency_up{dependency}``: 1 when the probe succeeded within `PROBE_TIMEOUT_S`,
  else 0 (``database``, ``broker``; ``redis`` only where ``TUNEHUB_REDIS_URL`` is set; 0 too
  while the previous scrape's probe still runs: none is started beside it);
  ``tunehub_dependency_probe_seconds{dependency}``: how long the probe took (or has run).
* ``tunehub_jobs{state,target}``: jobs in the store; ``tunehub_queue_depth{target}``: queued ones.
* ``tunehub_trials_per_second{target}``: tuning records stored in the last `RATE_WINDOW`, per
  second (measured candidates, failed ones included; imports are not measured).
* ``tunehub_worker_up{worker}`` (1 live, 0 stale or stopped, as ``GET /workers`` says) and
  ``tunehub_worker_heartbeat_age_seconds{worker}``, for workers heard from within
  `WORKER_HORIZON`; ``tunehub_workers_live{target}``.
* ``tunehub_search_duration_seconds{target}``, ``tunehub_verification_duration_seconds{target}``:
  histograms of the jobs' completed searches and verifications (`Jobs.record_stage`).

The database is probed and read through `FleetReads`' engine of its own, never the API's pool,
within `READ_TIMEOUT_S`. With the database down, or its reading failed or late (logged), only
the dependency families are answered (`service.web.metrics` adds the request histogram).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

from prometheus_client.metrics_core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import text

from schedules_db import Store
from schedules_db.engine import make_probe_engine
from schedules_db.gauges import DURATION_BUCKETS_S, FleetCounts, read_fleet
from service.web.bounded_calls import BoundedCalls
from service.web.services import Services

log = logging.getLogger("tunehub.api")

PROBE_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 3.0  # the store's reading, after the probes: a scrape takes 5 s at most
RATE_WINDOW = timedelta(seconds=60)
WORKER_HORIZON = timedelta(hours=1)
STAGE_FAMILIES = {
    "search": "tunehub_search_duration_seconds",
    "verification": "tunehub_verification_duration_seconds",
}


class FleetReads:
    """What the scrapes of one API process share: the calls still running (`BoundedCalls`:
    one probe of each dependency and one reading of the store at a time, so a hung one is
    never joined by another) and the store they reach the database through, made at the
    first scrape over `make_probe_engine` (no pool: never the API's connections, and nothing
    held between scrapes, so nothing to dispose of; connect and statement timeouts)."""

    def __init__(self) -> None:
        self.calls = BoundedCalls("tunehub-probe")
        self._lock = threading.Lock()
        self._store: Store | None = None

    def store(self, services: Services) -> Store:
        """The store of the probes and readings."""
        with self._lock:
            if self._store is None:
                url = services.settings.store_url
                self._store = Store(make_probe_engine(url, PROBE_TIMEOUT_S, READ_TIMEOUT_S))
            return self._store


def dependency_checks(services: Services, store: Store) -> dict[str, Callable[[], bool]]:
    """The probe of each dependency this process uses (the database's through ``store``)."""

    def database() -> bool:
        with store.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True

    checks = {
        "database": database,
        "broker": lambda: services.queue.reachable(PROBE_TIMEOUT_S),
    }
    client = services.limits.client
    if client is not None:
        checks["redis"] = lambda: bool(client.ping())
    return checks


class FleetCollector(Collector):
    """The families of the module docstring, read when collected."""

    def __init__(self, services: Services, reads: FleetReads) -> None:
        self.services = services
        self.reads = reads

    def collect(self) -> Iterator[Metric]:
        store = self.reads.store(self.services)
        results = self.reads.calls.run(dependency_checks(self.services, store), PROBE_TIMEOUT_S)
        up = GaugeMetricFamily(
            "tunehub_dependency_up",
            "1 when the dependency answered its probe",
            labels=["dependency"],
        )
        took = GaugeMetricFamily(
            "tunehub_dependency_probe_seconds",
            "How long the dependency's probe took",
            labels=["dependency"],
        )
        for name, outcome in results.items():
            up.add_metric([name], 1.0 if outcome.answered and outcome.value else 0.0)
            took.add_metric([name], outcome.seconds)
        yield up
        yield took
        if not (results["database"].answered and results["database"].value):
            return
        reading = self.reads.calls.run(
            {"store": lambda: read_fleet(store, RATE_WINDOW, WORKER_HORIZON)}, READ_TIMEOUT_S
        )["store"]
        if reading.value is None or not reading.answered:
            log.warning(
                "/metrics answers without the store's families: %s",
                reading.why(),
                exc_info=reading.error,
            )
            return
        yield from fleet_families(reading.value, self.services.settings.stale_after_s)


def fleet_families(counts: FleetCounts, stale_after_s: float) -> Iterator[Metric]:
    """The store's families (module docstring) from one reading."""
    jobs = GaugeMetricFamily(
        "tunehub_jobs", "Jobs in the store, by state and target", labels=["state", "target"]
    )
    for (state, target), n in sorted(counts.jobs.items()):
        jobs.add_metric([state, target], n)
    yield jobs
    depth = GaugeMetricFamily(
        "tunehub_queue_depth", "Queued jobs waiting for a worker", labels=["target"]
    )
    rate = GaugeMetricFamily(
        "tunehub_trials_per_second",
        f"Tuning records stored in the last {RATE_WINDOW.seconds} s, per second",
        labels=["target"],
    )
    live = GaugeMetricFamily(
        "tunehub_workers_live", "Workers of the target with a fresh heartbeat", labels=["target"]
    )
    live_workers = [
        w for w in counts.workers if _is_live(w.heartbeat_age_s, w.stopped, stale_after_s)
    ]
    for target in sorted(counts.targets):
        depth.add_metric([target], counts.jobs.get(("queued", target), 0))
        rate.add_metric(
            [target], counts.recent_records.get(target, 0) / RATE_WINDOW.total_seconds()
        )
        live.add_metric([target], sum(target in w.targets for w in live_workers))
    yield from (depth, rate, live)
    up = GaugeMetricFamily(
        "tunehub_worker_up",
        "1 when the worker's heartbeat is fresh, 0 when stale or stopped",
        labels=["worker"],
    )
    age = GaugeMetricFamily(
        "tunehub_worker_heartbeat_age_seconds",
        "Seconds since the worker's last heartbeat",
        labels=["worker"],
    )
    for worker in counts.workers:
        up.add_metric([worker.name], 1.0 if worker in live_workers else 0.0)
        age.add_metric([worker.name], worker.heartbeat_age_s)
    yield from (up, age)
    for stage, name in STAGE_FAMILIES.items():
        family = HistogramMetricFamily(
            name, f"Seconds the jobs' completed {stage} took on their workers", labels=["target"]
        )
        for (of, target), times in sorted(counts.stages.items()):
            if of == stage:
                buckets = [
                    (str(float(b)), n)
                    for b, n in zip(DURATION_BUCKETS_S, times.at_most, strict=True)
                ]
                family.add_metric([target], [*buckets, ("+Inf", times.count)], times.total_s)
        yield family


def _is_live(heartbeat_age_s: float, stopped: bool, stale_after_s: float) -> bool:
    return not stopped and heartbeat_age_s <= stale_after_s

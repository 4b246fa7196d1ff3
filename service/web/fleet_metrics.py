"""The metrics computed when ``/metrics`` is scraped: the health of the database, the broker and
Redis (each probed with a short timeout), and what the store says of the fleet
(`schedules_db.gauges`). Computed afresh by whichever API process answers, so they agree across
processes and replicas; `service.web.metrics` adds the process's own request histogram.

Families (label values: a target's label, a worker's name, a job state, a stage):

* ``tunehub_dependency_up{dependency}``: 1 when the probe succeeded within `PROBE_TIMEOUT_S`,
  else 0 (``database``, ``broker``; ``redis`` only where ``TUNEHUB_REDIS_URL`` is set);
  ``tunehub_dependency_probe_seconds{dependency}``: how long the probe took.
* ``tunehub_jobs{state,target}``: jobs in the store; ``tunehub_queue_depth{target}``: queued ones.
* ``tunehub_trials_per_second{target}``: tuning records stored in the last `RATE_WINDOW`, per
  second (measured candidates, failed ones included; imports are not measured).
* ``tunehub_worker_up{worker}`` (1 live, 0 stale or stopped, as ``GET /workers`` says) and
  ``tunehub_worker_heartbeat_age_seconds{worker}``, for workers heard from within
  `WORKER_HORIZON`; ``tunehub_workers_live{target}``.
* ``tunehub_search_duration_seconds{target}``, ``tunehub_verification_duration_seconds{target}``:
  histograms of the jobs' completed searches and verifications (`Jobs.record_stage`).

With the database down only the dependency families are answered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

from prometheus_client.metrics_core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import text

from schedules_db.gauges import DURATION_BUCKETS_S, FleetCounts, read_fleet
from service.web.services import Services

PROBE_TIMEOUT_S = 2.0
RATE_WINDOW = timedelta(seconds=60)
WORKER_HORIZON = timedelta(hours=1)
STAGE_FAMILIES = {
    "search": "tunehub_search_duration_seconds",
    "verification": "tunehub_verification_duration_seconds",
}


def probe_all(
    checks: dict[str, Callable[[], bool]], timeout_s: float
) -> dict[str, tuple[bool, float]]:
    """Run every check at once, each in a thread of its own: per name, whether it returned
    True within ``timeout_s`` and the seconds it took (``timeout_s`` when it did not answer;
    a dependency that never answers costs the scrape ``timeout_s`` once, whatever their
    number)."""
    results: dict[str, tuple[bool, float]] = {}
    started = time.monotonic()

    def run(name: str, check: Callable[[], bool]) -> None:
        try:
            ok = bool(check())
        except Exception:  # noqa: BLE001 - a probe that raises says "down"
            ok = False
        results[name] = (ok, time.monotonic() - started)

    threads = [
        threading.Thread(target=run, args=item, name=f"tunehub-probe-{item[0]}", daemon=True)
        for item in checks.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, started + timeout_s - time.monotonic()))
    answered = dict(results)  # an answer written after this is not taken
    return {name: answered.get(name, (False, timeout_s)) for name in checks}


def dependency_checks(services: Services) -> dict[str, Callable[[], bool]]:
    """The probe of each dependency this process uses."""

    def database() -> bool:
        with services.store.engine.connect() as conn:
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

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        checks = dependency_checks(self.services)
        results = probe_all(checks, PROBE_TIMEOUT_S)
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
        for name, (ok, seconds) in results.items():
            up.add_metric([name], 1.0 if ok else 0.0)
            took.add_metric([name], seconds)
        yield up
        yield took
        if results["database"][0]:
            stale_after = self.services.settings.stale_after_s
            yield from fleet_families(
                read_fleet(self.services.store, RATE_WINDOW, WORKER_HORIZON), stale_after
            )


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

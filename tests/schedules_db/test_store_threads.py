"""One `Store` shared by many threads (the API's thread pool, the reaper, heartbeat threads):
racing claims, progress and heartbeats land exactly; on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from schedules_db.store import Store
from schedules_db.values import JobState
from tests.schedules_db.store_data import STALE, pair

THREADS, OPS = 8, 25  # each thread does OPS rounds of each operation
T = TypeVar("T")


def _race(work: Callable[[int], T]) -> list[T]:
    """``work(i)`` for every thread i, all released at once; their results, in thread order
    (an exception in any thread fails the test)."""
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> T:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(run, range(THREADS)))


def test_threads_sharing_one_store_claim_progress_and_beat_exactly(store: Store) -> None:
    wid, tid = pair(store)
    created = [store.jobs.create(wid, tid, OPS, "q").id for _ in range(THREADS * OPS)]

    # Every job is claimed exactly once across threads racing claim_next for the same queue.
    def claim(i: int) -> list[int]:
        return [
            job_id for _ in range(OPS) if (job_id := store.jobs.claim_next([tid], f"w{i}", STALE))
        ]

    claimed = _race(claim)
    flat = [job_id for ids in claimed for job_id in ids]
    assert sorted(flat) == sorted(created)  # all claimed, none twice
    assert store.jobs.claim_next([tid], "late", STALE) is None
    for i, ids in enumerate(claimed):
        for job_id in ids:
            job = store.jobs.get(job_id)
            assert (job.state, job.worker, job.attempt) == (JobState.RUNNING.value, f"w{i}", 1)

    # Owners write progress and heartbeats; the same writes by a non-owner all fail.
    own = [ids[0] for ids in claimed]
    for i in range(THREADS):
        store.fleet.register(f"w{i}", "host", i, [tid], {})

    def beat(i: int) -> Counter[str]:
        me, theirs = f"w{i}", own[(i + 1) % THREADS]
        counts: Counter[str] = Counter()
        for done in range(1, OPS + 1):
            counts["progress"] += store.jobs.update_progress(own[i], me, done, 100.0 / done)
            counts["beat"] += store.jobs.heartbeat(own[i], me)
            counts["stolen progress"] += store.jobs.update_progress(theirs, me, 0, None)
            counts["stolen beat"] += store.jobs.heartbeat(theirs, me)
            store.fleet.heartbeat(me, own[i])
        return counts

    total = sum(_race(beat), Counter())
    assert total == Counter(progress=THREADS * OPS, beat=THREADS * OPS)  # no stolen write
    for i, job_id in enumerate(own):
        job = store.jobs.get(job_id)
        assert (job.trials_done, job.best_latency_us, job.worker) == (OPS, 100.0 / OPS, f"w{i}")
    workers = {w.name: w.current_job_id for w in store.fleet.list_workers()}
    assert workers == {f"w{i}": own[i] for i in range(THREADS)}

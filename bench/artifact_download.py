"""Artifact downloads from the database store: a 47 MB model-sized library and a 40 KB schedule
library through `tunehub serve` on PostgreSQL (loopback), with the server's resident memory.

It makes a scratch PostgreSQL database, stores two random (incompressible) files as the
libraries of two schedules with ``TUNEHUB_ARTIFACT_STORE=database``, starts `tunehub serve`
(no workers, auth off), then measures from this process, the client streaming each body to
nothing (so it holds no file either):

  1. the 47 MB library, cold: the API fills its verified local copy from the database chunk by
     chunk, then serves it; the server's RSS is sampled every 5 ms during the download;
  2. the same, warm (from the verified copy, re-hashed per download), ``--rounds`` times;
  3. the 40 KB library ``--small-rounds`` times, one request at a time (the first one cold);
  4. the 47 MB library from a fresh replica's empty cache, with the database's chunks already
     in PostgreSQL's buffers (a second API process: the cold path again, after the first run
     warmed the database).

The database is dropped and the server stopped at the end. Run it alone.

    .venv/bin/python bench/artifact_download.py [--mb 47] [--rounds 5] [--small-rounds 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import psutil  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from bench.api_load import PG_ADMIN_URL  # noqa: E402
from bench.servers import free_port, start_server, stop_server  # noqa: E402
from schedules_db import Store, make_engine, upgrade_schema  # noqa: E402
from schedules_db.blobs import DatabaseBlobs  # noqa: E402
from schedules_db.values import NewRecord, NewSchedule  # noqa: E402


def publish(store: Store, blobs: DatabaseBlobs, library: Path, n: int) -> int:
    """A succeeded job on a made-up workload whose best schedule's library is ``library``."""
    from datetime import timedelta

    target = store.catalog.get_or_create_target(
        {"keys": ["cpu"], "kind": "llvm", "num-cores": 2}, "llvm", "bench-2c", {"cpu": "bench"}
    )
    params = {"M": n, "N": n, "K": n}
    workload = store.catalog.get_or_create_workload(f"{9000 + n}", "{}", "matmul", params, 1.0)
    job = store.jobs.create(workload.id, target.id, 8, "tunehub.bench")
    assert store.jobs.claim(job.id, "bench", timedelta(seconds=60))
    store.records.add(workload.id, target.id, job.id,
                      NewRecord("[[], []]", [1e-4] * 3, [], "0.27", failed=False))  # fmt: skip
    record = store.records.top_k(workload.id, target.id, 1)[0]
    stored = blobs.put(library, ".so")
    schedule = NewSchedule(record.id, 100.0, 900.0, 1e-6, "# tir", stored.sha256, stored.size,
                           stored.path)  # fmt: skip
    schedule_id = store.schedules.publish(job.id, "bench", schedule)
    assert schedule_id is not None
    return int(schedule_id)


class RssPeak(threading.Thread):
    """The largest resident set of a process while running (sampled every 5 ms)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)


def download(client: httpx.Client, path: str) -> tuple[float, int]:
    """(seconds, bytes) of one GET, its body streamed to nothing."""
    started, size = time.perf_counter(), 0
    with client.stream("GET", path) as answer:
        assert answer.status_code == 200, answer.status_code
        for chunk in answer.iter_raw(1 << 20):
            size += len(chunk)
    return time.perf_counter() - started, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=47.0, help="the big library's size (MB)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-rounds", type=int, default=200)
    args = parser.parse_args()
    db = f"tunehub_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{db}"
    procs = []
    try:
        with tempfile.TemporaryDirectory(prefix="tunehub-dl-") as tmp:
            work = Path(tmp)
            engine = make_engine(url)
            upgrade_schema(engine)
            store, blobs = Store(engine), DatabaseBlobs(engine)
            big, small = work / "big.so", work / "small.so"
            big.write_bytes(os.urandom(int(args.mb * 1e6)))
            small.write_bytes(os.urandom(40 * 1024))
            started = time.perf_counter()
            big_id = publish(store, blobs, big, 1)
            stored_s = time.perf_counter() - started
            small_id = publish(store, blobs, small, 2)
            engine.dispose()
            env = {"TUNEHUB_ARTIFACT_STORE": "database"}
            ports = [free_port(), free_port()]
            for n, port in enumerate(ports):
                (work / f"api{n}").mkdir()
                procs.append(start_server(work / f"api{n}", url, port, 1, False, False, env))
            big_path = f"/api/v1/schedules/{big_id}/artifact"
            small_path = f"/api/v1/schedules/{small_id}/artifact"
            mb = big.stat().st_size / 1e6
            print(f"stored {mb:.1f} MB into PostgreSQL in {stored_s:.2f} s "
                  f"({mb / stored_s:.0f} MB/s, one worker's upload)")  # fmt: skip
            with httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=120) as client:
                client.get("/healthz")
                rss = RssPeak(procs[0].pid)
                before = psutil.Process(procs[0].pid).memory_info().rss
                rss.start()
                cold_s, size = download(client, big_path)
                rss.done.set()
                rss.join()
                assert size == big.stat().st_size
                warm = [download(client, big_path)[0] for _ in range(args.rounds)]
                after = psutil.Process(procs[0].pid).memory_info().rss
                small_s = [download(client, small_path)[0] for _ in range(args.small_rounds)]
            with httpx.Client(base_url=f"http://127.0.0.1:{ports[1]}", timeout=120) as other:
                other.get("/healthz")
                second_cold_s, _ = download(other, big_path)
            ordered = sorted(small_s)
            print(f"{mb:.1f} MB library, cold (database -> verified copy -> client): "
                  f"{cold_s * 1e3:.0f} ms = {mb / cold_s:.0f} MB/s")  # fmt: skip
            print(f"{mb:.1f} MB library, cold on a second replica (database pages cached): "
                  f"{second_cold_s * 1e3:.0f} ms = {mb / second_cold_s:.0f} MB/s")  # fmt: skip
            best, median = min(warm), statistics.median(warm)
            print(f"{mb:.1f} MB library, warm x{args.rounds}: median {median * 1e3:.0f} ms = "
                  f"{mb / median:.0f} MB/s (best {mb / best:.0f} MB/s)")  # fmt: skip
            print(f"server RSS: {before / 2**20:.1f} MiB before, peak {rss.peak / 2**20:.1f} MiB "
                  f"during the cold download (+{(rss.peak - before) / 2**20:.1f} MiB), "
                  f"{after / 2**20:.1f} MiB after the warm ones")  # fmt: skip
            print(f"40 KB library x{args.small_rounds}: first {small_s[0] * 1e3:.2f} ms, "
                  f"p50 {statistics.median(small_s) * 1e3:.2f} ms, "
                  f"p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1e3:.2f} ms")  # fmt: skip
            print(f"{os.cpu_count()} cores; 1-min load average {os.getloadavg()[0]:.2f}")
    finally:
        for proc in procs:
            stop_server(proc)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())

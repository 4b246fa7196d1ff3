"""API load: schedule lookups and artifact downloads against `tunehub serve`, SQLite and PostgreSQL.

For each store it fills a fresh database with tuned-looking schedules (through the store, no
TVM: 4 operators x 4 shapes, each a succeeded job, a ~14 KB trace, ~8 KB of TIR and a 64 KB
artifact), starts `tunehub serve` (no workers, auth off, loopback) in its own process group, and
measures from this process, over HTTP/1.1 keep-alive connections:

  1. closed loop, ``--clients`` connections each sending its next request when the last one
     is answered: a mix of GET /schedules/{id}, GET /schedules?operator=... and GET /jobs/{id};
  2. the same loop on GET /schedules/{id}/artifact (8 connections);
  3. open loop: ``--rate`` lookups per second (the same mix) sent on schedule whatever the
     server does, each latency counted from the moment the request was due (so a stalled
     server shows up in the tail instead of slowing the sender down).

With ``--replicas N`` it starts N `tunehub serve` processes on the same database, each with its
own data dir, artifacts in the database store and limits in Redis (``--redis-url``): a fleet's
stateless replicas. Connections are spread over them round-robin (a load balancer's job).

Everything is bounded: each phase runs ``--duration`` seconds after a 1 s warm-up, the open
loop sends at most ``--rate * --duration`` requests, the server is stopped at the end (or on
any error) and the PostgreSQL database is dropped. The client shares the machine's cores with
the server: run it on an otherwise idle machine and say so when it was not.

    .venv/bin/python bench/api_load.py [--stores sqlite postgresql] [--duration 5]
        [--clients 32] [--rate 500] [--api-workers 1] [--no-access-log] [--auth]
        [--replicas 1] [--artifact-store directory|database] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text  # noqa: E402

from bench.servers import free_port, server_cpu_s, start_server, stop_server  # noqa: E402
from schedules_db import Store, make_engine, upgrade_schema  # noqa: E402
from schedules_db.blobs import DatabaseBlobs, DirectoryBlobs  # noqa: E402
from schedules_db.tokens import READ, TokenStore  # noqa: E402
from schedules_db.values import NewRecord, NewSchedule  # noqa: E402

PG_ADMIN_URL = os.environ.get(
    "TUNEHUB_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
OPERATORS = ("matmul", "conv2d_nchw", "dense", "softmax")
SHAPES = (64, 128, 256, 512)
ARTIFACT_BYTES = 64 * 1024
ARTIFACT_CLIENTS = 8
WARMUP_S = 1.0


# ---------------------------------------------------------------------------- the data
def fake_trace(seed: int) -> str:
    """A MetaSchedule-shaped trace (instructions and decisions), ~14 KB of JSON."""
    rng = random.Random(seed)
    insts, decisions = [], []
    for n in range(260):
        kind = rng.choice(["GetSBlock", "GetLoops", "SamplePerfectTile", "Split", "Reorder"])
        insts.append([kind, [f"b{n}", f"l{n + 1}"], [rng.randrange(1, 64), "main"], [f"v{n}"]])
        if kind == "SamplePerfectTile":
            decisions.append([n, [rng.choice([1, 2, 4, 8, 16]) for _ in range(4)]])
    return json.dumps([insts, decisions])


def fake_tir(seed: int) -> str:
    """~8 KB of scheduled-TIR-looking text."""
    line = f"            C_local[v_i, v_j] += A[v_i, v_k] * B[v_k, v_j]  # block {seed}\n"
    return "# from tvm.script import tir as T\n@T.prim_func\ndef main():\n" + line * 120


def populate(store_url: str, artifact_dir: Path, artifact_store: str) -> dict[str, list]:
    """Tuned-looking schedules in a fresh store, their artifacts in ``artifact_store``
    ("directory": ``artifact_dir``, or "database"); the ids the load will ask for."""
    engine = make_engine(store_url)
    upgrade_schema(engine)
    blobs = DatabaseBlobs(engine) if artifact_store == "database" else DirectoryBlobs(artifact_dir)
    store = Store(engine)
    tvm_version = version("apache-tvm")
    target = store.catalog.get_or_create_target(
        {"keys": ["cpu"], "kind": "llvm", "mcpu": "znver4", "num-cores": 2},
        "llvm",
        "znver4-2c",
        {"cpu": "bench"},
    )
    schedule_ids, job_ids = [], []
    artifact_dir.mkdir(parents=True, exist_ok=True)
    for n, (op, size) in enumerate((op, size) for op in OPERATORS for size in SHAPES):
        params = {"M": size, "N": size, "K": size}
        workload = store.catalog.get_or_create_workload(
            f"{1000 + n}", "{}" + " " * 4000, op, params, 2.0 * size**3
        )
        job = store.jobs.create(workload.id, target.id, 64, "tunehub.bench")
        assert store.jobs.claim(job.id, "bench", timedelta(seconds=60))
        trace = fake_trace(n)
        store.records.add(
            workload.id,
            target.id,
            job.id,
            NewRecord(trace, [1e-4] * 3, [], tvm_version, failed=False),
        )
        record = store.records.top_k(workload.id, target.id, 1)[0]
        library = artifact_dir / "library.so"
        library.write_bytes(random.Random(n).randbytes(ARTIFACT_BYTES))
        stored = blobs.put(library, ".so")
        schedule_id = store.schedules.publish(
            job.id,
            "bench",
            NewSchedule(
                record.id, 100.0, 900.0, 1e-6, fake_tir(n), stored.sha256, stored.size, stored.path
            ),
        )
        schedule_ids.append(schedule_id)
        job_ids.append(job.id)
    token, _ = TokenStore(engine).create("bench", [READ])
    engine.dispose()
    return {"schedules": schedule_ids, "jobs": job_ids, "token": token}


# ---------------------------------------------------------------------------- the client
class Connection:
    """One keep-alive HTTP/1.1 connection doing GETs (minimal parsing: this is the load)."""

    headers = ""  # extra header lines sent with every request (the token, with --auth)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, ports: list[int], n: int = 0) -> Connection:
        """A connection to replica ``n`` (modulo how many there are)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", ports[n % len(ports)])
        return cls(reader, writer)

    async def get(self, path: str) -> tuple[int, int]:
        """(status, body bytes) of GET ``path``."""
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{self.headers}\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError(f"no content-length in {head!r}")
        length = int(lower[at + 17 : lower.find(b"\r\n", at + 2)])
        await self.reader.readexactly(length)
        return status, length

    def close(self) -> None:
        self.writer.close()


@dataclass
class Stats:
    """Latencies (s) and bytes of one phase."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    bytes: int = 0
    errors: int = 0
    server_cpu_s: float = 0.0  # CPU time the servers' processes used while measured

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3 if ordered else 0.0

    def line(self, name: str) -> str:
        rate = len(self.latencies) / self.seconds if self.seconds else 0.0
        mb = self.bytes / self.seconds / 1e6 if self.seconds else 0.0
        cpu_ms = self.server_cpu_s / len(self.latencies) * 1e3 if self.latencies else 0.0
        cpu = f"{cpu_ms:>10.2f}" if self.server_cpu_s else f"{'-':>10}"  # not read: open loop
        return (
            f"{name:<34} {len(self.latencies):>7} {rate:>9.0f} {self.pct(0.5):>8.1f} "
            f"{self.pct(0.99):>8.1f} {self.pct(1.0) if self.latencies else 0:>8.1f} "
            f"{mb:>7.1f} {self.errors:>6} {cpu}"
        )


HEADER = (
    f"{'phase':<34} {'requests':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
    f"{'MB/s':>7} {'errors':>6} {'srv CPU ms':>10}"
)
# srv CPU ms: CPU time (user + system) of every server process per measured request, read
# from /proc (psutil) at the start and end of the measured window: what one request costs
# the server, whatever else shares the machine.


async def closed_loop(
    ports: list[int],
    next_path: Callable[[], str],
    clients: int,
    duration: float,
    cpu: Callable[[], float] = lambda: 0.0,
) -> Stats:
    """``clients`` connections in a loop for ``duration`` s (after the warm-up); ``cpu``: the
    servers' CPU seconds so far, read as the measured window opens and closes."""
    conns = [await Connection.open(ports, n) for n in range(clients)]
    stats, started = Stats(), time.monotonic()
    measure_from, stop_at = started + WARMUP_S, started + WARMUP_S + duration

    async def window() -> None:
        await asyncio.sleep(WARMUP_S)
        stats.server_cpu_s = -cpu()

    async def run(conn: Connection) -> None:
        while (now := time.monotonic()) < stop_at:
            status, size = await conn.get(next_path())
            done = time.monotonic()
            if now >= measure_from:
                stats.latencies.append(done - now)
                stats.bytes += size
                stats.errors += status not in (200, 304)

    await asyncio.gather(window(), *(run(c) for c in conns))
    stats.seconds = time.monotonic() - measure_from
    stats.server_cpu_s += cpu()
    for conn in conns:
        conn.close()
    return stats


async def open_loop(
    ports: list[int], next_path: Callable[[], str], rate: float, duration: float
) -> Stats:
    """``rate`` requests/s on schedule for ``duration`` s; latency from when each was due."""
    idle: list[Connection] = [await Connection.open(ports, n) for n in range(64)]
    stats, tasks = Stats(), []
    start = time.monotonic() + 0.1
    total = int(rate * (duration + WARMUP_S))

    async def one(due: float, measured: bool) -> None:
        conn = idle.pop() if idle else await Connection.open(ports, len(tasks))
        status, size = await conn.get(next_path())
        idle.append(conn)
        if measured:
            stats.latencies.append(time.monotonic() - due)
            stats.bytes += size
            stats.errors += status != 200

    for n in range(total):
        due = start + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(due, n >= rate * WARMUP_S)))
    await asyncio.gather(*tasks)
    stats.seconds = duration
    for conn in idle:
        conn.close()
    return stats


# ---------------------------------------------------------------------------- one store
def mixed_paths(ids: dict[str, list]) -> Callable[[], str]:
    rng = random.Random(7)

    def next_path() -> str:
        kind = rng.randrange(3)
        if kind == 0:
            return f"/api/v1/schedules/{rng.choice(ids['schedules'])}"
        if kind == 1:
            return f"/api/v1/schedules?operator={rng.choice(OPERATORS)}"
        return f"/api/v1/jobs/{rng.choice(ids['jobs'])}"

    return next_path


def bench_store(name: str, store_url: str, work: Path, args: argparse.Namespace) -> list[str]:
    data_dir = work / name
    data_dir.mkdir()
    started = time.monotonic()
    ids = populate(store_url, data_dir / "artifacts", args.artifact_store)
    print(f"{name}: {len(ids['schedules'])} schedules in {time.monotonic() - started:.1f} s")
    env = {"TUNEHUB_ARTIFACT_STORE": args.artifact_store,
           "TUNEHUB_ARTIFACT_DIR": str(data_dir / "artifacts")}  # fmt: skip
    env.update({"TUNEHUB_REDIS_URL": args.redis_url} if args.replicas > 1 else {})
    ports, procs = [free_port() for _ in range(args.replicas)], []
    Connection.headers = f"Authorization: Bearer {ids['token']}\r\n" if args.auth else ""
    try:
        for n, port in enumerate(ports):
            replica = data_dir / f"replica{n}"
            replica.mkdir()
            procs.append(start_server(replica, store_url, port, args.api_workers,
                                      args.access_log, args.auth, env))  # fmt: skip
        mixed = mixed_paths(ids)
        sample = asyncio.run(_sizes(ports, ids))
        print(f"{name}: response sizes {sample}")
        rows = []
        cpu = lambda: server_cpu_s(procs)  # noqa: E731
        stats = asyncio.run(closed_loop(ports, mixed, args.clients, args.duration, cpu))
        rows.append(stats.line(f"{name} mixed closed x{args.clients}"))
        rng = random.Random(3)
        artifact = lambda: f"/api/v1/schedules/{rng.choice(ids['schedules'])}/artifact"  # noqa: E731
        stats = asyncio.run(closed_loop(ports, artifact, ARTIFACT_CLIENTS, args.duration, cpu))
        rows.append(stats.line(f"{name} artifact closed x{ARTIFACT_CLIENTS}"))
        stats = asyncio.run(open_loop(ports, mixed, args.rate, args.duration))
        rows.append(stats.line(f"{name} mixed open {args.rate:.0f}/s"))
        return rows
    finally:
        for proc in procs:
            stop_server(proc)


async def _sizes(ports: list[int], ids: dict[str, list]) -> dict[str, int]:
    conn = await Connection.open(ports)
    sizes = {
        "schedule": (await conn.get(f"/api/v1/schedules/{ids['schedules'][0]}"))[1],
        "list": (await conn.get(f"/api/v1/schedules?operator={OPERATORS[0]}"))[1],
        "job": (await conn.get(f"/api/v1/jobs/{ids['jobs'][0]}"))[1],
    }
    conn.close()
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rate", type=float, default=500.0, help="open-loop requests/s")
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn processes")
    parser.add_argument(
        "--access-log", action=argparse.BooleanOptionalAction, default=True, help="serve's log"
    )
    parser.add_argument("--auth", action="store_true", help="auth on; a read token per request")
    parser.add_argument("--replicas", type=int, default=1, help="`tunehub serve` processes")
    parser.add_argument(
        "--artifact-store",
        choices=("directory", "database"),
        default=None,
        help="default: directory for one replica, database for several",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                        help="the replicas' shared limits (with --replicas > 1)")  # fmt: skip
    args = parser.parse_args()
    if args.artifact_store is None:
        args.artifact_store = "database" if args.replicas > 1 else "directory"
    if args.replicas > 1 and args.artifact_store != "database":
        parser.error("replicas share no disk: --artifact-store database")
    if args.duration > 60 or args.rate * args.duration > 100_000:
        parser.error("bounded: --duration at most 60 s, --rate x --duration at most 100k")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    rows, load_before = [], os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tunehub-load-") as tmp:
        for name in args.stores:
            if name == "sqlite":
                rows += bench_store(name, f"sqlite:///{tmp}/tunehub.db", Path(tmp), args)
                continue
            db = f"tunehub_bench_{uuid.uuid4().hex[:8]}"
            admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{db}"'))
            try:
                url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{db}"
                rows += bench_store(name, url, Path(tmp), args)
            finally:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
                admin.dispose()
    log = "on" if args.access_log else "off"
    print(
        f"\n{args.replicas} replica(s) x {args.api_workers} API process(es), artifacts in "
        f"the {args.artifact_store} store, access log {log}, "
        f"auth {'on' if args.auth else 'off'}, {os.cpu_count()} cores; "
        f"1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
        "(about 2 = the client and the server alone)"
    )
    print(HEADER)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

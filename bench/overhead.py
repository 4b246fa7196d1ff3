"""Overhead of tunehub: one 64-trial job through tunehub vs the same search by plain `tune_tir`.

Runs, one after the other on this machine, with the same seed and budget:
  1. plain MetaSchedule: `ms.tir_integration.tune_tir` with a `JSONDatabase` in a temp folder
     (with tunehub's builder and runner settings, so only the orchestration differs: the default
     builder imports every tensor intrinsic in each fresh build process and times out here),
     after a 2-trial warm-up in the same process; its wall time includes compiling and exporting
     the best schedule (`compile_tir`), which a build needs;
  2. tunehub on the embedded default: `tunehub serve` (SQLite store, SQLite broker);
  3. tunehub on PostgreSQL + RabbitMQ (`--database-url`, `--broker-url`), if reachable.
For tunehub, the wall time runs from `POST /jobs` to `succeeded` with a warm worker (a tiny
warm-up job runs first; worker start-up is reported apart), so it includes the queue, the store
writes, verification of the top 5 and the artifact export. The best kernels of all runs are then
re-timed side by side in this process. Prints wall-time and best-latency ratios.

    .venv/bin/python bench/overhead.py [--trials 64] [--shape 256 256 256] [--seed 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kernel_quality import free_port, time_tvm  # noqa: E402
from service.client import TunehubClient  # noqa: E402

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"


def plain_tune_tir(mod, target, trials: int, per_iter: int, seed: int, work: Path) -> tuple:  # noqa: ANN001
    """Plain MetaSchedule, warmed up; returns (wall s of the search plus compiling and
    exporting its best, best measured us, library path, warm-up s)."""
    from tvm.s_tir import meta_schedule as ms

    from tuning.hardware.host import physical_cores
    from tuning.measure.devices import Measurer
    from tuning.publish.verify import build_library
    from tuning.search.builder import make_builder
    from tuning.search.loop import batch_size

    cores = physical_cores()

    def tune(func, trials: int, folder: Path):  # noqa: ANN001, ANN202
        return ms.tir_integration.tune_tir(
            func,
            target,
            str(folder),
            max_trials_global=trials,
            num_trials_per_iter=batch_size(trials, per_iter),
            builder=make_builder(max_workers=cores),
            runner=Measurer("llvm").runner(),
            seed=seed,
            num_tuning_cores=cores,
        )

    # Warm up as tunehub's worker is warm: the first tune_tir in a process pays TVM's one-off
    # costs (tensor intrinsics, LLVM), which are not this job's.
    started = time.monotonic()
    tune(tiny_matmul(), 2, work / "warmup")
    startup = time.monotonic() - started
    started = time.monotonic()
    database = tune(mod, trials, work / "job")
    best = database.get_top_k(database.commit_workload(mod), 1)[0]
    best_us = float(np.mean([float(x) for x in best.run_secs])) * 1e6
    # What a build needs from it: the best schedule compiled and exported.
    sch = ms.tir_integration.compile_tir(database, mod, target)
    path = build_library(sch.mod, target, work / "plain.so")
    wall = time.monotonic() - started
    return wall, best_us, path, startup


def tiny_matmul():  # noqa: ANN201
    """An 8x8x8 matmul IRModule, for warming up."""
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload

    op = get_operator("matmul")
    return catalog_workload("matmul", op.Params.model_validate({"M": 8, "N": 8, "K": 8})).mod


def through_tunehub(label: str, extra: list[str], args: argparse.Namespace, work: Path) -> dict:
    """Start `tunehub serve`, warm its worker, run the job; returns timings and the artifact."""
    data = work / label
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    env.update({"TUNEHUB_SEED": str(args.seed), "TUNEHUB_NUM_TRIALS_PER_ITER": str(args.per_iter)})
    log = open(work / f"{label}.log", "wb")  # noqa: SIM115 - closed below
    started = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, "-m", "service.entry.cli", "serve", "--port", str(port),
         "--data-dir", str(data), *extra],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        with TunehubClient(url, timeout=60) as client:
            while True:
                try:
                    client.operators()
                    break
                except Exception:
                    if server.poll() is not None or time.monotonic() - started > 120:
                        raise RuntimeError(f"serve did not start: see {log.name}") from None
                    time.sleep(0.3)
            warm = client.submit("matmul", {"M": 8, "N": 8, "K": 8}, "host", 2)
            client.wait(warm["id"], poll_s=0.5)
            startup = time.monotonic() - started
            m, n, k = args.shape
            submitted = time.monotonic()
            job = client.submit("matmul", {"M": m, "N": n, "K": k}, "host", args.trials)
            job = client.wait(job["id"], poll_s=0.2)
            wall = time.monotonic() - submitted
            if job["state"] != "succeeded":
                raise RuntimeError(f"{label}: job {job['state']}: {job['error']}")
            sched = client.schedule(job["schedule_id"])
            path = work / f"{label}.so"
            client.download_artifact(job["schedule_id"], path)
            started_at, finished_at = job["started_at"], job["finished_at"]
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    return {
        "wall": wall,
        "startup": startup,
        "best_us": sched["latency_us"],
        "path": path,
        "queued_s": _seconds(job["created_at"], started_at),
        "running_s": _seconds(started_at, finished_at),
    }


def _seconds(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _reachable(url: str) -> bool:
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url.replace("postgresql+psycopg", "postgresql"))
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=2):
            return True
    except OSError:
        return False


def main() -> int:
    """Run the three configurations and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=16)
    parser.add_argument("--shape", type=int, nargs=3, default=[256, 256, 256])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    import tvm

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target

    m, n, k = args.shape
    op = get_operator("matmul")
    params = op.Params.model_validate({"M": m, "N": n, "K": k})
    mod = catalog_workload("matmul", params).mod
    target = tvm.target.Target(resolve_target("host").canonical)
    work = Path(tempfile.mkdtemp(prefix="tunehub-overhead-"))
    print(f"matmul {m}x{n}x{k}, {args.trials} trials, batches of {args.per_iter}, seed {args.seed}")
    print(f"target {resolve_target('host').canonical}")

    rows = []
    wall, best, path, startup = plain_tune_tir(
        mod, target, args.trials, args.per_iter, args.seed, work / "plain"
    )
    plain = {"wall": wall, "best_us": best, "path": path, "startup": startup}
    rows.append(("plain tune_tir + JSONDatabase", plain))
    print(f"plain tune_tir: {wall:.1f} s", flush=True)
    configs = [("tunehub SQLite + SQLite broker", "sqlite", [])]
    if _reachable(PG_URL) and _reachable(AMQP_URL):
        configs.append(
            ("tunehub PostgreSQL + RabbitMQ", "pg",
             ["--database-url", PG_URL, "--broker-url", AMQP_URL])
        )  # fmt: skip
    else:
        print("PostgreSQL or RabbitMQ unreachable: skipping that configuration")
    for name, label, extra in configs:
        if label == "pg":
            _reset_pg()
        result = through_tunehub(label, extra, args, work)
        rows.append((name, result))
        print(f"{name}: {result['wall']:.1f} s", flush=True)

    # Re-time every best kernel side by side, interleaved.
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (k, n))]
    inputs[1] = inputs[1].astype("float32")
    modules = [tvm.runtime.load_module(str(r["path"])) for _, r in rows]
    samples: list[list[float]] = [[] for _ in rows]
    for _ in range(3):
        for i, module in enumerate(modules):
            samples[i].append(time_tvm(module, inputs, (m, n), "float32", args.repeat))
    retimed = [statistics.median(s) * 1e6 for s in samples]

    base_wall, base_best = rows[0][1]["wall"], retimed[0]
    print()
    print(
        f"{'configuration':<34} {'wall s':>7} {'wall ratio':>10} {'search best us':>14} "
        f"{'re-timed us':>11} {'latency ratio':>13} {'queued s':>8} {'start-up s':>10}"
    )
    for (name, r), us in zip(rows, retimed, strict=True):
        print(
            f"{name:<34} {r['wall']:>7.1f} {r['wall'] / base_wall:>9.3f}x {r['best_us']:>14.1f} "
            f"{us:>11.1f} {us / base_best:>12.3f}x {r.get('queued_s', 0):>8.2f} "
            f"{r.get('startup', 0):>10.1f}"
        )
    print("\nwall ratio: tunehub's submit-to-succeeded time over plain tune_tir's (goal <= 1.05x);")
    print("latency ratio: the served kernel's re-timed latency over plain tune_tir's best.")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _reset_pg() -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


if __name__ == "__main__":
    sys.exit(main())

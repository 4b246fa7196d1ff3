"""Loading a fetched kernel: a tuned 512^3 fp32 matmul called as a new user would (the library's
``main`` on numpy arrays, in a fresh process), through `service.client.loader.load_kernel`, and
numpy's ``a @ b``, side by side in one run.

Each way runs in its own fresh process (TVM sizes its thread pool once per process and
thread, so a shared process would hide what a new user gets), on the same data, interleaved over
``--rounds`` so that machine noise hits each alike; each process times its call as a user sees
it (inputs from numpy, the output back as a numpy array), median of ``--repeat`` samples of at
least 0.1 s. Prints the latency, GFLOPS and numpy/way ratio (> 1: faster than numpy) and the
threads each TVM way ran on, next to the latency the worker published (``main_packed`` alone
in `time_evaluator`).

    .venv/bin/python bench/loader.py [--trials 64] [--space packed]   # tunes on its own serve
    .venv/bin/python bench/loader.py --server URL --schedule ID       # an existing schedule

The matmul comes from `kernel_quality.tune_in_space` (a fresh `tunehub serve` tuning it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel_quality import CASES, time_callable, tune_in_space  # noqa: E402

from service.client import TunehubClient  # noqa: E402

CASE = "matmul512"
WAYS = ("numpy", "main", "load_kernel")


def child(way: str, schedule_path: Path, library: Path, repeat: int) -> dict[str, Any]:
    """Time one way in this (fresh) process; what it measured, as JSON."""
    params = CASES[CASE][1]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((params["M"], params["K"])).astype("float32")
    b = rng.standard_normal((params["K"], params["N"])).astype("float32")
    expected = a @ b
    threads = None
    if way == "numpy":

        def run() -> np.ndarray:
            return a @ b

    elif way == "main":
        import tvm

        main = tvm.runtime.load_module(str(library))["main"]

        def run() -> np.ndarray:  # what a new user writes
            out = tvm.runtime.empty(expected.shape, "float32")
            main(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
            return out.numpy()

    else:
        from service.client.loader import load_kernel

        schedule = json.loads(schedule_path.read_text())
        kernel = load_kernel(schedule, library, constants={1: b})
        threads = kernel.threads

        def run() -> np.ndarray:
            return kernel(a)

    error = float(np.max(np.abs(run() - expected)))
    seconds = time_callable(run, repeat)
    if way != "numpy":
        import tvm

        threads = threads or int(tvm.runtime.num_threads())  # after timing: reading starts a pool
    return {"seconds": seconds, "threads": threads, "error": error}


def fetch(args: argparse.Namespace, folder: Path) -> tuple[dict[str, Any], Path]:
    """The schedule's JSON and its downloaded library: ``--schedule`` from ``--server``, else
    tuned on a fresh `tunehub serve`."""
    if args.schedule is not None:
        with TunehubClient(args.server, timeout=120) as client:
            schedule = client.schedule(args.schedule)
            library = folder / "kernel.so"
            client.download_artifact(args.schedule, library)
        return schedule, library
    started = time.monotonic()
    tuned = tune_in_space(args.space, [CASE], args.trials, args.server)
    if CASE not in tuned:
        raise SystemExit(f"{CASE} was not tuned")
    print(f"tuned in {time.monotonic() - started:.0f} s", flush=True)
    schedule, library = tuned[CASE]
    return schedule, Path(library)


def main() -> int:
    """Run the comparison (or, with --child, one way of it) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", help="a running tunehub (default: start one and tune)")
    parser.add_argument("--schedule", type=int, help="an existing schedule of a 512^3 matmul")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--space", default="packed", choices=["plain", "packed"])
    parser.add_argument("--repeat", type=int, default=5, help="timed samples per process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per way")
    parser.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.files[0], args.files[1], args.repeat)))
        return 0

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tunehub-bench-loader-") as tmp:
        folder = Path(tmp)
        schedule, library = fetch(args, folder)
        schedule_path = folder / "schedule.json"
        schedule_path.write_text(json.dumps(schedule))
        runs: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            for way in WAYS:
                done = subprocess.run(
                    [sys.executable, __file__, "--child", way, "--repeat", str(args.repeat),
                     "--files", str(schedule_path), str(library)],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(f"{way} failed:\n{done.stdout}{done.stderr}")
                runs[way].append(json.loads(done.stdout.strip().splitlines()[-1]))

    params = CASES[CASE][1]
    flop = 2 * params["M"] * params["N"] * params["K"]
    numpy_s = statistics.median(r["seconds"] for r in runs["numpy"])
    canonical = schedule["target"]["canonical"]
    print(f"\nschedule {schedule['id']}: {CASE} from the {schedule['space']} space, entry "
          f"{schedule['entry']}, {schedule['trials']} trials; target {canonical}")  # fmt: skip
    print(f"{'way':<34} {'us':>9} {'GFLOPS':>7} {'numpy/way':>9} {'threads':>7} {'max err':>8}")
    for way, label in (
        ("numpy", "numpy a @ b"),
        ("main", "main on numpy arrays (naive)"),
        ("load_kernel", "load_kernel(schedule, constants=)"),
    ):
        seconds = statistics.median(r["seconds"] for r in runs[way])
        threads = runs[way][0]["threads"]
        error = max(r["error"] for r in runs[way])
        print(f"{label:<34} {seconds * 1e6:>9.1f} {flop / seconds / 1e9:>7.1f} "
              f"{numpy_s / seconds:>8.2f}x {threads or '-':>7} {error:>8.1e}")  # fmt: skip
    published = schedule["latency_us"] * 1e-6
    print(f"{'published (main_packed alone)':<34} {published * 1e6:>9.1f} "
          f"{flop / published / 1e9:>7.1f} {numpy_s / published:>8.2f}x")  # fmt: skip
    print(f"\nmedian of {args.rounds} fresh processes per way, each the median of "
          f"{args.repeat} samples of >= 0.1 s; numpy/way > 1: faster than numpy; 1-min load "
          f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on "
          f"{os.cpu_count()} CPUs (other work on them slows the 2-thread ways most)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

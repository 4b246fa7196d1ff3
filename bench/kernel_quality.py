"""Kernel quality: matmuls tuned through tunehub vs numpy (OpenBLAS), measured side by side.

Starts its own `tunehub serve` on a free port with a fresh data folder (or uses --server),
submits fp32 matmul jobs (512³ and 1024³, 256 trials each by default), downloads the verified
artifacts, then times in this one process, interleaved: the tuned library (TVM time_evaluator)
and numpy ``a @ b``. Prints latency, GFLOPS, tuned/numpy speed ratio and the fraction of the CPU's
estimated fp32 peak.

    .venv/bin/python bench/kernel_quality.py [--sizes 512 1024] [--trials 256] [--server URL]

OpenBLAS's speed depends on OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE, which some machines here set
for old OpenBLAS builds: run with both unset to compare against current numpy at its best
(`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...`); the kernel numpy uses is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.client import TunehubClient  # noqa: E402


def cpu_peak_gflops(cores: int) -> tuple[float, str]:
    """Estimated fp32 peak: cores x clock x FLOP/cycle of the widest FMA the CPU has."""
    flags, mhz, vendor = set(), 0.0, ""
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":", 1)[1])
            elif line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
    if "avx512f" in flags:
        # Intel server cores: two 512-bit FMA ports; AMD Zen 4: 512-bit ops on 256-bit pipes.
        per_cycle = 64 if vendor == "GenuineIntel" else 32
    elif "fma" in flags:
        per_cycle = 32
    else:
        per_cycle = 8
    peak = cores * mhz / 1000 * per_cycle
    return peak, f"{cores} cores x {mhz / 1000:.2f} GHz x {per_cycle} FLOP/cycle"


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_numpy(a: np.ndarray, b: np.ndarray, repeat: int, min_s: float = 0.1) -> float:
    """Median seconds of ``a @ b`` (each sample loops for at least ``min_s``)."""
    a @ b
    samples = []
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            a @ b
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_s:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def time_tvm(module, shape_a, shape_b, shape_c, repeat: int) -> float:  # noqa: ANN001
    """Median seconds of the tuned kernel (TVM time_evaluator, 100 ms per sample)."""
    import tvm

    dev = tvm.cpu(0)
    args = [
        tvm.runtime.tensor(np.random.rand(*s).astype("float32"), dev)
        for s in (shape_a, shape_b, shape_c)
    ]
    timer = module.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=100)
    return statistics.median(float(x) for x in timer(*args).results)


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--server", help="use a running tunehub instead of starting one")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per kernel")
    parser.add_argument("--peak-gflops", type=float, help="override the estimated peak")
    args = parser.parse_args()

    import threadpoolctl
    import tvm

    from tuning.targets import resolve_target

    host = resolve_target("host")
    cores = int(host.canonical.get("num-cores", os.cpu_count() or 1))
    peak, peak_how = cpu_peak_gflops(cores)
    peak = args.peak_gflops or peak
    blas = [
        (i["internal_api"], i.get("architecture"), i["num_threads"])
        for i in threadpoolctl.threadpool_info()
        if i["user_api"] == "blas"
    ]
    print(f"target: {host.canonical}")
    print(f"peak (estimate): {peak:.0f} GFLOPS = {peak_how}")
    print(f"numpy BLAS: {blas}  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")

    server, data_dir = None, None
    url = args.server
    if url is None:
        data_dir = Path(tempfile.mkdtemp(prefix="tunehub-bench-"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            stdout=open(data_dir / "serve.log", "wb"),  # noqa: SIM115 - lives as long as serve
            stderr=subprocess.STDOUT,
        )
    rows = []
    try:
        with TunehubClient(url, timeout=120) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    client.operators()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            for n in args.sizes:
                started = time.monotonic()
                job = client.submit("matmul", {"M": n, "N": n, "K": n}, "host", args.trials)
                job = client.wait(job["id"], poll_s=2)
                wall = time.monotonic() - started
                if job["state"] != "succeeded":
                    print(f"{n}^3: job {job['state']}: {job['error']}")
                    continue
                sched = client.schedule(job["schedule_id"])
                lib = Path(tempfile.mkdtemp()) / f"matmul{n}.so"
                client.download_artifact(job["schedule_id"], lib)
                rows.append((n, job, sched, lib, wall))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)

    print()
    print(
        f"{'shape':>6} {'trials':>6} {'tune s':>7} {'tuned us':>10} {'numpy us':>10} "
        f"{'tuned GF':>9} {'numpy GF':>9} {'tuned/numpy':>11} {'tuned %peak':>11} "
        f"{'numpy %peak':>11} {'vs untuned':>10}"
    )
    for n, _job, sched, lib, wall in rows:
        module = tvm.runtime.load_module(str(lib))
        a = np.random.rand(n, n).astype("float32")
        b = np.random.rand(n, n).astype("float32")
        # Interleave the two so that machine noise hits both alike.
        tuned, numpy_s = [], []
        for _ in range(3):
            tuned.append(time_tvm(module, (n, n), (n, n), (n, n), args.repeat))
            numpy_s.append(time_numpy(a, b, args.repeat))
        t_tvm, t_np = statistics.median(tuned), statistics.median(numpy_s)
        flop = 2.0 * n**3
        gf_tvm, gf_np = flop / t_tvm / 1e9, flop / t_np / 1e9
        print(
            f"{n:>5}³ {sched['trials']:>6} {wall:>7.0f} {t_tvm * 1e6:>10.1f} "
            f"{t_np * 1e6:>10.1f} {gf_tvm:>9.1f} {gf_np:>9.1f} {t_np / t_tvm:>10.2f}x "
            f"{gf_tvm / peak:>10.0%} {gf_np / peak:>11.0%} "
            f"{sched['speedup_vs_untuned']:>9.1f}x"
        )
    print("\ntuned/numpy > 1 means the tuned kernel is faster than numpy's a @ b.")
    if data_dir is not None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Kernel quality: kernels tuned through tunehub vs the vendor libraries, measured side by side.

For each search space (``plain``: MetaSchedule's default; ``packed``: weights in a layout the
search chooses, register tiles one vector wide; see `tuning.search.spaces`) it starts its own
`tunehub serve` on a free port with a fresh data folder (one space per store, so each space's
best is its own), submits fp32 jobs for the chosen cases in that space and downloads the
verified artifacts. Then it times, in this one process and interleaved, each space's kernel
(TVM time_evaluator; a packed kernel gets its weights packed once beforehand, as a deployment
does) and the baseline on the same data: numpy ``a @ b`` (OpenBLAS) for matmuls; PyTorch CPU
(oneDNN; NHWC as channels_last) for the ResNet-50 convolutions and the MobileNet depthwise
layer. Prints latency and GFLOPS per kernel, the baseline/tuned speed ratio per space (> 1: tuned
is faster), each kernel's fraction of the CPU's peak, measured by a kernel of register-held
FMA chains, and the ceiling: the ratio a kernel at that peak would show against the baseline
(where the baseline runs above 83% of peak, no kernel can be 1.2x faster). Every library runs
on the same ``BENCH_THREADS`` threads (default: the cores), TVM included
(`tuning.hardware.threads`),
and each is timed after the others' thread pools went idle.

    .venv/bin/python bench/kernel_quality.py [--cases matmul512 ...] [--trials 256]
        [--spaces plain packed] [--server URL]

Cases: matmul512, matmul1024 (numpy); resnet-7x7s2, resnet-3x3, resnet-1x1, each -nchw and
-nhwc, and mobilenet-dw-nchw / -nhwc (PyTorch, installed by `pip install -e '.[bench]'`).

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.client import TunehubClient  # noqa: E402
from tuning.hardware.peak import measured_peak_gflops  # noqa: E402


def nominal_peak_gflops(cores: int) -> tuple[float, str]:
    """Nominal fp32 peak from /proc/cpuinfo: cores x listed clock x FLOP/cycle of the widest
    FMA (the listed clock is often the base clock, below what the cores really run at)."""
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


def settle() -> None:
    """Let the last library's thread pool go idle before timing another: OpenBLAS, OpenMP and
    TVM workers spin for a while after a call, and on a 2-core machine a spinning neighbour
    halves the next kernel (measured: a TVM kernel timed right after ``a @ b`` ran at 179
    GFLOPS, 0.2 s later at 388, 1 s later at 422)."""
    time.sleep(1.0)


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _conv(layout: str, c: int, hw: int, k: int, r: int, stride: int, pad: int) -> dict:
    return {
        "layout": layout, "N": 1, "C": c, "H": hw, "W": hw, "K": k,
        "R": r, "S": r, "stride": stride, "padding": pad,
    }  # fmt: skip


def _dw(layout: str) -> dict:
    return {
        "layout": layout, "N": 1, "C": 32, "H": 112, "W": 112,
        "R": 3, "S": 3, "stride": 1, "padding": 1,
    }  # fmt: skip


# name -> (operator, params, baseline); ResNet-50 layers at batch 1: conv1 (7×7 stride 2),
# a layer1 3×3 and a layer1 1×1 expansion; MobileNet-V1's first depthwise layer.
CASES: dict[str, tuple[str, dict, str]] = {
    "matmul512": ("matmul", {"M": 512, "N": 512, "K": 512}, "numpy"),
    "matmul1024": ("matmul", {"M": 1024, "N": 1024, "K": 1024}, "numpy"),
}
for _layout in ("nchw", "nhwc"):
    _L = _layout.upper()
    CASES[f"resnet-7x7s2-{_layout}"] = ("conv2d", _conv(_L, 3, 224, 64, 7, 2, 3), "torch")
    CASES[f"resnet-3x3-{_layout}"] = ("conv2d", _conv(_L, 64, 56, 64, 3, 1, 1), "torch")
    CASES[f"resnet-1x1-{_layout}"] = ("conv2d", _conv(_L, 64, 56, 256, 1, 1, 0), "torch")
    CASES[f"mobilenet-dw-{_layout}"] = ("depthwise_conv2d", _dw(_L), "torch")


def baseline_callable(operator: str, params: dict, inputs: list[np.ndarray]):  # noqa: ANN201
    """The vendor-library version of the case on the same data, as a no-argument callable."""
    if operator == "matmul":
        a, b = inputs
        return lambda: a @ b
    import torch

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1)))
    x, w = (torch.from_numpy(v) for v in inputs)
    nhwc = params["layout"] == "NHWC"
    if nhwc:
        # NHWC data as an NCHW view with channels_last strides: PyTorch's NHWC path.
        x = x.permute(0, 3, 1, 2)
        w = w.permute(3, 2, 0, 1) if operator == "conv2d" else w.permute(2, 3, 0, 1)
        w = w.contiguous(memory_format=torch.channels_last)
    groups = params["C"] if operator == "depthwise_conv2d" else 1
    if operator == "depthwise_conv2d":
        w = w.reshape(params["C"], 1, params["R"], params["S"])
        if nhwc:
            w = w.contiguous(memory_format=torch.channels_last)
    stride, pad = params.get("stride", 1), params.get("padding", 0)

    def run() -> object:
        with torch.inference_mode():
            return torch.nn.functional.conv2d(x, w, None, stride, pad, 1, groups)

    return run


def bound(fn: Callable[[Any], Any], x: Any) -> Callable[[], np.ndarray]:
    """``fn(x)`` as a numpy array, as a no-argument callable."""

    def call() -> np.ndarray:
        out = fn(x)
        return np.asarray(out if isinstance(out, np.ndarray) else out.numpy())

    return call


def time_callable(fn, repeat: int, min_s: float = 0.1) -> float:  # noqa: ANN001
    """Median seconds of ``fn()`` (each sample loops for at least ``min_s``)."""
    fn()
    samples = []
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_s:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def time_tvm(
    module, sched: dict, inputs: list[np.ndarray], out_shape, out_dtype, repeat: int
) -> float:  # noqa: ANN001, E501
    """Median seconds of the tuned kernel (TVM time_evaluator, 100 ms per sample): its
    ``entry``, with packed weights prepared once by the artifact's pack functions."""
    import tvm

    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(v, dev) for v in inputs]
    for param in sched["packed_params"]:
        packed = tvm.runtime.empty(param["packed_shape"], param["dtype"], dev)
        module[param["function"]](args[param["index"]], packed)
        args[param["index"]] = packed
    args.append(tvm.runtime.tensor(np.zeros(out_shape, out_dtype), dev))
    timer = module.time_evaluator(sched["entry"], dev, number=1, repeat=repeat, min_repeat_ms=100)
    return statistics.median(float(x) for x in timer(*args).results)


def tune_in_space(space: str, cases: list[str], trials: int, server_url: str | None) -> dict:
    """Tune every case in ``space`` on a fresh `tunehub serve` (or ``server_url``); returns
    case -> (schedule, downloaded library)."""
    server, data_dir = None, None
    url = server_url
    if url is None:
        data_dir = Path(tempfile.mkdtemp(prefix=f"tunehub-bench-{space}-"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "service.entry.cli", "serve", "--port", str(port),
             "--data-dir", str(data_dir)],
            stdout=open(data_dir / "serve.log", "wb"),  # noqa: SIM115 - lives as long as serve
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    tuned = {}
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
            # Queue every case at once; the worker runs them one after another.
            submitted = {
                name: (time.monotonic(), client.submit(CASES[name][0], CASES[name][1], "host",
                                                       trials, space=space))
                for name in cases
            }  # fmt: skip
            for name, (started, job) in submitted.items():
                job = client.wait(job["id"], poll_s=2)
                wall = time.monotonic() - started
                if job["state"] != "succeeded":
                    print(f"{name} [{space}]: job {job['state']}: {job['error']}")
                    continue
                sched = client.schedule(job["schedule_id"])
                lib = Path(tempfile.mkdtemp()) / f"{name}-{space}.so"
                client.download_artifact(job["schedule_id"], lib)
                tuned[name] = (sched, lib)
                print(f"{name} [{space}]: tuned in {wall:.0f} s since submit; best from the "
                      f"{sched['space']} space, entry {sched['entry']}", flush=True)  # fmt: skip
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    return tuned


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument(
        "--spaces", nargs="+", default=["plain", "packed"], choices=["plain", "packed"]
    )
    parser.add_argument("--server", help="use a running tunehub instead of starting one")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per kernel")
    parser.add_argument("--peak-gflops", type=float, help="override the measured peak")
    args = parser.parse_args()

    import threadpoolctl
    import tvm

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target
    from tuning.hardware.threads import pin_runtime_threads
    from tuning.hardware.vectors import vector_bits
    from tuning.ir import arg_specs
    from tuning.measure.timing import run_module
    from tuning.publish.packing import PackedParam

    host = resolve_target("host")
    cores = int(host.canonical.get("num-cores", os.cpu_count() or 1))
    threads = int(os.environ.setdefault("BENCH_THREADS", str(cores)))
    # Every library gets the same cores: TVM's own default is half of an x86 machine's CPUs.
    tvm_threads = pin_runtime_threads(threads)
    threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
    lanes = vector_bits(tvm.target.Target(host.canonical)) // 32

    def probe() -> float:
        return measured_peak_gflops(host.canonical, tvm_threads, lanes)

    # The clock this VM's cores run at drifts with the host's load (probes here: 325-494
    # GFLOPS in one afternoon), so the peak is probed again before every case, and the
    # highest probe is the peak every row is divided by.
    probes = [probe()]
    nominal, nominal_how = nominal_peak_gflops(cores)
    blas = [
        (i["internal_api"], i.get("architecture"), i["num_threads"])
        for i in threadpoolctl.threadpool_info()
        if i["user_api"] == "blas"
    ]
    print(f"target: {host.canonical}; TVM kernels on {tvm_threads} threads")
    print(f"peak probe: {probes[0]:.0f} GFLOPS ({tvm_threads} threads of register-held FMA "
          f"chains); nominal {nominal:.0f} = {nominal_how}")  # fmt: skip
    print(f"numpy BLAS: {blas}  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    if any(CASES[c][2] == "torch" for c in args.cases):
        import torch

        print(f"torch {torch.__version__}, {os.environ['BENCH_THREADS']} threads, "
              f"mkldnn={torch.backends.mkldnn.is_available()}")  # fmt: skip

    tuned = {space: tune_in_space(space, args.cases, args.trials, args.server)
             for space in args.spaces}  # fmt: skip

    rows = []
    rng = np.random.default_rng(0)
    for name in args.cases:
        if not all(name in tuned[space] for space in args.spaces):
            continue
        operator, raw, baseline = CASES[name]
        op = get_operator(operator)
        params = op.Params.model_validate(raw)
        func = catalog_workload(operator, params).mod["main"]
        out_shape, out_dtype = arg_specs(func)[-1]
        inputs = op.make_inputs(params, func, rng)
        base_fn = baseline_callable(operator, raw, inputs)
        theirs = np.asarray(base_fn())
        if baseline == "torch" and raw.get("layout") == "NHWC":
            theirs = theirs.transpose(0, 2, 3, 1)
        kernels, err = {}, 0.0
        for space in args.spaces:
            sched, lib = tuned[space][name]
            module = tvm.runtime.load_module(str(lib))
            packed = [PackedParam(**p) for p in sched["packed_params"]]
            # Each computes what the baseline computes (on top of the worker's verification).
            ours = run_module(module, "llvm", inputs, out_shape, out_dtype, packed)
            err = max(err, float(np.max(np.abs(ours - theirs))))
            kernels[space] = (module, sched)
        # Interleave all of them so that machine noise hits each alike.
        times: dict[str, list[float]] = {space: [] for space in [*args.spaces, "base"]}
        settle()
        probes.append(probe())
        for _ in range(3):
            for space, (module, sched) in kernels.items():
                settle()
                times[space].append(
                    time_tvm(module, sched, inputs, out_shape, out_dtype, args.repeat)
                )
            settle()
            times["base"].append(time_callable(base_fn, args.repeat))
        trials = max(kernels[space][1]["trials"] for space in args.spaces)
        rows.append((name, baseline, trials, op.flop(params), times, err))
        print(f"{name}: timed", flush=True)

    peak = args.peak_gflops or max(probes)
    print(f"\npeak: {peak:.0f} GFLOPS, the highest of {len(probes)} probes "
          f"({', '.join(f'{p:.0f}' for p in probes)})")  # fmt: skip
    header = (
        f"{'case':<20} {'baseline':>8} {'trials':>6} {'base us':>9} {'base GF':>8} {'base %pk':>8}"
    )
    for space in args.spaces:
        header += f" | {space + ' us':>10} {'GF':>6} {'%pk':>4} {'base/' + space:>12}"
    print(header + f" {'max err':>8} {'ceiling':>8}")
    for name, baseline, trials, flop, times, err in rows:
        t_base = statistics.median(times["base"])
        gf_base = flop / t_base / 1e9
        line = (
            f"{name:<20} {baseline:>8} {trials:>6} {t_base * 1e6:>9.1f} {gf_base:>8.1f} "
            f"{gf_base / peak:>8.0%}"
        )
        for space in args.spaces:
            t = statistics.median(times[space])
            line += f" | {t * 1e6:>10.1f} {flop / t / 1e9:>6.1f} {flop / t / 1e9 / peak:>4.0%}"
            line += f" {t_base / t:>11.2f}x"
        # The highest base/<space> any kernel could show: one running at the measured peak.
        print(line + f" {err:>8.1e} {peak / gf_base:>7.2f}x", flush=True)
    print("\nbase/<space> > 1 means that space's tuned kernel is faster than the baseline library;")
    print("ceiling = peak / baseline GFLOPS: the base/<space> of a kernel at 100% of the peak.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

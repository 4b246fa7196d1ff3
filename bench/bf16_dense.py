"""The AVX512-BF16 micro-kernel (`tuning.search.bf16_dot`) on BERT-base's dense shapes (M = 128:
the catalog's ``matmul`` in bfloat16, its weight ``[K, N]``),
against the machine's measured bf16 and fp32 peaks and against PyTorch on the same threads
(``torch.matmul`` in bf16, which goes to oneDNN, and in fp32), one process, interleaved.

For each shape, every register block (rows x vectors of 16 columns) and k block of a small grid
is compiled, checked against a float64 product of the same bf16 inputs (relative error), and
timed with its weight packed beforehand (``main_packed``, as an artifact's caller does); the best
is reported. A sweep of the decisions the search samples (`bf16_tiles`), not the search: what
the kernel can reach.

With ``--trials N`` it runs the worker's own job instead (`service.worker.execution.run_job`
in this process: the packed space's search, verification in the jail, publication) for the
catalog's ``dense`` (weight ``[N, K]``) in bfloat16 and in float32, N trials each, and prints
the published latencies side by side.

    .venv/bin/python bench/bf16_dense.py [--shapes 768x768,3072x768,768x3072,2304x768]
    .venv/bin/python bench/bf16_dense.py --trials 32
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

M = 128
ROWS = (4, 8, 16)
VECTORS = (1, 2, 4)
K_PAIRS = (32, 64, 128)  # k blocks of 64, 128, 256


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="768x768,3072x768,768x3072,2304x768",
                        help="N x K of each dense (M = 128)")  # fmt: skip
    parser.add_argument("--trials", type=int, default=0,
                        help="run the worker's job, this budget, instead")  # fmt: skip
    args = parser.parse_args()
    if args.trials:
        return search(args.shapes, args.trials)

    from tuning.hardware.host import host_target_spec, physical_cores
    from tuning.hardware.threads import pin_runtime_threads

    threads = physical_cores()
    os.environ["OMP_NUM_THREADS"] = str(threads)
    pin_runtime_threads(threads)

    import ml_dtypes
    import numpy as np
    import torch
    import tvm

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.bf16 import bf16_unit
    from tuning.hardware.peak import target_peak_gflops
    from tuning.hardware.peak_bf16 import target_bf16_peak
    from tuning.publish.packing import split_packed
    from tuning.search.bf16_dot import bf16_axes, bf16_tiles
    from tuning.search.spaces import PACKED, space_module

    torch.set_num_threads(threads)
    spec = host_target_spec()
    target = tvm.target.Target(spec)
    if bf16_unit(target) is None:
        raise SystemExit(f"the host target ({spec}) has no bf16 unit")
    fp32_peak = target_peak_gflops(spec) or 0.0
    unit, bf16_peak = target_bf16_peak(spec) or ("none", 0.0)
    print(f"host {spec}; {threads} threads; fp32 FMA peak {fp32_peak:.0f} GFLOPS, "
          f"bf16 peak ({unit}) {bf16_peak:.0f} GFLOPS")  # fmt: skip
    print("| N x K | best block (rows, vectors, kc) | tunehub bf16 | % bf16 peak | rel. error "
          "| torch bf16 | torch fp32 | vs torch bf16 | vs torch fp32 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        n, k = (int(x) for x in shape.split("x"))
        flop = 2.0 * M * n * k
        a = rng.uniform(-1, 1, (M, k)).astype(ml_dtypes.bfloat16)
        b = rng.uniform(-1, 1, (k, n)).astype(ml_dtypes.bfloat16)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        best: tuple[float, tuple[int, int, int], float] | None = None
        started = time.perf_counter()
        op = get_operator("matmul")
        spec = catalog_workload("matmul", op.Params(M=M, N=n, K=k, dtype="bfloat16"))
        mod = space_module(spec.mod, PACKED, op.constant_operands)
        for rows, vectors, pairs in itertools.product(ROWS, VECTORS, K_PAIRS):
            if M % rows or (n // 16) % vectors or k % (2 * pairs):
                continue
            sch = tvm.s_tir.Schedule(mod)
            block = sch.get_sblock("C")
            found = bf16_axes(sch, block, budget=28)
            assert found is not None, "the bf16 kernel does not take this matmul"
            bf16_tiles(sch, block, found, (rows, vectors, pairs))
            split = split_packed(sch.mod, drop_in=False)
            lib = tvm.compile(split.mod, target=target).mod
            (param,) = split.packed
            packed = tvm.runtime.empty(param.packed_shape, "bfloat16", dev)
            lib[param.function](tvm.runtime.tensor(b, dev), packed)
            a_dev, out = tvm.runtime.tensor(a, dev), tvm.runtime.empty((M, n), "float32", dev)
            lib[split.entry](a_dev, packed, out)
            error = float(np.abs(out.numpy() - expected).max() / np.abs(expected).max())
            timer = lib.time_evaluator(split.entry, dev, number=10, repeat=5, min_repeat_ms=50)
            secs = min(timer(a_dev, packed, out).results)
            if best is None or secs < best[0]:
                best = (secs, (rows, vectors, 2 * pairs), error)
        assert best is not None
        secs, block, error = best
        ta = torch.from_numpy(a.astype(np.float32))
        tb = torch.from_numpy(b.astype(np.float32))
        torch_bf16 = _torch_secs(ta.bfloat16(), tb.bfloat16())
        torch_fp32 = _torch_secs(ta, tb)
        print(f"| {n} x {k} | {block} | {flop / secs / 1e9:.0f} GFLOPS ({secs * 1e6:.0f} us) "
              f"| {100 * flop / secs / 1e9 / bf16_peak:.0f}% | {error:.1e} "
              f"| {torch_bf16 * 1e6:.0f} us | {torch_fp32 * 1e6:.0f} us "
              f"| {torch_bf16 / secs:.2f}x | {torch_fp32 / secs:.2f}x |")  # fmt: skip
        print(f"  (swept in {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


def search(shapes: str, trials: int) -> int:
    """The worker's job on the catalog's dense in bf16 and fp32 for each shape (module doc)."""
    import tempfile

    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext, run_job
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target
    from tuning.search.spaces import resolve_space

    root = Path(tempfile.mkdtemp(prefix="bf16-bench-"))
    engine = make_engine(f"sqlite:///{root / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    context = WorkerContext(store=store, artifact_dir=root / "artifacts", worker_name="bench")
    target = resolve_target("host")
    row = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {})
    op = get_operator("dense")
    space = resolve_space("auto", op.constant_operands, target.kind)
    print(f"host {target.canonical}; the worker's job, {trials} trials each, packed space")
    print("| M x N x K | bf16 | fp32 | bf16 vs fp32 | bf16 kernel | tuning wall (bf16 / fp32) |")
    print("|---|---|---|---|---|---|")
    for shape in shapes.split(","):
        n, k = (int(x) for x in shape.split("x"))
        found = {}
        for dtype in ("bfloat16", "float32"):
            spec = catalog_workload("dense", op.Params(M=M, N=n, K=k, dtype=dtype))
            workload = store.catalog.get_or_create_workload(
                spec.shash, spec.mod_json, "dense", spec.params, spec.flop
            )
            job = store.jobs.create(workload.id, row.id, trials, "q", space=space)
            started = time.perf_counter()
            state = run_job(context, job.id)
            wall = time.perf_counter() - started
            done = store.jobs.get(job.id)
            assert state == "succeeded", done.error
            best = store.schedules.get(done.schedule_id)
            found[dtype] = (best.latency_us, spec.flop, wall, "tunehub_dpbf16ps" in best.tir)
        (b_us, flop, b_wall, dot), (f_us, _, f_wall, _) = found["bfloat16"], found["float32"]
        kernel = "vdpbf16ps" if dot else "widened"
        print(f"| {M} x {n} x {k} | {b_us:.0f} us ({flop / b_us / 1e3:.0f} GFLOPS) "
              f"| {f_us:.0f} us ({flop / f_us / 1e3:.0f} GFLOPS) | {f_us / b_us:.2f}x "
              f"| {kernel} | {b_wall:.0f} s / {f_wall:.0f} s |")  # fmt: skip
    engine.dispose()
    return 0


def _torch_secs(a: object, b: object) -> float:
    """Fastest of 5 rounds of 20 ``torch.matmul`` calls, per call."""
    import torch

    best = float("inf")
    with torch.inference_mode():
        for _ in range(3):
            torch.matmul(a, b)  # type: ignore[call-overload]
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(20):
                torch.matmul(a, b)  # type: ignore[call-overload]
            best = min(best, (time.perf_counter() - start) / 20)
    return best


if __name__ == "__main__":
    sys.exit(main())

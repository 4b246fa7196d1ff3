"""A model's convolutions in the plain layout (NCHW) against the blocked one kept between layers
(NCHW16c, `tuning.models.blocked_layout`): the same PyTorch module (`bench/torch_zoo.py`), the
same search (tunehub's worker, its spaces and verification, run in this process on a store of
its own), the same trials per task, then both compiled with their verified bests and timed
interleaved beside ONNX Runtime on the same threads, with each task's latency.

    .venv/bin/python bench/layout_ab.py [--model resnet18] [--trials-per-task 16]
        [--blocks 0,16] [--rounds 3]

Run it alone: TVM's thread pool slows several-fold beside another busy process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from kernel_quality import settle, time_callable  # noqa: E402
from model import ort_callable  # noqa: E402
from torch_zoo import export_onnx, input_shape, make_module  # noqa: E402


def tune_tasks(store: Any, context: Any, target_row: Any, tasks: list[Any],
               trials: int) -> tuple[list[Any], list[tuple[str, int, float, str]]]:  # fmt: skip
    """Tune every task as a model job's task job (space "auto", ``trials`` each) in this
    process; the verified bests as `TaskRecord`s and (task, calls, latency us, space) rows."""
    from service.worker.execution import run_job
    from tuning.models.pipeline import TaskRecord
    from tuning.search.spaces import resolve_space
    from tuning.untrusted.workloads import checked_module, describe

    records, rows = [], []
    for task in tasks:
        described = describe(checked_module(task.mod))  # as a model job stores its tasks
        shash = described["shash"]
        workload = store.catalog.get_or_create_workload(
            shash, described["mod_json"], None, {"task": task.name}, described["flop"]
        )
        space = resolve_space("auto", task.layout_free, "llvm")
        job = store.jobs.create(workload.id, target_row.id, trials, "bench", "bench",
                                space=space, space_must_match=False)  # fmt: skip
        # A task both layouts share (a pool, a reshape) is tuned once: a cache hit the second time.
        state = run_job(context, job.id) if job.state == "queued" else job.state
        best = store.schedules.best(workload.id, target_row.id)
        if state != "succeeded" or best is None:
            print(f"  {task.name}: {state} {store.jobs.get(job.id).error}", flush=True)
            continue
        rows.append((task.name, task.weight, best.latency_us, best.space))
        record = store.records.get(best.record_id) if best.record_id is not None else None
        if record is not None:
            records.append(TaskRecord(shash, record.trace_json, record.run_secs,
                                      record.args_info))  # fmt: skip
        print(f"  {task.name}: {best.latency_us:.1f} us ({best.space})", flush=True)
    return records, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--trials-per-task", type=int, default=16)
    parser.add_argument("--blocks", default="0,auto",
                        help="channel blocks to compare (0: NCHW; auto: the target's vector, "
                        "as a model job's blocked layout)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--store", help="a folder to keep the store in (a rerun reuses its "
                        "verified bests: cache hits; default: a temporary one)")  # fmt: skip
    args = parser.parse_args()

    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext
    from tuning.hardware.host import host_fingerprint
    from tuning.hardware.targets import resolve_target
    from tuning.hardware.threads import pin_runtime_threads
    from tuning.models.pipeline import compile_with, database_of, extract, tuning_pipeline

    resolved = resolve_target("host")
    threads = pin_runtime_threads(int(resolved.canonical.get("num-cores", os.cpu_count() or 1)))
    target = tvm.target.Target(resolved.canonical)
    shape = input_shape(args.model)
    onnx_model = export_onnx(make_module(args.model), shape)
    mod = from_onnx(onnx_model, shape_dict={"x": shape}, keep_params_in_input=False)
    from tuning.models.blocked_layout import BLOCKED, block_for

    blocks = [block_for(BLOCKED, target) if b == "auto" else int(b) for b in args.blocks.split(",")]
    print(f"{args.model} on {target}, {threads} threads; 1-min load {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory(prefix="tunehub-layout-ab-") as scratch:
        tmp = args.store or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        engine = make_engine(f"sqlite:///{tmp}/store.db")
        upgrade_schema(engine)
        store = Store(engine)
        target_row = store.catalog.get_or_create_target(
            resolved.canonical, resolved.kind, resolved.label, host_fingerprint()
        )
        context = WorkerContext(store=store, artifact_dir=Path(tmp) / "artifacts",
                                worker_name="layout-ab", stale_after=timedelta(hours=1),
                                num_trials_per_iter=min(16, args.trials_per_task))  # fmt: skip
        vms: dict[str, Any] = {}
        table: dict[str, list[tuple[str, int, float, str]]] = {}
        walls: dict[str, float] = {}
        for block in blocks:
            name = f"NCHW{block}c" if block else "NCHW"
            fused = tuning_pipeline(mod, target, block=block)
            tasks = extract(fused, target)
            print(f"{name}: {len(tasks)} tasks, {args.trials_per_task} trials each", flush=True)
            started = time.monotonic()
            records, table[name] = tune_tasks(store, context, target_row, tasks,
                                              args.trials_per_task)  # fmt: skip
            walls[name] = time.monotonic() - started
            tuned = compile_with(fused, target, database_of(tasks, records, target))
            vms[name] = relax.VirtualMachine(tuned, tvm.cpu())
            if block == blocks[0]:
                untuned = compile_with(fused, target, ms.database.MemoryDatabase())
                vms["untuned"] = relax.VirtualMachine(untuned, tvm.cpu())
        engine.dispose()

    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    data = tvm.runtime.tensor(x)
    ways = {way: (lambda vm=vm: vm["main"](data).numpy()) for way, vm in vms.items()}
    for run in ways.values():  # TVM's pool starts before ONNX Runtime's
        run()
    ort = ort_callable(onnx_model, threads)
    ways["onnxruntime"] = lambda: ort(x)
    reference = ways["untuned"]()
    scale = float(np.max(np.abs(reference)))
    errors = {w: float(np.max(np.abs(fn() - reference))) / scale for w, fn in ways.items()}
    samples: dict[str, list[float]] = {w: [] for w in ways}
    for _ in range(args.rounds):
        for way, fn in ways.items():
            settle()
            samples[way].append(time_callable(fn, args.repeat) * 1e3)
    ms_of = {w: statistics.median(s) for w, s in samples.items()}

    print(f"\n{'way':<12} {'ms':>9} {'ORT/way':>8} {'tune s':>7} {'max rel. error':>15}")
    for way in ways:
        ratio = ms_of["onnxruntime"] / ms_of[way]
        wall = f"{walls[way]:>7.0f}" if way in walls else f"{'-':>7}"
        print(f"{way:<12} {ms_of[way]:>9.3f} {ratio:>7.2f}x {wall} {errors[way]:>15.1e}")
    for name, rows in table.items():
        total = sum(w * us for _, w, us, _ in rows) or 1.0
        print(f"\n{name}: tasks by share of the kernel time")
        for task, weight, us, space in sorted(rows, key=lambda r: -r[1] * r[2]):
            share = 100 * weight * us / total
            print(f"  {task[:44]:<44} {weight:>3} x {us:>9.1f} us {share:>5.1f}%  {space}")
    print(f"\nmedian of {args.rounds} rounds, each the median of {args.repeat} samples of "
          f">= 0.1 s; 1-min load {os.getloadavg()[0]:.2f} at the end. A task both layouts share "
          "is tuned once (the second layout's 'tune s' leaves it out); with --store, bests of an "
          "earlier run are reused (with their budget)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

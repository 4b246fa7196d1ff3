"""Schedules, records, jobs and workers written straight into a store, in bulk: what the
dashboard's tests and `bench/dashboard.py` browse. Every row is as a worker would write it
(same tables, same TVM series), without a search: thousands of schedules seed in a second.

What `seed` writes: ``targets`` (the first labelled with an XSS probe, `XSS`), for each of
``schedules`` schedules a catalog or user workload (matmul / conv2d / dense shapes, layouts
NCHW/NHWC, dtypes float32/float16, spaces plain/packed) on one of the targets, one shared
artifact, ``records_for_first`` tuning records (some failed) for schedule 1's key measured by
two jobs, jobs in every state (one failed with the XSS probe as its error), a model tuning two
tasks (the succeeded and the running job) and two workers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, insert

from schedules_db.tables import (
    ArtifactRow,
    JobRow,
    ModelRow,
    ModelTaskRow,
    ScheduleRow,
    TargetRow,
    TuningRecordRow,
    WorkerRow,
    WorkloadRow,
)
from tuning.hardware.host import current_tvm_series

XSS = "<img src=x onerror=alert(1)>"
TARGETS = (XSS, "znver4-2c", "skylake-avx512-4c")
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Seeded:
    """What `seed` wrote: ids a test looks for."""

    target_ids: list[int]
    schedules: int
    curve_schedule_id: int
    curve_records: int
    job_ids: dict[str, int]


def _workload(i: int, rng: random.Random) -> dict[str, object]:
    kind = i % 4
    if kind == 3:  # a user TIR function: no operator, no params
        return {"operator": None, "params": {}, "origin": "user", "flop": float(2 ** (10 + i % 12))}
    dtype = "float16" if i % 5 == 0 else "float32"
    if kind == 0:
        m, n, k = (rng.choice((32, 64, 128, 256, 512, 1024)) for _ in range(3))
        return {"operator": "matmul", "params": {"M": m, "N": n, "K": k, "dtype": dtype},
                "origin": "catalog", "flop": 2.0 * m * n * k}  # fmt: skip
    if kind == 1:
        c, hw = rng.choice((16, 32, 64, 128)), rng.choice((7, 14, 28, 56))
        layout = "NHWC" if i % 3 else "NCHW"
        params = {"layout": layout, "N": 1, "C": c, "H": hw, "W": hw, "K": c, "R": 3, "S": 3,
                  "stride": 1, "padding": 1, "dtype": dtype,
                  "label": XSS if i == 1 else "conv"}  # fmt: skip
        return {"operator": "conv2d", "params": params, "origin": "catalog",
                "flop": 2.0 * c * c * hw * hw * 9}  # fmt: skip
    n, k = rng.choice((256, 512, 1000)), rng.choice((512, 1024, 2048))
    return {"operator": "dense", "params": {"M": 1, "N": n, "K": k, "bias": True, "dtype": dtype},
            "origin": "catalog", "flop": 2.0 * n * k}  # fmt: skip


def seed(engine: Engine, schedules: int, records_for_first: int = 12, seed: int = 1) -> Seeded:
    """Write the rows described in the module docstring; returns what was written."""
    rng = random.Random(seed)
    series = current_tvm_series()
    with engine.begin() as conn:
        target_ids = []
        for n, label in enumerate(TARGETS):
            key = f"{n:032x}"
            canonical = f'{{"kind": "llvm", "mcpu": "cpu{n}", "num-cores": {n + 2}}}'
            fingerprint = {"cpu_model": f"{label} CPU", "cores": n + 2}
            # The second target's peak was measured under load (not trusted: no share of it is
            # shown), the third's never.
            peak = (400.0, 150.0, None)[n]
            # Only the first target's bandwidth was measured (its roofline is known).
            bandwidth = ((200.0, 30.0, 2 << 20), (None, None, None), (None, None, None))[n]
            target_ids.append(
                conn.execute(
                    insert(TargetRow).values(key=key, canonical_json=canonical, kind="llvm",
                                             label=label, fingerprint=fingerprint, created_at=NOW,
                                             peak_gflops=peak, cache_gbps=bandwidth[0],
                                             memory_gbps=bandwidth[1], cache_bytes=bandwidth[2],
                                             peak_interference=(0.0, 0.8, None)[n],
                                             bandwidth_interference=0.0 if n == 0 else None)
                ).inserted_primary_key[0]  # type: ignore[index]
            )  # fmt: skip
        artifact_id = conn.execute(
            insert(ArtifactRow).values(sha256="ab" * 32, kind="so", size=23456,
                                       path="missing.so", created_at=NOW)
        ).inserted_primary_key[0]  # type: ignore[index]  # fmt: skip
        per_target = len(target_ids)
        workloads = []
        for w in range((schedules + per_target - 1) // per_target):
            spec = _workload(w, rng)
            workloads.append(
                {
                    "shash": str(10**12 + w),
                    "mod_json": "{}",
                    "created_at": NOW,
                    "bytes_moved": 4096 * (w + 1),
                    **spec,
                }  # fmt: skip
            )
        if workloads:
            conn.execute(insert(WorkloadRow), workloads)
        rows = []
        for i in range(schedules):
            w, t = divmod(i, per_target)
            spec = workloads[w]
            latency = float(spec["flop"]) / rng.uniform(2.0, 140.0) / 1e3  # 2-140 GFLOPS
            untuned = latency * rng.uniform(1.0, 60.0)
            rows.append(
                {
                    "workload_id": w + 1,
                    "target_id": target_ids[t],
                    "tvm_series": series,
                    "record_id": None,
                    "artifact_id": artifact_id,
                    "latency_us": latency,
                    "untuned_latency_us": untuned,
                    "trials": rng.choice((8, 16, 32, 64, 128)),
                    "max_abs_error": 1e-6,
                    "tir": f"# workload {w}\n@T.prim_func\ndef main(): pass  # {XSS}\n",
                    "job_id": None,
                    "space": "packed" if i % 2 else "plain",
                    "packed_params": None,
                    "created_at": NOW - timedelta(minutes=i),
                    "updated_at": NOW - timedelta(minutes=i),
                }  # fmt: skip
            )
        if rows:
            conn.execute(insert(ScheduleRow), rows)
        job_ids = {}
        for state in ("succeeded", "failed", "running", "queued", "cancelled"):
            job_ids[state] = conn.execute(
                insert(JobRow).values(
                    workload_id=1, target_id=target_ids[0], trials=16, state=state,
                    queue="tunehub.test", trials_done=16 if state == "succeeded" else 4,
                    best_latency_us=12.5, submitted_by="local",
                    error=f"search failed: {XSS}" if state == "failed" else None,
                    created_at=NOW, space="plain")
            ).inserted_primary_key[0]  # type: ignore[index]  # fmt: skip
        records = []
        for r in range(records_for_first):
            failed = r % 5 == 4
            records.append(
                {
                    "workload_id": 1,
                    "target_id": target_ids[0],
                    "tvm_series": series,
                    "job_id": job_ids["succeeded"]
                    if r < records_for_first // 2
                    else job_ids["failed"],
                    "trace_json": f"[[], [{r}]]",
                    "trace_sha256": f"{r:064x}",
                    "run_secs": [1e10] if failed else [1e-5 * (20 - r)],
                    "mean_run_us": None if failed else 10.0 * (20 - r) + rng.uniform(0, 5),
                    "args_info": [],
                    "tvm_version": "0.27.0",
                    "space": "plain",
                    "unverified": False,
                    "created_at": NOW,
                }  # fmt: skip
            )
        if records:
            conn.execute(insert(TuningRecordRow), records)
        model_id = conn.execute(
            insert(ModelRow).values(
                name=f"resnet {XSS}", format="onnx", source_artifact_id=artifact_id,
                inputs=[{"name": "x", "shape": [1, 3, 8, 8], "dtype": "float32"}], outputs=[],
                target_id=target_ids[0], trials=32, queue="tunehub.test", state="tuning",
                submitted_by="local", created_at=NOW)
        ).inserted_primary_key[0]  # type: ignore[index]  # fmt: skip
        conn.execute(insert(ModelTaskRow), [
            {"model_id": model_id, "position": n, "name": f"fused_conv2d_{n}", "weight": n + 1,
             "workload_id": 1, "job_id": job_ids[state], "trials": 16}
            for n, state in enumerate(("succeeded", "running"))
        ])  # fmt: skip
        live = datetime.now(timezone.utc)
        for name, beat, stopped in ((f"worker-{XSS}", live, None), ("worker-old", NOW, NOW)):
            conn.execute(
                insert(WorkerRow).values(
                    name=name, hostname="vm", pid=1, target_ids=target_ids[:2],
                    fingerprint={"cpu_model": "test CPU", "physical_cores": 2,
                                 "peak_gflops": {str(target_ids[0]): 400.0}}, rpc=None,
                    current_job_id=job_ids["running"] if stopped is None else None,
                    started_at=NOW, heartbeat_at=beat, stopped_at=stopped)
            )  # fmt: skip
    return Seeded(target_ids, schedules, 1, records_for_first, job_ids)

"""Cost-model transfer: one XGBoost model per target, trained on every stored record of that
target (all workloads), so a new search ranks candidates well from its first batch (TenSet's
observation) instead of from random scores.

Models are files in a local folder, ``<folder>/cost_models/<target key>/records-<N>.tar``
(MetaSchedule's `XGBModel.save` format; N = the target's stored records when it was trained),
written atomically; the newest is used, and a worker retrains when enough new records arrived
since (`REFRESH_FRACTION`). The worker shares them between hosts through the artifact store
(`service.worker.cost_model_files`); this module knows only the folder. The records are read
through `tuning.search.storage.SearchStorage`.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from tuning.checks.trace_gate import check_trace_text
from tuning.hardware.bf16 import register_named_intrinsics
from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.ir import load_mod
from tuning.search.storage import SearchStorage, TrainingRecord

log = logging.getLogger("tunehub.cost_model")

MIN_RECORDS = 32  # below this a transferred model is noise
REFRESH_FRACTION = 0.2  # retrain once the store holds 20% more records than the newest model
MAX_RECORDS_PER_WORKLOAD = 512  # the fastest ones; keeps training time bounded
_NAME = re.compile(r"records-(\d+)\.tar")


def model_dir(artifact_dir: Path, target_key: str) -> Path:
    """Where a target's cost models live."""
    return artifact_dir / "cost_models" / target_key


def trained_on(path: Path) -> int | None:
    """How many records the model file ``path`` was trained on, from its name
    (``records-<N>.tar``); None for a file that is no saved model."""
    named = _NAME.fullmatch(path.name)
    return int(named.group(1)) if named else None


def newest_model(artifact_dir: Path, target_key: str) -> tuple[Path, int] | None:
    """The newest saved model of a target and how many records it was trained on."""
    folder = model_dir(artifact_dir, target_key)
    found = [
        (records, path)
        for path in (folder.iterdir() if folder.is_dir() else [])
        if (records := trained_on(path)) is not None
    ]
    if not found:
        return None
    records, path = max(found)
    return path, records


def train(storage: SearchStorage, target: Any, num_cores: int) -> tuple[Any, int]:
    """An `XGBModel` trained on the verified records of the storage's target (every workload),
    ``target`` being that target as a `tvm.target.Target`; returns it and the number of records
    it saw."""
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.runner import RunnerResult
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate
    from tvm.s_tir.schedule import Schedule, Trace
    from tvm.tirx import FloatImm

    load_tensor_intrinsics([dict(target.export())])
    model = XGBModel(num_tuning_cores=num_cores, adaptive_training=False)
    by_workload: dict[int, list[TrainingRecord]] = {}
    for row in storage.training_records():
        by_workload.setdefault(row.workload_id, []).append(row)
    seen = 0
    for workload_id, rows in by_workload.items():
        mod = load_mod(storage.module_json(workload_id))
        context = TuneContext(mod=mod, target=target, task_name="main")
        args_info = ArgInfo.from_prim_func(mod["main"])
        ok = sorted(
            (r for r in rows if r.mean_run_us is not None), key=lambda r: r.mean_run_us or 0.0
        )
        candidates, results = [], []
        for row in ok[:MAX_RECORDS_PER_WORKLOAD]:
            sch = Schedule(mod)
            try:
                trace = check_trace_text(row.trace_json)
                register_named_intrinsics(row.trace_json)  # tunehub's own it may name
                Trace.apply_json_to_schedule(trace, sch)
            except Exception:  # noqa: BLE001 - a trace refused or not replayed teaches nothing
                continue
            candidates.append(MeasureCandidate(sch, args_info))
            results.append(RunnerResult([FloatImm("float32", s) for s in row.run_secs], None))
        if candidates:
            model.update(context, candidates, results)
            seen += len(candidates)
    return model, seen


def refresh(
    storage: SearchStorage, target_key: str, target: Any, artifact_dir: Path, cores: int
) -> Path | None:
    """The current model file of the storage's target (``target_key`` names its folder): the
    newest one, retrained first when the storage holds `REFRESH_FRACTION` more records than it
    saw. None while the target has too few records."""
    stored = storage.record_count()
    newest = newest_model(artifact_dir, target_key)
    if newest is not None and stored < newest[1] * (1 + REFRESH_FRACTION):
        return newest[0]
    if stored < MIN_RECORDS:
        return newest[0] if newest else None
    model, seen = train(storage, target, cores)
    if seen < MIN_RECORDS:
        return newest[0] if newest else None
    folder = model_dir(artifact_dir, target_key)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, suffix=".partial")
    os.close(handle)
    model.save(temp)
    final = folder / f"records-{stored}.tar"  # named by the store's count it was refreshed at
    os.replace(temp, final)
    log.info("cost model for %s retrained on %d of %d records: %s", target_key, seen, stored,
             final)  # fmt: skip
    return final

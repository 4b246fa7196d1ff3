"""Test data: a published schedule written through the store, as a worker would leave it."""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from datetime import timedelta
from pathlib import Path

from schedules_db.store import Store
from schedules_db.values import NewRecord, NewSchedule

TVM_VERSION = "0.27.0"


@functools.cache
def artifact_blob(operator: str, size: int) -> bytes:
    """The artifact `publish` stores for ``operator`` at ``size``: a real kernel library
    (B = A * size over 4 floats), one per key, that passes the check every client runs before
    it loads a download (`tuning.checks.library_check`)."""
    import tvm
    from tvm import te

    from tuning.checks.library_check import export_library

    a = te.placeholder((4,), "float32", name="A")
    b = te.compute((4,), lambda i: a[i] * float(size), name=f"B_{operator}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lib.so"
        export_library(tvm.compile(te.create_prim_func([a, b]), target="llvm"), path)
        return path.read_bytes()


def publish(
    store: Store,
    operator: str,
    size: int,
    artifact_dir: Path | None = None,
    shash: str | None = None,
) -> tuple[int, int]:
    """A succeeded job and its schedule for ``operator`` at (size, size, size) on a fixed llvm
    target, with a trace, TIR and (in ``artifact_dir``) an artifact file; (schedule, job) ids.
    ``shash``: the workload's structural hash (default ``operator-size``, not a real one)."""
    target = store.catalog.get_or_create_target(
        {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}, "llvm", "znver4-2c", {"cpu": "test"}
    )
    params = {"M": size, "N": size, "K": size}
    workload = store.catalog.get_or_create_workload(
        shash or f"{operator}-{size}", "{}", operator, params, 2.0 * size**3
    )
    job = store.jobs.create(workload.id, target.id, 16, "q", "tester")
    assert store.jobs.claim(job.id, "w", timedelta(seconds=60))
    trace = json.dumps([[["GetSBlock", [], ["C", "main"], ["b0"]]], [[0, [4, 8]]]], indent=1)
    store.records.add(
        workload.id, target.id, job.id, NewRecord(trace, [5e-6] * 3, [], TVM_VERSION, failed=False)
    )
    record = store.records.top_k(workload.id, target.id, 1)[0]
    blob = artifact_blob(operator, size)
    sha = hashlib.sha256(blob).hexdigest()
    if artifact_dir is not None:
        (artifact_dir / sha[:2]).mkdir(parents=True, exist_ok=True)
        (artifact_dir / sha[:2] / f"{sha}.so").write_bytes(blob)
    schedule = NewSchedule(
        record.id, 5.0, 40.0, 1e-6, f"# TIR of {operator} {size}\n", sha, len(blob),
        f"{sha[:2]}/{sha}.so",
    )  # fmt: skip
    schedule_id = store.schedules.publish(job.id, "w", schedule)
    assert schedule_id is not None
    return schedule_id, job.id

"""Rows the store tests build on: a (workload, target) pair, measured records, a schedule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from schedules_db.store import Store
from schedules_db.values import NewRecord, NewSchedule

STALE = timedelta(seconds=60)
TVM_VERSION = "0.27.0"


def target(store: Store, mcpu: str = "x") -> int:
    """The id of an llvm target for ``mcpu`` (labelled ``mcpu``)."""
    return store.catalog.get_or_create_target({"kind": "llvm", "mcpu": mcpu}, "llvm", mcpu, {}).id


def pair(store: Store, canonical: dict[str, Any] | None = None) -> tuple[int, int]:
    """(workload id, target id) of a catalog matmul on an llvm target."""
    found = store.catalog.get_or_create_target(
        canonical or {"kind": "llvm", "mcpu": "x"}, "llvm", "x", {}
    )
    workload = store.catalog.get_or_create_workload("42", "{}", "matmul", {"M": 1}, 2.0e6)
    return workload.id, found.id


def record(
    run_us: float | None, trace: str, version: str = TVM_VERSION, unverified: bool = False
) -> NewRecord:
    """A measured candidate of ``run_us`` microseconds (None: it failed, MetaSchedule's
    ``[1e10]``)."""
    secs = [1e10] if run_us is None else [run_us * 1e-6] * 3
    return NewRecord(trace, secs, [], version, unverified=unverified, failed=run_us is None)


def schedule(record_id: int | None, latency_us: float, sha: str = "a" * 64) -> NewSchedule:
    """A verified best of ``record_id`` with an artifact named by ``sha``."""
    return NewSchedule(
        record_id=record_id,
        latency_us=latency_us,
        untuned_latency_us=1000.0,
        max_abs_error=1e-6,
        tir="# tir",
        artifact_sha256=sha,
        artifact_size=10,
        artifact_path=f"{sha[:2]}/{sha}.so",
        tvm_series="0.27",
    )

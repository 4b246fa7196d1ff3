"""One job's view of the store: what it reads once, at the start (`load_inputs`), and what it
writes as the job's owner, each through a named step (`OwnedJob`).

The search and the verification read nothing else of the job from the store; MetaSchedule
itself reads and writes records through the `Database` over the store (`store_database`), and
a warm start reads neighbours through `search_storage`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from schedules_db.store import Store
from schedules_db.values import USER, Job, NewSchedule, Target, Workload
from tuning.catalog import get_operator
from tuning.catalog.dtypes import BFLOAT16
from tuning.catalog.workload import catalog_workload
from tuning.checks.tir_checks import check_user_function
from tuning.hardware.roofline import roofline_us
from tuning.ir import bytes_moved, load_mod
from tuning.untrusted.user_tir import check_stored

log = logging.getLogger("tunehub.worker")


@dataclass(frozen=True)
class JobInputs:
    """Everything a job starts from, read once after its claim."""

    job: Job
    workload: Workload
    target: Target
    canonical: dict[str, Any]  # the target's canonical TVM JSON
    mod: Any  # the workload's IRModule, checked (`checked_module`)
    stored_in_space: int  # records of (workload, target) in the job's space: counted as done
    new_on_target: bool  # the workload has no record on this target yet (of any space)
    bytes_moved: int  # what a kernel of the workload must move (`tuning.ir.bytes_moved`)

    @property
    def roofline_us(self) -> float | None:
        """The least time any kernel of the workload can take on the target, from the figures
        its workers measured (`tuning.hardware.roofline`); None before any was measured."""
        bf16 = self.workload.params.get("dtype") == BFLOAT16
        return roofline_us(self.workload.flop, self.bytes_moved, self.target, bf16)


def load_inputs(store: Store, job_id: int) -> JobInputs:
    """The job's inputs: its rows, its checked module, and what is stored for it already.
    The counts are read after the check, which may drop imported records that do not replay."""
    job = store.jobs.get(job_id)
    if job is None:
        raise LookupError(f"no job with id {job_id}")
    workload = store.catalog.get_workload(job.workload_id)
    target = store.catalog.get_target(job.target_id)
    if workload is None or target is None:
        raise LookupError(f"job {job_id}: its workload or target is gone")
    mod = checked_module(store, workload, target.id)
    nbytes = bytes_moved(mod["main"])
    if workload.bytes_moved is None:
        store.catalog.set_bytes_moved(workload.id, nbytes)
    return JobInputs(
        job=job,
        workload=workload,
        target=target,
        canonical=json.loads(target.canonical_json),
        mod=mod,
        stored_in_space=store.records.count(target.id, workload.id, space=job.space),
        new_on_target=store.records.count(target.id, workload.id) == 0,
        bytes_moved=nbytes,
    )


def checked_module(store: Store, workload: Workload, target_id: int) -> Any:
    """The workload's module. A catalog workload's is built again from the catalog (the
    stored JSON is never loaded; a row whose hash the catalog does not give is refused). A
    user's (raw TIR, imported) is first loaded, checked and its unverified imported traces
    replayed in an isolated child, so a crafted document kills that child, not this worker;
    traces that do not replay are dropped from the store. Then it is loaded here and checked
    again before anything builds it."""
    if workload.origin != USER:
        op = get_operator(workload.operator or "")
        if op is None:
            raise ValueError(
                f"the stored catalog workload's operator {workload.operator!r} is gone"
            )
        spec = catalog_workload(op.name, op.Params.model_validate(workload.params))
        if spec.shash != workload.shash:
            raise ValueError("the stored catalog workload is not what the catalog builds")
        return spec.mod
    imported = [row for row in store.records.list_records(target_id, workload.id) if row.unverified]
    bad = check_stored(
        workload.mod_json, workload.shash, [json.loads(row.trace_json) for row in imported]
    )
    if bad:
        dropped = store.records.drop_unverified([imported[i].id for i in bad])
        log.warning(
            "workload %s: dropping %d imported record(s) that do not replay", workload.id, dropped
        )
    mod = load_mod(workload.mod_json)
    check_user_function(mod["main"])
    return mod


class LostOwnership(Exception):
    """The job was reclaimed by another worker (this one stopped heart-beating for too long)."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} was reclaimed by another worker")


class OwnedJob:
    """The writes of the worker that owns a running job. The store ignores a write of a worker
    that lost the job; `report_progress` and `publish` then raise `LostOwnership`."""

    def __init__(self, store: Store, job_id: int, worker: str) -> None:
        self.store, self.job_id, self.worker = store, job_id, worker

    def report_progress(self, trials_done: int, best_us: float | None) -> None:
        """Write progress (with a heartbeat)."""
        if not self.store.jobs.update_progress(self.job_id, self.worker, trials_done, best_us):
            raise LostOwnership(self.job_id)

    def cancel_requested(self) -> bool:
        """True once someone asked to cancel the job."""
        return self.store.jobs.cancel_was_requested(self.job_id)

    def started_from_cost_model(self, name: str) -> None:
        """Record the transferred cost model the search starts from."""
        self.store.jobs.set_cost_model(self.job_id, self.worker, name)

    def stage_took(self, stage: str, seconds: float) -> None:
        """Record how long a completed stage ("search", "verification") took, for the metrics;
        a store error is logged, never the job's."""
        try:
            self.store.jobs.record_stage(self.job_id, stage, seconds)
        except Exception:  # noqa: BLE001 - a metric is not worth a job
            log.warning("job %s: could not record its %s time", self.job_id, stage, exc_info=True)

    def publish(self, new: NewSchedule) -> int:
        """Publish the verified best and mark the job succeeded; its schedule id (nothing is
        written when the job was lost)."""
        schedule_id = self.store.schedules.publish(self.job_id, self.worker, new)
        if schedule_id is None:
            raise LostOwnership(self.job_id)
        return schedule_id

    def cancelled(self) -> None:
        """The search stopped on request: the job is cancelled (its records stay)."""
        self.store.jobs.cancel_running(self.job_id, self.worker)

    def failed(self, error: str) -> None:
        """The job failed with this readable error."""
        self.store.jobs.fail(self.job_id, self.worker, error)

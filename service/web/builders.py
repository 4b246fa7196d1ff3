"""The JSON of jobs, schedules, targets and workloads, built from the store's values
(`schedules_db.values`).

The builders return plain dicts so that the hot read routes can serialise them with
`service.web.fast_json` alone. Each is typed with the `service.web.responses` TypedDict that
declares its shape, the one declaration of it: mypy checks every key and value a builder writes,
and FastAPI documents the same type.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import overload

from schedules_db.values import (
    Artifact,
    Job,
    Record,
    RecordTrace,
    Schedule,
    ScheduleInfo,
    Target,
    WorkloadInfo,
)
from service.web.responses import (
    JobOut,
    ScheduleDetail,
    ScheduleOut,
    TargetBandwidth,
    TargetOut,
    WorkloadOut,
)
from tuning.hardware.roofline import Bandwidth, roofline_us, share_of_roofline


@overload
def iso(value: datetime) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: datetime | None) -> str | None: ...
def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC (SQLite hands back naive datetimes; they are UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


def gflops(flop: float, latency_us: float | None) -> float | None:
    """GFLOP/s of a kernel doing ``flop`` in ``latency_us``."""
    if not latency_us or not flop:
        return None
    return flop / (latency_us * 1e-6) / 1e9


def target_json(target: Target) -> TargetOut:
    """A target as the API shows it (`service.web.responses.TargetOut`)."""
    return {
        "key": target.key,
        "label": target.label,
        "kind": target.kind,
        "canonical": json.loads(target.canonical_json),
        "fingerprint": target.fingerprint,
        "peak_gflops": target.peak_gflops,
        "bandwidth": bandwidth_json(Bandwidth.of(target)),
    }


def bandwidth_json(bandwidth: Bandwidth | None) -> TargetBandwidth | None:
    """A target's measured bandwidth (`service.web.responses.TargetBandwidth`), or None."""
    if bandwidth is None:
        return None
    return {
        "cache_gbps": bandwidth.cache_gbps,
        "memory_gbps": bandwidth.memory_gbps,
        "cache_bytes": bandwidth.cache_bytes,
        "llc_gbps": bandwidth.llc_gbps,
        "llc_bytes": bandwidth.llc_bytes,
    }


def workload_json(workload: WorkloadInfo) -> WorkloadOut:
    """A workload as the API shows it (`service.web.responses.WorkloadOut`)."""
    return {
        "id": workload.id,
        "structural_hash": workload.shash,
        "operator": workload.operator,
        "params": workload.params,
        "flop": workload.flop,
        "bytes_moved": workload.bytes_moved,
    }


def job_json(job: Job, workload: WorkloadInfo, target: Target) -> JobOut:
    """A job as the API shows it (`service.web.responses.JobOut`); ``waiting_for`` is None here
    (`service.api.views.job_view` fills it in for a queued job)."""
    return {
        "id": job.id,
        "state": job.state,
        "operator": {"name": workload.operator, "params": workload.params},
        "workload": workload_json(workload),
        "target": target_json(target),
        "trials": job.trials,
        "queue": job.queue,
        "progress": {
            "trials_done": job.trials_done,
            "best_latency_us": job.best_latency_us,
            "best_gflops": gflops(workload.flop, job.best_latency_us),
        },
        "cache_hit": job.cache_hit,
        "schedule_id": job.schedule_id,
        "attempt": job.attempt,
        "worker": job.worker,
        "cancel_requested": job.cancel_requested,
        "error": job.error,
        "submitted_by": job.submitted_by,
        "priority": job.priority,
        "transfer_cost_model": job.transfer_cost_model,
        "cost_model": job.cost_model,
        "space": job.space,
        "waiting_for": None,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "heartbeat_at": iso(job.heartbeat_at),
    }


def schedule_json(
    schedule: ScheduleInfo,
    workload: WorkloadInfo,
    target: Target,
    artifact: Artifact,
    record: RecordTrace | Record | None = None,
) -> ScheduleOut:
    """A schedule as lists show it (`service.web.responses.ScheduleOut`); ``tvm_version`` is the
    ``record``'s (None without one)."""
    return {
        "id": schedule.id,
        "workload": workload_json(workload),
        "target": target_json(target),
        "latency_us": schedule.latency_us,
        "latency_spread": schedule.latency_spread,
        "untuned_latency_us": schedule.untuned_latency_us,
        "gflops": gflops(workload.flop, schedule.latency_us),
        "roofline_us": (roof := roofline_us(workload.flop, workload.bytes_moved, target)),
        "of_roofline": share_of_roofline(schedule.latency_us * 1e-6, roof and roof * 1e-6),
        "speedup_vs_untuned": schedule.untuned_latency_us / schedule.latency_us,
        "trials": schedule.trials,
        "max_abs_error": schedule.max_abs_error,
        "record_id": schedule.record_id,
        # True when no tuned candidate beat the plain (unscheduled) function: it is served.
        "plain_function": schedule.record_id is None,
        "tvm_version": record.tvm_version if record else None,
        # The space that found it, and how to call its artifact: with packed_params, call each
        # pack function once on that weight, then "entry" per inference ("main" also works with
        # the weights as they are, packing inside every call).
        "space": schedule.space,
        "packed_params": schedule.packed_params or [],
        "entry": "main_packed" if schedule.packed_params else "main",
        # What the schedule is keyed by: it is only ever served for this exact triple.
        "key": {
            "workload": workload.shash,
            "target": target.key,
            "tvm_series": schedule.tvm_series,
        },
        "job_id": schedule.job_id,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
        "artifact": {
            "sha256": artifact.sha256,
            "size": artifact.size,
            "kind": artifact.kind,
            "url": f"/api/v1/schedules/{schedule.id}/artifact",
        },
    }


def schedule_detail_json(
    schedule: Schedule,
    workload: WorkloadInfo,
    target: Target,
    artifact: Artifact,
    record: RecordTrace | Record | None,
) -> ScheduleDetail:
    """One schedule (`service.web.responses.ScheduleDetail`): `schedule_json` with the record's
    trace (``[[], []]`` without a record) and the scheduled TIR. ``GET /schedules/{id}`` writes
    the same JSON without parsing the trace (`service.api.views.schedule_detail_bytes`)."""
    return {
        **schedule_json(schedule, workload, target, artifact, record),
        "trace": json.loads(record.trace_json) if record else [[], []],
        "tir": schedule.tir,
    }

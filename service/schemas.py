"""Request bodies and the JSON shapes of jobs, schedules and targets."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schedules_db.models import JobRow, ScheduleRow, TargetRow, WorkloadRow
from tuning.sandbox.user_tir import MAX_SOURCE_BYTES

# Path and query ids: the store's id columns are INTEGER, 32-bit on PostgreSQL (which refuses
# to compare one with 2^31: a 500) and 64-bit on SQLite (which cannot bind 2^63), so an id
# outside 1..2^31-1 is a 422, never a 500.
MAX_ROW_ID = 2**31 - 1
RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID, description="a row id, 1 to 2^31-1")]


class OperatorSpec(BaseModel):
    """A catalog operator and its parameters."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


class TirSpec(BaseModel):
    """A raw TIR function: TVMScript text or TVM JSON (`tvm.ir.save_json`)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["tvmscript", "json"]
    source: str = Field(min_length=1, max_length=MAX_SOURCE_BYTES)


# A small raw TIR job body's source (the OpenAPI example of POST /jobs).
TIR_EXAMPLE = """@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                v_i = T.axis.spatial(16, i)
                B[v_i] = A[v_i] * T.float32(2.0)
"""


class JobCreate(BaseModel):
    """Body of ``POST /api/v1/jobs``: a catalog ``operator`` or a raw ``tir`` function."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "operator": {"name": "matmul", "params": {"M": 64, "N": 64, "K": 64}},
                    "target": "host",
                    "trials": 16,
                },
                {"tir": {"format": "tvmscript", "source": TIR_EXAMPLE}, "trials": 16},
            ]
        },
    )
    operator: OperatorSpec | None = None
    tir: TirSpec | None = None
    target: str | dict[str, Any] = Field(
        default="host", description='"host", or a TVM target as a JSON object'
    )
    trials: Annotated[int, Field(strict=True, ge=1)]
    submitted_by: str | None = Field(
        default=None,
        max_length=255,
        description="ignored (kept for old clients): a job's submitter is the caller's identity",
    )
    priority: Annotated[int, Field(strict=True, ge=-100, le=100)] = Field(
        default=0, description="higher runs first on its target; equal priorities share fairly"
    )
    transfer_cost_model: bool = Field(
        default=True,
        description="start from the target's cost model trained on all its stored records",
    )
    space: Literal["auto", "plain", "packed"] = Field(
        default="auto",
        description=(
            "search space: 'plain' (MetaSchedule's default), 'packed' (CPU: weights in a packed "
            "layout chosen by the search, register tiles one vector wide), 'auto' = packed where "
            "the operator has a weight and the target is a CPU, else plain"
        ),
    )

    @model_validator(mode="after")
    def _one_workload(self) -> JobCreate:
        if (self.operator is None) == (self.tir is None):
            raise ValueError("give exactly one of 'operator' (a catalog name) and 'tir'")
        return self


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


def target_json(row: TargetRow) -> dict[str, Any]:
    """A target as the API shows it."""
    return {
        "key": row.key,
        "label": row.label,
        "kind": row.kind,
        "canonical": json.loads(row.canonical_json),
        "fingerprint": row.fingerprint,
    }


def workload_json(row: WorkloadRow) -> dict[str, Any]:
    """A workload as the API shows it."""
    return {
        "id": row.id,
        "structural_hash": row.shash,
        "operator": row.operator,
        "params": row.params,
        "flop": row.flop,
    }


def job_json(job: JobRow, workload: WorkloadRow, target: TargetRow) -> dict[str, Any]:
    """A job as the API shows it."""
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
    row: ScheduleRow,
    workload: WorkloadRow,
    target: TargetRow,
    artifact: Any,
    record: Any,
    detail: bool,
) -> dict[str, Any]:
    """A schedule as the API shows it; ``detail`` adds the trace and the scheduled TIR."""
    body = {
        "id": row.id,
        "workload": workload_json(workload),
        "target": target_json(target),
        "latency_us": row.latency_us,
        "untuned_latency_us": row.untuned_latency_us,
        "gflops": gflops(workload.flop, row.latency_us),
        "speedup_vs_untuned": row.untuned_latency_us / row.latency_us,
        "trials": row.trials,
        "max_abs_error": row.max_abs_error,
        "record_id": row.record_id,
        # True when no tuned candidate beat the plain (unscheduled) function: it is served.
        "plain_function": row.record_id is None,
        "tvm_version": record.tvm_version if record else None,
        # The space that found it, and how to call its artifact: with packed_params, call each
        # pack function once on that weight, then "entry" per inference ("main" also works with
        # the weights as they are, packing inside every call).
        "space": row.space,
        "packed_params": row.packed_params or [],
        "entry": "main_packed" if row.packed_params else "main",
        # What the schedule is keyed by: it is only ever served for this exact triple.
        "key": {"workload": workload.shash, "target": target.key, "tvm_series": row.tvm_series},
        "job_id": row.job_id,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "artifact": {
            "sha256": artifact.sha256,
            "size": artifact.size,
            "kind": artifact.kind,
            "url": f"/api/v1/schedules/{row.id}/artifact",
        },
    }
    if detail:
        body["trace"] = json.loads(record.trace_json) if record else [[], []]
        body["tir"] = row.tir
    return body

"""Targets, workloads and the operator catalog (``/targets``, ``/workloads``, ``/operators``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict

from schedules_db.values import Target, WorkloadInfo
from tuning.hardware.roofline import Bandwidth


class TargetBandwidth(TypedDict):
    """GB/s a streaming kernel reached on a target's cores: in their own caches (at most
    ``cache_bytes`` moved in all), in the shared last-level cache (at most ``llc_bytes``; null
    where the machine has none) and in memory."""

    cache_gbps: float
    memory_gbps: float
    cache_bytes: int
    llc_gbps: float | None
    llc_bytes: int | None


class TargetBf16Peak(TypedDict):
    """The bf16 peak of a target's fastest bf16 unit: ``amx`` (AMX-BF16 tiles) or
    ``avx512_bf16`` (vdpbf16ps), in GFLOPS, with the other work its cores saw meanwhile (cores'
    worth; above 0.1 it was measured under load and is not trusted)."""

    unit: str
    gflops: float
    interference: float | None


class TargetOut(TypedDict):
    """A target: its key (hash of the canonical JSON), label, kind and the hosts' fingerprint."""

    key: str
    label: str
    kind: str
    canonical: Annotated[dict[str, Any], Field(description="the canonical TVM target JSON")]
    fingerprint: dict[str, Any]
    peak_gflops: Annotated[
        float | None,
        Field(description="the fp32 FMA peak its worker measured at start (null: none measured)"),
    ]
    bandwidth: Annotated[
        TargetBandwidth | None,
        Field(description="the bandwidth its worker measured at start (null: none measured)"),
    ]
    peak_interference: Annotated[
        float | None,
        Field(
            description="the other work (cores' worth, beyond the CPUs the measurement left"
            " free) its cores saw while the peak was measured (null: not known); above 0.1 it"
            " was measured under load: it is shown but no roofline or share of peak is derived"
            " from it, and its workers measure it again"
        ),
    ]
    bandwidth_interference: Annotated[
        float | None,
        Field(description="the same for the bandwidth"),
    ]
    bf16_peak: Annotated[
        TargetBf16Peak | None,
        Field(
            description="the peak of its fastest bf16 unit (bf16 products summed in fp32), as"
            " its worker measured it (null: the target has no bf16 unit, or none measured yet);"
            " a bf16 kernel's share of peak is against it, never against the fp32 peak"
        ),
    ]


class ServedTarget(TargetOut):
    """A target of ``GET /targets``, with whether a live worker serves it."""

    served: bool


class HostTarget(TypedDict):
    """The target "host" resolves to on the API's machine."""

    canonical: dict[str, Any]
    label: str


class TargetsOut(TypedDict):
    """``GET /targets``."""

    host: HostTarget
    targets: list[ServedTarget]


class TargetRef(TypedDict):
    """A target by id, label and key."""

    id: int
    label: str
    key: str


class WorkloadOut(TypedDict):
    """A workload: a catalog operator with parameters, or raw TIR (``operator`` null)."""

    id: int
    structural_hash: str
    operator: str | None
    params: dict[str, Any]
    flop: float
    bytes_moved: Annotated[
        int | None,
        Field(
            description="what a kernel must read and write at the least: its parameters, each once "
            "(null until a worker loaded the workload)"
        ),
    ]


class JobExample(TypedDict):
    """A job body for an operator (``POST /jobs``)."""

    operator: JobOperator
    target: str
    trials: int


class OperatorOut(TypedDict):
    """A catalog operator: parameter schema, dtypes and an example job body."""

    name: str
    description: str
    params_schema: Annotated[
        dict[str, Any], Field(description="JSON schema of the operator's params")
    ]
    dtypes: list[str]
    tolerance: str
    example: JobExample


class JobOperator(TypedDict):
    """The operator of a job's workload (both null/empty for raw TIR)."""

    name: str | None
    params: dict[str, Any]


def target_json(target: Target) -> TargetOut:
    """A target as the API shows it (`TargetOut`)."""
    return {
        "key": target.key,
        "label": target.label,
        "kind": target.kind,
        "canonical": json.loads(target.canonical_json),
        "fingerprint": target.fingerprint,
        "peak_gflops": target.peak_gflops,
        "bandwidth": bandwidth_json(Bandwidth.of(target)),
        "peak_interference": target.peak_interference,
        "bandwidth_interference": target.bandwidth_interference,
        "bf16_peak": bf16_peak_json(target),
    }


def bf16_peak_json(target: Target) -> TargetBf16Peak | None:
    """A target's measured bf16 peak (`TargetBf16Peak`), or None."""
    if target.bf16_unit is None or target.bf16_peak_gflops is None:
        return None
    return {
        "unit": target.bf16_unit,
        "gflops": target.bf16_peak_gflops,
        "interference": target.bf16_interference,
    }


def bandwidth_json(bandwidth: Bandwidth | None) -> TargetBandwidth | None:
    """A target's measured bandwidth (`TargetBandwidth`), or None."""
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
    """A workload as the API shows it (`WorkloadOut`)."""
    return {
        "id": workload.id,
        "structural_hash": workload.shash,
        "operator": workload.operator,
        "params": workload.params,
        "flop": workload.flop,
        "bytes_moved": workload.bytes_moved,
    }

"""The response bodies of the API, each declared once, as a TypedDict: the builders that write
them (`service.web.builders`, `service.api.views`, the use cases) return these types, so mypy
checks every key and value they write, and ``/openapi.json`` documents the same types (pydantic
reads a TypedDict as it reads a model).

Each declares its keys in the order the route answers them, so FastAPI's validation and
serialisation keep every key, its order and its value (tests/service/test_response_schemas.py
runs the builders' output through them). Two conventions keep values as the builders write
them:

* timestamps stay the strings `service.web.builders.iso` writes (`Timestamp`: documented as
  ``date-time``; a ``datetime`` field would re-format them);
* a setting that may be an integer or a float is a `Number` (a ``float`` field would turn ``0``
  into ``0.0``).

The hot read routes (``GET /jobs/{id}``, ``GET /schedules``, ``GET /schedules/{id}``) answer
pre-serialised JSON (`service.web.fast_json`): their types document them, FastAPI does not
re-validate a returned `Response`. A key only some answers carry is `NotRequired`.

One module per resource; every type is importable from this package."""

from __future__ import annotations

from service.web.responses.catalog import (
    HostTarget,
    JobExample,
    JobOperator,
    OperatorOut,
    ServedTarget,
    TargetBandwidth,
    TargetOut,
    TargetRef,
    TargetsOut,
    WorkloadOut,
)
from service.web.responses.common import JobStateName, Number, Timestamp
from service.web.responses.fleet import Health, Limits, MeOut, WorkerOut
from service.web.responses.interchange import (
    ExportOut,
    ExportTarget,
    ImportedJob,
    ImportOut,
    ImportTarget,
)
from service.web.responses.jobs import JobOut, JobProgress
from service.web.responses.lookups import (
    LookupOut,
    LookupTargetOut,
    ScheduleKeyOut,
    TaskUploadOut,
    TunedRecordOut,
    TunedScheduleOut,
    UploadedTaskOut,
)
from service.web.responses.model_jobs import (
    ModelFormat,
    ModelInputOut,
    ModelOut,
    ModelOutputOut,
    ModelProgress,
    ModelResult,
    ModelState,
    ModelTaskJob,
    ModelTaskOut,
)
from service.web.responses.schedules import (
    ArtifactRef,
    CurvePointOut,
    ScheduleDetail,
    ScheduleKey,
    ScheduleOut,
    WorkloadDetail,
    WorkloadTarget,
)

__all__ = [
    "Timestamp",
    "Number",
    "JobStateName",
    "TargetBandwidth",
    "TargetOut",
    "ServedTarget",
    "HostTarget",
    "TargetsOut",
    "TargetRef",
    "WorkloadOut",
    "JobExample",
    "OperatorOut",
    "JobOperator",
    "JobProgress",
    "JobOut",
    "ScheduleKey",
    "ArtifactRef",
    "ScheduleOut",
    "ScheduleDetail",
    "CurvePointOut",
    "WorkloadTarget",
    "WorkloadDetail",
    "WorkerOut",
    "Limits",
    "MeOut",
    "Health",
    "ExportTarget",
    "ExportOut",
    "ImportTarget",
    "ImportedJob",
    "ImportOut",
    "ScheduleKeyOut",
    "TunedRecordOut",
    "TunedScheduleOut",
    "LookupTargetOut",
    "LookupOut",
    "UploadedTaskOut",
    "TaskUploadOut",
    "ModelInputOut",
    "ModelOutputOut",
    "ModelProgress",
    "ModelResult",
    "ModelTaskJob",
    "ModelTaskOut",
    "ModelFormat",
    "ModelState",
    "ModelOut",
]

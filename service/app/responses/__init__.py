"""The response bodies of the API, one module per resource: each declared once, as a TypedDict,
with the pure builders that write it beside it (values of the store in, the type out), so mypy
checks every key and value they write, and ``/openapi.json`` documents the same types (pydantic
reads a TypedDict as it reads a model). The reads behind them are `service.app.views`'.

Each declares its keys in the order the route answers them, so FastAPI's validation and
serialisation keep every key, its order and its value (tests/service/test_response_schemas.py
runs the builders' output through them). Two conventions keep values as the builders write
them:

* timestamps stay the strings `service.app.responses.common.iso` writes (`Timestamp`:
  documented as ``date-time``; a ``datetime`` field would re-format them);
* a setting that may be an integer or a float is a `Number` (a ``float`` field would turn ``0``
  into ``0.0``).

The hot read routes (``GET /jobs/{id}``, ``GET /schedules``, ``GET /schedules/{id}``) answer
pre-serialised JSON (`service.web.fast_json`): their types document them, FastAPI does not
re-validate a returned `Response`. A key only some answers carry is `NotRequired`.

Every type is importable from this package; the modules of the package import one another by
module, never from here."""

from __future__ import annotations

from service.app.responses.catalog import (
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
from service.app.responses.common import JobStateName, Number, Timestamp
from service.app.responses.fleet import Health, Limits, MeOut, WorkerOut
from service.app.responses.interchange import (
    ExportOut,
    ExportTarget,
    ImportedJob,
    ImportOut,
    ImportTarget,
)
from service.app.responses.jobs import JobOut, JobProgress
from service.app.responses.lookups import (
    LookupOut,
    LookupTargetOut,
    ScheduleKeyOut,
    TaskUploadOut,
    TunedRecordOut,
    TunedScheduleOut,
    UploadedTaskOut,
)
from service.app.responses.model_jobs import (
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
from service.app.responses.schedules import (
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

"""SQLAlchemy 2 models of the tunehub store (see the `Store` docstring for the contract), one
module per part of it; every table is importable from here, and importing this package puts
every table in ``Base.metadata`` (what the migrations are checked against)."""

from schedules_db.tables.base import Base, utcnow
from schedules_db.tables.blobs import BlobChunkRow, BlobRow, CostModelRow
from schedules_db.tables.deployment import (
    ApiTokenRow,
    ArtifactReaderRow,
    DashboardSessionRow,
    LeaseRow,
    WorkerRow,
)
from schedules_db.tables.models import ModelRow, ModelTaskRow, NeighbourAnswerRow
from schedules_db.tables.tuning import (
    ArtifactRow,
    JobRow,
    JobStageRow,
    ScheduleRow,
    TargetRow,
    TuningRecordRow,
    WorkloadRow,
)

__all__ = [
    "utcnow",
    "Base",
    "TargetRow",
    "WorkloadRow",
    "JobRow",
    "JobStageRow",
    "TuningRecordRow",
    "ArtifactRow",
    "ScheduleRow",
    "ModelRow",
    "ModelTaskRow",
    "NeighbourAnswerRow",
    "WorkerRow",
    "ApiTokenRow",
    "DashboardSessionRow",
    "LeaseRow",
    "ArtifactReaderRow",
    "BlobRow",
    "BlobChunkRow",
    "CostModelRow",
]

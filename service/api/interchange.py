"""``/api/v1/export`` and ``/api/v1/import``: plain MetaSchedule JSON databases in and out
(`service.app.usecases.export_database`, `service.app.usecases.import_database`)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import LimitsDep, QueueDep, SettingsDep, StoreDep
from service.app.responses.interchange import ExportOut, ImportOut
from service.app.usecases.export_database import export_database as export
from service.app.usecases.import_database import DatabaseImport
from service.app.usecases.import_database import import_database as import_
from service.web.auth import AnyReader, CodeSubmitter
from service.web.errors import responses
from service.web.refusals import ISOLATION_RESPONSES
from service.web.schemas import ImportBody, TargetQuery
from service.web.strict_input import StrictRoute

router = APIRouter(tags=["interchange"], route_class=StrictRoute)


@router.get("/export", response_model=ExportOut, responses=responses(404))
def export_database(
    who: AnyReader,
    store: StoreDep,
    target: TargetQuery,
) -> ExportOut:
    """The target's successful records as the two files of a MetaSchedule JSON database."""
    return export(store, target)


@router.post("/import", status_code=201, response_model=ImportOut, responses=ISOLATION_RESPONSES)
def import_database(
    body: ImportBody,
    who: CodeSubmitter,
    store: StoreDep,
    queue: QueueDep,
    settings: SettingsDep,
    limits: LimitsDep,
) -> ImportOut:
    """Store a JSON database's workloads and records for ``target`` and queue the verification
    of each workload's best. Needs ``submit-code`` (it carries modules and traces). Any bad
    line is a 422 naming the file and line, a workload another identity owns a 403
    ``not_owner``; nothing is written then."""
    request = DatabaseImport(body.target, body.workloads, body.records)
    return import_(store, queue, settings, limits, who, request)

"""``/api/v1/tasks``: the tasks a build found no schedule for, sent to be tuned
(`service.app.usecases.tune_missing`; the light client sends them with ``tune_missing``)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import LimitsDep, QueueDep, SettingsDep, StoreDep
from service.app.responses.lookups import TaskUploadOut, uploaded_task_json
from service.app.usecases.tune_missing import TaskUpload, tune_missing
from service.web.auth import CodeSubmitter
from service.web.refusals import ISOLATION_RESPONSES
from service.web.schemas import TaskUploadBody
from service.web.strict_input import StrictRoute
from tuning.untrusted.user_tasks import TaskSource

router = APIRouter(tags=["lookup"], route_class=StrictRoute)


@router.post("/tasks", response_model=TaskUploadOut, responses=ISOLATION_RESPONSES)
def upload_tasks(
    body: TaskUploadBody,
    who: CodeSubmitter,
    store: StoreDep,
    queue: QueueDep,
    settings: SettingsDep,
    limits: LimitsDep,
) -> TaskUploadOut:
    """Store the tasks a build misses (each its module as TVM JSON, parsed in isolation) and
    have each one without a verified best answered: a neighbour answer with its verifying job
    (at the service's priority), else a tuning job of the caller's. A task with a job under
    way gets no second one. Needs ``submit-code`` (the modules are user code); nothing is
    written when a task is refused (422 at ``tasks``, naming it)."""
    request = TaskUpload(body.target, [TaskSource(t.name, t.module) for t in body.tasks])
    key, label, states = tune_missing(store, queue, settings, limits, who, request)
    return {
        "target": {"key": key, "label": label},
        "tasks": [uploaded_task_json(s) for s in states],
    }

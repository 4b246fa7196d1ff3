"""Tasks a build misses, sent for tuning (``tune_missing``): stored as workloads, answered.

The service knows a model's task only when someone uploads it. A build that found no schedule
for some of its tasks sends them (`service.client.tvm_database.TunehubDatabase` with
``tune_missing``): they are parsed in isolation (`tuning.untrusted.user_tasks`), stored as
workloads exactly as a model job stores its tasks, and each one without a verified best gets
what a lookup with ``allow_neighbour`` would make — a neighbour answer and its verifying job,
at the service's priority — or, with no neighbour to offer, an ordinary tuning job of the
caller's at the default priority and the service's budget (`MISSING_TASK_TRIALS`). A task with
a job under way gets no second one. Nothing is written when the request is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedules_db import Store
from schedules_db.keys import target_key
from schedules_db.reader import SqlScheduleReader
from schedules_db.values import JobState
from service.app.actors import Identity
from service.app.admission import admitted_target, admitting, record_target
from service.app.ports import SubmissionLimits
from service.app.precision import mentions_bf16, require_bf16_unit
from service.app.responses.lookups import TaskState
from service.app.untrusted_input import parsed_tasks
from service.app.usecases.dispatch import dispatch_or_defer
from service.app.usecases.neighbour_answers import answer_missing
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from tuning.models.precision import BFLOAT16
from tuning.search.spaces import resolve_space
from tuning.untrusted.user_tasks import TaskSource

MISSING_TASK_TRIALS = 64  # a sent task's tuning budget (at most the server's max_trials)


@dataclass(frozen=True)
class TaskUpload:
    """The tasks a build sends, each its fused function's name and module, for a target."""

    target: str | dict[str, Any]
    tasks: list[TaskSource]


def tune_missing(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    limits: SubmissionLimits,
    who: Identity,
    request: TaskUpload,
) -> tuple[str, str | None, list[TaskState]]:
    """Store and answer the tasks of ``request`` for ``who``; (target key, label, each task's
    state). Refusals, in order: ``who`` at its cap of active jobs, or without room for a job
    per task without a verified best (429); a target tunehub refuses or no worker registered
    (422); a task too large to parse or that the isolated parser refuses (422 at ``tasks``,
    naming the task; ``missing_cpu_feature`` for a task with bf16 buffers on a target without
    a bf16 unit); ``who`` parsing already or in debt of parse time (429); no free or
    available parser (429/503). Needs ``submit-code`` (the route's)."""
    trials = min(MISSING_TASK_TRIALS, settings.max_trials)
    target = admitted_target(store, settings, who, trials, request.target)
    parsed = parsed_tasks(limits, settings, request.tasks, who.limit_key)
    for index, task in enumerate(parsed):  # a bf16 build's tasks, on a target that lacks it
        if mentions_bf16(task.mod_json):
            require_bf16_unit(target, ("body", "tasks", index), BFLOAT16)
    reader = SqlScheduleReader(store)
    key = target_key(target.canonical)
    tuned = reader.lookup(key, [task.shash for task in parsed])
    untuned = [task for task in parsed if task.shash not in tuned]
    # Under the identity's lock, so two uploads (on any replicas) cannot both take the cap's
    # last places.
    # Every untuned task may need a job of the caller's: room for all of them, or none is made.
    with admitting(store, settings, limits.admissions, who, len(untuned)):
        stored_target = record_target(store, request.target, target)
        workloads = {
            task.shash: store.catalog.get_or_create_workload(
                task.shash, task.mod_json, None, {"task": task.name}, task.flop, owner=who.name
            )
            for task in parsed
        }
        reply = answer_missing(
            store, queue, settings, stored_target, reader.tvm_series, [t.shash for t in untuned]
        )
        states: list[TaskState] = []
        for task in parsed:
            workload = workloads[task.shash]
            if task.shash in tuned:
                states.append(TaskState(task.name, task.shash, "tuned", None))
                continue
            answer = reply.schedules.get(task.shash)
            if answer is not None:
                states.append(TaskState(task.name, task.shash, "neighbour", answer["job_id"]))
                continue
            running = store.jobs.unfinished(workload.id, stored_target.id)
            if running is not None:
                states.append(TaskState(task.name, task.shash, "tuning", running.id))
                continue
            job = store.jobs.create(
                workload.id,
                stored_target.id,
                trials,
                queue_name(stored_target.key),
                who.name,
                space=resolve_space("auto", task.layout_free, target.kind),
                space_must_match=False,
            )
            if job.state == JobState.QUEUED.value:
                dispatch_or_defer(store, queue, job)
            states.append(TaskState(task.name, task.shash, "queued", job.id))
    return stored_target.key, stored_target.label, states

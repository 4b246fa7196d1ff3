"""Tasks a build sends for tuning (`tune_missing`), turned into workloads without trusting them.

A build that misses schedules sends the missing tasks as it hashed them: each the
one-function module MetaSchedule queries, as TVM JSON, with the fused function's name. TVM's
JSON loader crashes on crafted documents, so, as for raw TIR and models, one isolated child
loads and checks them (`tuning.untrusted.model_requests.uploaded_tasks`: every raw-TIR check, the
structural hash, FLOP count and layout-free operands) and a second, fresh child does it again
on the first's answers; the two must agree on every task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuning.jail import holding_slot
from tuning.jail.isolated import MODEL_IMPORT_LIMITS
from tuning.untrusted.user_model import (
    MAX_NAME_CHARS,
    ModelRejected,
    ParsedTask,
    ask_child,
    task_of_answer,
)

MAX_UPLOADED_TASKS = 64  # one request; a build with more missing tasks sends several
MAX_TASK_JSON_BYTES = 1 << 20  # a task's module JSON (ResNet-18's: 35-82 KB)


@dataclass(frozen=True)
class TaskSource:
    """A task as a build sends it: the fused function's name and its module as TVM JSON."""

    name: str
    module: str


def parse_tasks(sources: Sequence[TaskSource]) -> list[ParsedTask]:
    """The checked workloads of ``sources``, in order (weight 1 each), agreed on by two
    isolated children; `ModelRejected` (field "tasks") with the reason, naming the task, and
    `SandboxBusy` / `SandboxUnavailable` let through."""
    if not 1 <= len(sources) <= MAX_UPLOADED_TASKS:
        raise ModelRejected(f"send 1 to {MAX_UPLOADED_TASKS} tasks", "tasks")
    for index, source in enumerate(sources):
        if not (0 < len(source.name) <= MAX_NAME_CHARS and source.name.isprintable()):
            raise ModelRejected(f"task {index}: a name of printable characters", "tasks")
        if len(source.module.encode()) > MAX_TASK_JSON_BYTES:
            raise ModelRejected(f"task {index}: over {MAX_TASK_JSON_BYTES} bytes", "tasks")
    sent = [{"name": s.name, "module": s.module} for s in sources]
    try:
        with holding_slot():  # one slot for both children
            first = _tasks(ask_child("uploaded_tasks", MODEL_IMPORT_LIMITS, tasks=sent), sent)
            again = [{"name": t.name, "module": t.mod_json} for t in first]
            second = _tasks(ask_child("uploaded_tasks", MODEL_IMPORT_LIMITS, tasks=again), sent)
    except ModelRejected as err:
        raise ModelRejected(str(err), "tasks") from None
    if second != first:
        raise ModelRejected("the parser's answer does not re-derive to the same functions", "tasks")
    return first


def _tasks(answer: dict[str, Any], sent: list[dict[str, str]]) -> list[ParsedTask]:
    raw = answer.get("tasks")
    if not (isinstance(raw, list) and len(raw) == len(sent)):
        raise ModelRejected("the isolated parser answered out of protocol")
    tasks = [task_of_answer(item) for item in raw]
    if [t.name for t in tasks] != [s["name"] for s in sent]:
        raise ModelRejected("the isolated parser answered out of protocol")
    return tasks

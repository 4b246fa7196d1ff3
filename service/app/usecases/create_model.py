"""Creating a whole-model job: parse the model in isolation, store its tasks as workloads, give
each task an ordinary tuning job with its share of the budget, record the model, send the jobs.

Why one job per task (and not MetaSchedule's gradient task scheduler in one process): every
guarantee operator jobs have carries over unchanged — a task already tuned on the target is a
cache hit, a task another model shares reuses its records, tasks run on as many workers of the
target as there are, and claims, heartbeats, cancel and crash recovery are the jobs' own. The
budget goes in two rounds instead of MetaSchedule's gradient: half split by work
(`split_budget`), half held back and given, once the first round is measured, to the tasks
furthest from their roofline (`service.worker.model_budget`).

As for jobs, everything is validated before anything is written; a refusal
(`service.app.refusals`, a 4xx) names the field, and the store and artifact store are left as
they were.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedules_db import Store
from schedules_db.blobs import BlobStore
from schedules_db.values import JobState, ModelJob, NewModelTask
from service.app.actors import Identity
from service.app.admission import admitted_target, admitting, check_room, record_target
from service.app.ports import SubmissionLimits
from service.app.precision import require_bf16_unit
from service.app.refusals import InvalidInput
from service.app.untrusted_input import parsed_model
from service.app.usecases.dispatch import dispatch_or_defer, wake_compile_or_defer
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from tuning.models.inputs import ModelInput
from tuning.models.precision import BFLOAT16, FLOAT32
from tuning.search.spaces import resolve_space
from tuning.untrusted.user_model import ParsedModel

SOURCE_SUFFIX = {"onnx": ".onnx", "relax": ".py"}


FIRST_ROUND = 0.5  # of a model's budget, split by work; the rest goes by the measured gaps


def first_round_trials(total: int, tasks: int) -> int:
    """The trials a model's first round splits among its ``tasks`` (`split_budget`): half of
    ``total``, at least one per task; the rest is held back (``reserve_trials``) and goes to the
    tasks furthest from their roofline once the first round is measured
    (`service.worker.model_budget`)."""
    return min(total, max(tasks, round(total * FIRST_ROUND)))


FIRST_BATCH = 8  # trials: the search's smallest batch (`tuning.search.loop.batch_size`)


def split_budget(total: int, sizes: list[float]) -> list[int]:
    """Trials per task for a model budget of ``total`` (at least one per task): every task gets
    an even floor of a quarter of the budget, raised to one search batch (`FIRST_BATCH`) where
    ``total`` has that for every task (at least 1 trial: a task's best must be measured and
    verified); the rest goes by each task's share of the model's work (``sizes``: weight x
    FLOP), largest remainders first. Sums to ``total``.

    The batch floor is for the tasks FLOP undersells: a layer norm or softmax is memory-bound,
    a thousandth of a matmul's work, yet its first candidates run at 10% of its roofline, and
    8 trials take it most of the way (BERT's layer norm: 49 us after 2 trials, 15 after 16)."""
    count = len(sizes)
    if count == 0:
        return []
    floor = max(1, total // (4 * count), min(FIRST_BATCH, total // count))
    rest = max(0, total - floor * count)
    work = sum(sizes)
    exact = [rest * size / work if work > 0 else rest / count for size in sizes]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(count), key=lambda i: exact[i] - shares[i], reverse=True)
    for i in by_remainder[: rest - sum(shares)]:
        shares[i] += 1
    return [floor + share for share in shares]


@dataclass(frozen=True)
class ModelRequest:
    """What a model submission asks for: the model's file (``relax`` text, or ``onnx`` bytes in
    base64), its inputs, the target and the budget."""

    name: str
    format: str
    source: str
    inputs: list[ModelInput]
    target: str | dict[str, Any]
    trials: int
    layout: str = "plain"  # tuning.models.blocked_layout.LAYOUTS
    precision: str = FLOAT32  # tuning.models.precision.PRECISIONS


def create_model(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    blobs: BlobStore,
    limits: SubmissionLimits,
    who: Identity,
    request: ModelRequest,
) -> ModelJob:
    """Record the model ``request`` describes for ``who`` and send its task jobs; returns the
    model as stored (`tuning`; its compile is woken at once when every task is a cache hit).

    Refusals, in order: ``who`` at its cap of active jobs (429); ``trials`` over
    ``settings.max_trials``, a target tunehub refuses or no worker registered (422);
    ``precision`` bfloat16 on a target without a bf16 unit (422 ``missing_cpu_feature``); a source
    that is not base64 (ONNX) or that the isolated parser refuses (422 at ``source`` or
    ``inputs``); no free or available parser (429/503); fewer ``trials`` than tasks (422);
    more tasks than ``who``'s cap leaves room for (429). Needs ``submit-code`` (the route's)."""
    target = admitted_target(store, settings, who, request.trials, request.target)
    if request.precision == BFLOAT16:
        require_bf16_unit(target, ("body", "precision"), BFLOAT16)
    source = _source_bytes(request)
    inputs = request.inputs
    parsed = parsed_model(limits, request.format, source, inputs, target.canonical,
                          who.limit_key, request.layout, request.precision)  # fmt: skip
    if request.trials < len(parsed.tasks):
        raise InvalidInput(
            ("body", "trials"),
            f"the model has {len(parsed.tasks)} tasks: trials must be at least that (one each)",
            "greater_than_equal",
            request.trials,
        )
    # Each task is a job of its own: all of them count against the caller's cap.
    check_room(store, settings, who, len(parsed.tasks))

    stored_target = record_target(store, request.target, target)
    artifact = _store_source(store, blobs, request.format, source)
    queue_of_target = queue_name(stored_target.key)
    sizes = [task.weight * max(task.flop, 1.0) for task in parsed.tasks]
    first_round = first_round_trials(request.trials, len(parsed.tasks))
    # Counted again under the identity's lock: two submissions (on any replicas) cannot both
    # take the cap's last places.
    with admitting(store, settings, limits.admissions, who, len(parsed.tasks)):
        tasks: list[NewModelTask] = []
        jobs = []
        for task, trials in zip(parsed.tasks, split_budget(first_round, sizes), strict=True):
            workload = store.catalog.get_or_create_workload(
                task.shash, task.mod_json, None, {"task": task.name}, task.flop, owner=who.name
            )
            space = resolve_space("auto", tuple(task.layout_free), target.kind)
            job = store.jobs.create(
                workload.id,
                stored_target.id,
                trials,
                queue_of_target,
                who.name,
                space=space,
                space_must_match=False,
            )
            jobs.append(job)
            tasks.append(NewModelTask(task.name, task.weight, workload.id, job.id, trials))
        model = store.models.create(
            name=request.name,
            fmt=request.format,
            layout=request.layout,
            precision=request.precision,
            source_artifact_id=artifact.id,
            inputs=[{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in inputs],
            outputs=_outputs(parsed),
            target_id=stored_target.id,
            trials=request.trials,
            queue=queue_of_target,
            submitted_by=who.name,
            tasks=tasks,
            reserve_trials=request.trials - first_round,
        )
    for job in jobs:
        if job.state == JobState.QUEUED.value:
            dispatch_or_defer(store, queue, job)
    if all(job.state != JobState.QUEUED.value for job in jobs):
        wake_compile_or_defer(store, queue, model)
    return model


def _source_bytes(request: ModelRequest) -> bytes:
    if request.format == "relax":
        return request.source.encode()
    try:
        return base64.b64decode(request.source, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            ("body", "source"), "an ONNX source must be the file's bytes in base64", "base64", None
        ) from None


def _outputs(parsed: ParsedModel) -> list[dict[str, Any]]:
    return [{"shape": list(o.shape), "dtype": o.dtype} for o in parsed.outputs]


def _store_source(store: Store, blobs: BlobStore, fmt: str, source: bytes) -> Any:
    """The uploaded file, content-addressed in the artifact store, and its artifact row."""
    with tempfile.TemporaryDirectory(prefix="tunehub-upload-") as scratch:
        path = Path(scratch) / "model"
        path.write_bytes(source)
        stored = blobs.put(path, SOURCE_SUFFIX[fmt])
    return store.models.create_source(stored.sha256, stored.size, stored.path, f"model-{fmt}")

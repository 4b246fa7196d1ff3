"""A model's second round: the trials its creation held back go to the tasks furthest from their
roofline, weighted by how often the model runs them.

A model's first round splits part of its budget by the tasks' work (`split_budget` in the
application layer's use case, `service.app.usecases.create_model`: FLOP, the only thing known
before anything is measured). Once every task's job is final, the worker that claims the
compile spends the reserve first: each task's gap is ``weight x (latency - roofline)`` of its
verified best (its whole time when the target's roofline is unknown; none when it is at
`AT_ROOFLINE` of it), and the reserve goes by gap, so a softmax that holds 9% of the model's
time at 10% of its roofline gets trials that a matmul at 90% of peak would waste. Each task
given trials gets a job that continues its budget from its stored records; the model compiles
when those are final too; jobs it made and cannot give a compile another worker took are
cancelled as every cancel is (`service.app.usecases.cancel`).
"""

from __future__ import annotations

import logging

from schedules_db.store import Store
from schedules_db.values import JobState, ModelJob
from service.app.usecases.cancel import cancel_job
from tuning.hardware.roofline import at_roofline, roofline_us

log = logging.getLogger("tunehub.worker")

MIN_GRANT = 4  # fewer trials than this buy one tiny batch: a task's grant is this or none


def reserve_shares(total: int, gaps: dict[int, float]) -> dict[int, int]:
    """``total`` trials split by ``gaps`` (any key: a positive weight), largest remainders
    first; a key whose share would be under `MIN_GRANT` gets none and its share goes to the
    others (the largest gap always gets what is left). Sums to ``total`` unless no gap is
    positive ({})."""
    live = {key: gap for key, gap in gaps.items() if gap > 0}
    while live:
        shares = _proportional(total, live)
        small = [key for key, share in shares.items() if share < MIN_GRANT]
        if not small or len(live) == 1:
            return {key: share for key, share in shares.items() if share > 0}
        del live[min(reversed(small), key=lambda key: live[key])]  # ties: the later goes
    return {}


def _proportional(total: int, weights: dict[int, float]) -> dict[int, int]:
    whole = sum(weights.values())
    exact = {key: total * weight / whole for key, weight in weights.items()}
    shares = {key: int(value) for key, value in exact.items()}
    by_remainder = sorted(exact, key=lambda key: exact[key] - shares[key], reverse=True)
    for key in by_remainder[: total - sum(shares.values())]:
        shares[key] += 1
    return shares


def task_gaps(store: Store, model: ModelJob) -> dict[int, float]:
    """{task id: weight x microseconds its verified best is slower than its roofline} for the
    model's tasks whose job succeeded (0 at `AT_ROOFLINE`)."""
    target = store.catalog.get_target(model.target_id)
    assert target is not None, "a model's target is never deleted"
    gaps = {}
    for progress in store.models.tasks(model.id):
        task, job = progress.task, progress.job
        best = store.schedules.best(task.workload_id, model.target_id)
        workload = store.catalog.get_workload(task.workload_id)
        if job.state != JobState.SUCCEEDED.value or best is None or workload is None:
            continue
        roof = roofline_us(workload.flop, workload.bytes_moved, target)
        if at_roofline(best.latency_us, roof):
            gaps[task.id] = 0.0
        else:
            gaps[task.id] = task.weight * max(0.0, best.latency_us - (roof or 0.0))
    return gaps


def spend_reserve(store: Store, model: ModelJob, worker: str) -> list[int]:
    """Give the reserve of ``model`` (whose compile ``worker`` owns) to its tasks by gap, less
    what its tasks have stored beyond their first round (the same model again spends nothing):
    each task given trials gets a job for its stored total plus its grant, and the model tunes
    again. Returns those jobs' ids ([]: nothing to spend it on, or the compile was lost;
    the reserve is gone and any compile is still ``worker``'s)."""
    progress = store.models.tasks(model.id)
    # Budgets are totals: what the tasks have stored already (another model's second round, the
    # same model before) counts against the model's, and only the rest is spent.
    stored = {p.task.id: max(p.task.trials, p.job.trials_done) for p in progress}
    left = min(model.reserve_trials, model.trials - sum(stored.values()))
    extra = reserve_shares(left, task_gaps(store, model)) if left > 0 else {}
    jobs: dict[int, tuple[int, int]] = {}
    for task, old in ((p.task, p.job) for p in progress):
        if extra.get(task.id, 0) > 0:
            job = store.jobs.create(
                old.workload_id, old.target_id, stored[task.id] + extra[task.id], old.queue,
                old.submitted_by, old.priority, old.transfer_cost_model, old.space,
                space_must_match=False,
            )  # fmt: skip
            jobs[task.id] = (job.id, extra[task.id])
    if not store.models.continue_tasks(model.id, worker, jobs):
        for job_id, _ in jobs.values():  # the compile is another worker's now: none of ours
            cancel_job(store, None, None, job_id)
        return []
    if jobs:
        log.info("model %s: %d reserved trials to %d tasks by their gap to the roofline: %s",
                 model.id, left, len(jobs), extra)  # fmt: skip
    return [job_id for job_id, _ in jobs.values()]

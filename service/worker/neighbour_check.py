"""A job's first step when its workload was given a neighbour answer: verify that answer.

An answer (`schedules_db.store.neighbours`) was refitted and compiled in the jail, never run.
Before its job searches, the worker replays each offered answer of the job's workload on its
target (in an isolated child first for a user's workload, as imported traces are), builds
it, runs it on the reference's inputs and compares (`verification.Reference`: numpy for a
catalog operator, the plain function for a user's). One that fails anything is withdrawn, for
good; one that passes stays offered until the job's verified best supersedes it
(`supersede_answers`). A failure of the worker's own (the device, the plain build) leaves the
answers as they are and the job goes on: answers are best effort, tuning is the job.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from schedules_db.store import Store
from schedules_db.values import USER, NeighbourAnswer
from service.worker.job_store import JobInputs
from service.worker.verification import Reference
from tuning.jail import SandboxUnavailable
from tuning.measure.devices import Measurer
from tuning.publish.packing import split_packed
from tuning.publish.verify import apply_trace, build_library
from tuning.untrusted.user_tir import TirRejected, check_stored

log = logging.getLogger("tunehub.worker")


def verify_neighbour_answers(
    store: Store, inputs: JobInputs, target: Any, measurer: Measurer, work_dir: Path
) -> dict[int, bool]:
    """Verify every offered neighbour answer of the job's workload on its target; withdraw
    those that fail. Returns each checked answer's id → whether it passed."""
    answers = store.neighbours.offered(inputs.workload.id, inputs.target.id)
    if not answers:
        return {}
    job_id, mod = inputs.job.id, inputs.mod
    outcome: dict[int, bool] = {}
    try:
        with measurer.session() as session:
            untuned = session.load(build_library(mod, target, work_dir / "neighbour-plain.so"))
            reference = Reference(inputs.workload, session, untuned, mod["main"])
            for answer in answers:
                error = _failure(session, reference, inputs, answer, target, work_dir)
                outcome[answer.id] = error is None
                if error is None:
                    log.info("job %s: neighbour answer %s verified", job_id, answer.id)
                elif store.neighbours.withdraw(answer.id, error):
                    log.warning("job %s: neighbour answer %s withdrawn: %s", job_id, answer.id,
                                error)  # fmt: skip
    except Exception:  # noqa: BLE001 - the worker's own failure: answers stay, the job goes on
        log.exception("job %s: neighbour answers could not be verified", job_id)
    return outcome


def _failure(
    session: Any,
    reference: Reference,
    inputs: JobInputs,
    answer: NeighbourAnswer,
    target: Any,
    work_dir: Path,
) -> str | None:
    """Why ``answer`` fails verification, or None when it passes."""
    workload = inputs.workload
    try:
        if workload.origin == USER and check_stored(
            workload.mod_json, workload.shash, [json.loads(answer.trace_json)]
        ):
            return "its trace does not replay on the workload"
        split = split_packed(apply_trace(inputs.mod, answer.trace_json), drop_in=False)
        path = work_dir / f"neighbour-{answer.id}.so"
        kernel = session.load(build_library(split.mod, target, path))
        reference.check(kernel, split.packed)
    except TirRejected as err:
        return f"its trace does not replay on the workload: {err}"
    except SandboxUnavailable:
        raise  # the worker's own failure: the answer stays
    except Exception as err:  # noqa: BLE001 - TVM's errors on a trace that does not fit, too
        return f"{type(err).__name__}: {err}"[:2000]
    return None


def supersede_answers(store: Store, inputs: JobInputs) -> None:
    """The job published a verified best: its workload's offered answers are superseded."""
    count = store.neighbours.supersede(inputs.workload.id, inputs.target.id)
    if count:
        log.info("job %s: %d neighbour answer(s) superseded", inputs.job.id, count)

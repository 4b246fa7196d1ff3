"""Instant answers for untuned workloads: their nearest tuned neighbour's best, refitted.

A lookup that allows them (``allow_neighbour``) gets, for each workload the service knows but
has no verified best of on the target, an unverified answer at once: the best trace of its
nearest tuned neighbour (`tuning.search.neighbour_match` says which is nearest) refitted to its
loop extents, replayed and compiled in the jail (`tuning.untrusted.neighbour_refit`). Behind it a
job is queued at `NEIGHBOUR_PRIORITY` (the service's, never the caller's): its worker first
verifies the answer numerically (`service.worker.neighbour_check`; a failure withdraws it for
good) and then tunes the workload for real, so the next lookup gets the verified best.

An answer is made once per (workload, target, series, neighbour schedule) and then served from
the store. A workload one of whose answers was withdrawn gets no other until it is tuned: its
hash is listed in ``withdrawn`` so clients drop what they cached. Best effort: when no isolated
child is free (or none can be built), the workload stays missing and the lookup still answers.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from schedules_db import Store
from schedules_db.values import (
    CATALOG,
    JobState,
    NeighbourAnswer,
    NeighbourSource,
    NeighbourState,
    NewNeighbourAnswer,
    Target,
    Workload,
)
from service.app.responses.lookups import TunedScheduleOut, neighbour_answer_json
from service.app.usecases.dispatch import dispatch_or_defer
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from tuning.catalog import get_operator
from tuning.jail import SandboxError
from tuning.search.neighbour_match import params_distance, task_kind
from tuning.search.spaces import PACKED, resolve_space
from tuning.untrusted.neighbour_refit import (
    Candidate,
    RefitFailed,
    RefitRequest,
    Refitted,
    refit_in_jail,
)
from tuning.untrusted.neighbour_requests import MAX_CANDIDATES, MAX_REQUESTS, TRIED

log = logging.getLogger("tunehub.api")

NEIGHBOUR_PRIORITY = 50  # above every submitter's default (0): a build is waiting for it
NEIGHBOUR_TRIALS = 64  # the verifying job's tuning budget (at most the server's max_trials)
SUBMITTER = "tunehub:neighbours"  # whom the verifying jobs count against, not the caller


@dataclass
class NeighbourReply:
    """What neighbour answers add to a lookup: answers by hash, and hashes whose answer was
    withdrawn (and that have none now)."""

    schedules: dict[str, TunedScheduleOut] = field(default_factory=dict)
    withdrawn: list[str] = field(default_factory=list)


def answer_missing(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    target: Target,
    series: str,
    missing: list[str],
    may_make: bool = True,
) -> NeighbourReply:
    """Neighbour answers for the ``missing`` hashes (no verified best on ``target`` in
    ``series``) that the service knows; with ``may_make`` (a caller who may submit: making one
    runs a jail child and queues a job) makes (at most `MAX_REQUESTS` per call) and queues what
    is not stored yet, else only stored answers are given. Hashes it cannot answer stay the
    caller's missing ones."""
    reply = NeighbourReply()
    workloads = store.neighbours.known_workloads(missing)
    by_workload: dict[int, list[NeighbourAnswer]] = {}
    for answer in store.neighbours.for_workloads(target.id, [w.id for w in workloads]):
        by_workload.setdefault(answer.workload_id, []).append(answer)
    to_make: list[Workload] = []
    for workload in workloads:
        answers = by_workload.get(workload.id, [])
        if any(a.state == NeighbourState.WITHDRAWN.value for a in answers):
            reply.withdrawn.append(workload.shash)
            continue
        offered = [a for a in answers if a.state == NeighbourState.OFFERED.value]
        if offered:
            answer = _keep_verifying(store, queue, settings, target, workload, offered[-1])
            reply.schedules[workload.shash] = neighbour_answer_json(
                answer, workload.shash, target, series
            )
        else:
            to_make.append(workload)
    if not may_make:
        return reply
    for workload, answer in _make(store, target, to_make[:MAX_REQUESTS]):
        answer = _keep_verifying(store, queue, settings, target, workload, answer)
        reply.schedules[workload.shash] = neighbour_answer_json(
            answer, workload.shash, target, series
        )
    return reply


def _sources(
    store: Store, target: Target, workload: Workload
) -> tuple[list[NeighbourSource], bool]:
    """The workload's candidate neighbours, nearest first (catalog), or of its task kind for
    the jail to order by buffer signature (user workloads; second item True). Chosen on their
    keys; only the chosen few's modules and traces are read."""
    if workload.origin == CATALOG and workload.operator:
        scored = []
        for candidate in store.neighbours.candidates(target.id, workload.operator):
            distance = params_distance(workload.params, candidate.params)
            if candidate.id != workload.id and distance is not None:
                scored.append((distance, candidate.id))
        chosen = [i for _, i in sorted(scored)[:TRIED]]
        return store.neighbours.sources(target.id, chosen), False
    kind = task_kind(workload.params)
    if kind is None:
        return [], True
    same_kind = [
        candidate.id
        for candidate in store.neighbours.candidates(target.id, None)
        if candidate.id != workload.id and task_kind(candidate.params) == kind
    ]
    return store.neighbours.sources(target.id, same_kind[:MAX_CANDIDATES]), True


def _packs(source: NeighbourSource) -> list[int]:
    """The operands a catalog best of the packed space packs (a user function marks its own)."""
    op = get_operator(source.operator) if source.operator else None
    return list(op.constant_operands) if op is not None and source.space == PACKED else []


def _make(
    store: Store, target: Target, workloads: list[Workload]
) -> list[tuple[Workload, NeighbourAnswer]]:
    """Refit every workload's nearest fitting neighbour in one isolated child; the answers
    stored (none on a busy, missing or failing sandbox: logged, the lookup goes on)."""
    wanted = []
    for workload in workloads:
        sources, by_signature = _sources(store, target, workload)
        if sources:
            wanted.append((workload, sources, by_signature))
    # Catalog and user workloads are refitted in separate children: a user module that took
    # its child over can then forge only answers for user workloads, which the worker replays
    # in a child again before building them (catalog answers it builds directly).
    by_origin: dict[str, list[tuple[Workload, list[NeighbourSource], bool]]] = {}
    for item in wanted:
        by_origin.setdefault(item[0].origin, []).append(item)
    fitted: list[tuple[tuple[Workload, list[NeighbourSource], bool], Refitted]] = []
    for group in by_origin.values():
        requests = [
            RefitRequest(
                workload.mod_json,
                [Candidate(s.mod_json, s.trace_json, _packs(s)) for s in sources],
                by_signature,
            )
            for workload, sources, by_signature in group
        ]
        try:
            refitted = refit_in_jail(json.loads(target.canonical_json), requests)
        except (SandboxError, RefitFailed) as err:
            log.warning("neighbour answers for %d workload(s) not made: %s", len(group), err)
            continue
        fitted.extend(zip(group, refitted, strict=True))
    made = []
    for (workload, sources, _), fit in fitted:
        if fit.candidate is None:
            continue
        source = sources[fit.candidate]
        scale = workload.flop / source.flop if workload.flop > 0 and source.flop > 0 else 1.0
        answer = store.neighbours.offer(
            NewNeighbourAnswer(
                workload_id=workload.id,
                target_id=target.id,
                neighbour_schedule_id=source.schedule_id,
                neighbour_workload_id=source.id,
                trace_json=fit.trace_json,
                args_info=fit.args_info,
                latency_us=source.latency_us * scale,
                space=source.space,
                tvm_version=source.tvm_version,
                packed_params=fit.packed_params,
            )
        )
        if answer.state == NeighbourState.OFFERED.value:
            made.append((workload, answer))
    return made


def _keep_verifying(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    target: Target,
    workload: Workload,
    answer: NeighbourAnswer,
) -> NeighbourAnswer:
    """The answer with its job: one queued (at the service's priority) when it has none yet.
    One job per answer, never more: a job that ended without a verified best (failed, or
    cancelled by an admin) is not queued again by the next lookup."""
    if answer.job_id is not None:
        return answer
    op = get_operator(workload.operator) if workload.operator else None
    space = resolve_space("auto", op.constant_operands, target.kind) if op else answer.space
    created = store.jobs.create(
        workload.id,
        target.id,
        min(NEIGHBOUR_TRIALS, settings.max_trials),
        queue_name(target.key),
        SUBMITTER,
        NEIGHBOUR_PRIORITY,
        True,
        space,
        space_must_match=False,
    )
    store.neighbours.attach_job(answer.id, created.id)
    if created.state == JobState.QUEUED.value:
        dispatch_or_defer(store, queue, created)
    stored = store.neighbours.get(answer.id)
    assert stored is not None, "an answer is never deleted"
    return stored

"""Importing a MetaSchedule JSON database for a target: its workloads and records are stored
(the modules parsed only in the limited child processes of `tuning.untrusted.user_tir`, every
trace through `tuning.checks.trace_gate`), and one job is queued per workload whose budget the
imported records already cover: the target's worker then skips the search and verifies the
best against the reference before it can be served, re-measured beside the current best
(`service.worker.verification`): an import's claimed timings never make a best.

Ownership: a user workload belongs to the identity that submitted it first (raw TIR, a model's
task, a build's task, an import). An import may bring records for new workloads and for the
importer's own; one that names a workload another identity owns is refused (403
``not_owner``), unless the importer is an admin. Jobs may be submitted for anyone's workload:
their traces are the search's own.

Admission: the verification jobs are the importer's jobs, admitted as every job is
(`service.app.admission`): the import is refused whole when they would take the importer over
its cap of active jobs (429 ``too_many_jobs``) or when one would ask for more trials than
``max_trials`` (a job's trials are its workload's records on the target: a 422 at the records
file), and they are made under the importer's admission lock."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from schedules_db import Store
from schedules_db.keys import target_key
from schedules_db.tokens import ADMIN
from schedules_db.values import Job, JobState, NewRecord
from service.app.actors import Identity
from service.app.admission import (
    admitting,
    check_room,
    check_target,
    check_trials,
    record_target,
    resolve_job_target,
)
from service.app.ports import ParseLimits, SubmissionLimits
from service.app.refusals import Forbidden, InvalidInput
from service.app.responses.interchange import (
    ImportedJob,
    ImportOut,
    import_json,
    imported_job_json,
)
from service.app.untrusted_input import check_tir_size, parser_slot, parsing_turn
from service.app.usecases.dispatch import dispatch_or_defer
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from tuning.hardware.targets import ResolvedTarget
from tuning.publish.interchange import (
    RECORD_FILE,
    WORKLOAD_FILE,
    InterchangeError,
    RecordLine,
    decode_record_line,
    decode_workload_line,
    split_lines,
)
from tuning.traces import run_failed
from tuning.untrusted.user_tir import ParsedTir, TirRejected, check_stored, parse_untrusted

MAX_WORKLOADS = 64  # each is parsed, re-derived and replayed in isolated children (~5 s)
MAX_RECORDS = 200_000


@dataclass(frozen=True)
class DatabaseImport:
    """A MetaSchedule JSON database for a target: both files' text."""

    target: str | dict[str, Any]
    workloads: str
    records: str


def import_database(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    limits: SubmissionLimits,
    who: Identity,
    request: DatabaseImport,
) -> ImportOut:
    """Store the database's workloads and records for its target and queue the verification of
    each workload's best; returns what was stored (`service.app.responses.interchange.ImportOut`).

    Refusals: a target tunehub refuses, or one no worker registered without ``admin`` (422);
    0 or more than `MAX_WORKLOADS` workloads, more than `MAX_RECORDS` records, or any bad line,
    a trace the gate refuses among them, a workload too large to parse (a 422 naming the file
    and line); ``who`` parsing already, or in debt of parse time before any workload's parse
    (429: an import whose own parses put ``who`` in debt stops there); a workload another
    identity owns (403); no isolated parser free or available (429/503); verification jobs
    that would take ``who`` over its cap of active jobs (429), or one over ``max_trials`` (422
    at the records file). Nothing is written on any refusal.
    """
    import tvm  # here, not at module level: the API process loads TVM on first use

    target = resolve_job_target(request.target, store)
    check_target(who, target.canonical, store)
    parsed, lines, records = _checked_database(limits, settings, request, who.limit_key)
    _check_owner(store, who, parsed)
    planned = _planned_jobs(store, target, parsed, lines, records)
    # Admitted as every job is, before anything is written: the cap (429), then the trials.
    new_jobs = [plan for plan in planned if plan.pending is None]
    check_room(store, settings, who, len(new_jobs))
    for plan in new_jobs:
        check_trials(
            settings,
            plan.trials,
            ("body", RECORD_FILE),
            f"{WORKLOAD_FILE} line {plan.line} has {plan.trials} records for this target, "
            "one trial each of its verification job: trials",
        )

    stored_target = record_target(store, request.target, target)
    workload_ids = {
        p.shash: store.catalog.get_or_create_workload(
            p.shash, p.mod_json, None, {}, p.flop, owner=who.name
        ).id
        for p in parsed
    }
    added = 0
    for record in records:
        added += store.records.add(
            workload_ids[parsed[record.workload_index].shash],
            stored_target.id,
            None,
            NewRecord(
                trace_json=json.dumps(record.trace),
                run_secs=record.run_secs,
                args_info=record.args_info,
                tvm_version=tvm.__version__,  # proven (or not) by the verification job
                unverified=True,
                failed=run_failed(record.run_secs),
            ),
        )
    jobs: list[ImportedJob] = []
    # Counted again under the importer's lock: a submission beside this one (on any replica)
    # cannot take the places these jobs were admitted to. (Only such a race is refused here,
    # with the records stored, as a job's target and workload rows are: importing again is
    # idempotent and makes the jobs.)
    with admitting(store, settings, limits.admissions, who, len(new_jobs)):
        for plan in planned:
            workload_id = workload_ids[plan.shash]
            if plan.pending is not None:  # a job that will see these records exists
                jobs.append(imported_job_json(plan.pending.id, workload_id, plan.pending.state))
                continue
            job = store.jobs.create(
                workload_id, stored_target.id, plan.trials, queue_name(stored_target.key), who.name
            )
            if job.state == JobState.QUEUED.value:
                dispatch_or_defer(store, queue, job)
            jobs.append(imported_job_json(job.id, workload_id, job.state))
    return import_json(stored_target, len(workload_ids), added, len(records) - added, jobs)


@dataclass(frozen=True)
class _Planned:
    """A workload of the import that gets a verification job (``pending`` None: a new one of
    ``trials``, its records on the target once imported) or has one under way already."""

    shash: str
    line: int  # its first line in the workloads file
    trials: int
    pending: Job | None


def _planned_jobs(
    store: Store,
    target: ResolvedTarget,
    parsed: list[ParsedTir],
    lines: list[int],
    records: list[RecordLine],
) -> list[_Planned]:
    """The verification jobs the import would make or find, read before anything is written:
    one per distinct workload with records on the target (stored ones, and the import's traces
    not stored yet) and no job under way."""
    stored_target = store.catalog.find_target(target_key(target.canonical))
    traces: dict[str, set[str]] = defaultdict(set)
    for record in records:
        traces[parsed[record.workload_index].shash].add(json.dumps(record.trace))
    planned: list[_Planned] = []
    first_lines = {p.shash: line for p, line in reversed(list(zip(parsed, lines, strict=True)))}
    for shash, line in sorted(first_lines.items(), key=lambda item: item[1]):
        workload = store.catalog.find_user_workload(shash)
        stored, pending, new = 0, None, len(traces[shash])
        if workload is not None and stored_target is not None:
            stored = store.records.count(stored_target.id, workload.id)
            pending = store.jobs.unfinished(workload.id, stored_target.id)
            if stored:
                new = sum(
                    not store.records.has_trace(workload.id, stored_target.id, trace)
                    for trace in traces[shash]
                )
        if stored + new or pending is not None:
            planned.append(_Planned(shash, line, stored + new, pending))
    return planned


def _check_owner(store: Store, who: Identity, parsed: list[ParsedTir]) -> None:
    """403 ``not_owner`` at the first workload line that names another identity's workload."""
    for number, workload in enumerate(parsed, start=1):
        existing = store.catalog.find_user_workload(workload.shash)
        if existing is not None and not who.owns(existing.owner):
            raise Forbidden(
                ADMIN,
                ("body", WORKLOAD_FILE),
                f"{WORKLOAD_FILE} workload {number} is workload {existing.id}, submitted by "
                f"{existing.owner or 'nobody on record'}: only they or an admin may import "
                "records for it",
                "not_owner",
            )


def _checked_database(
    limits: ParseLimits, settings: Settings, request: DatabaseImport, who: str
) -> tuple[list[ParsedTir], list[int], list[RecordLine]]:
    """Every workload of the database parsed and re-derived in isolation with the records
    replayed on it, their line numbers, and the records; a 422 at the file of the first bad
    line (a workload too large to parse before any is). One parser slot per workload in turn,
    so an upload waiting for a slot gets one between two workloads; ``who``'s parse-time quota
    is checked before each (a 429 ``parse_quota_exhausted`` once a workload put it in debt:
    nothing is written then, as the import writes only after every workload is parsed)."""
    workload_lines = split_lines(request.workloads)
    record_lines = split_lines(request.records)
    if not workload_lines or len(workload_lines) > MAX_WORKLOADS:
        raise InvalidInput(
            ("body", WORKLOAD_FILE),
            f"expected 1 to {MAX_WORKLOADS} workloads, got {len(workload_lines)}",
            "invalid_database",
        )
    if len(record_lines) > MAX_RECORDS:
        raise InvalidInput(
            ("body", RECORD_FILE), f"more than {MAX_RECORDS} records", "invalid_database"
        )
    try:
        records = [decode_record_line(line, n, len(workload_lines)) for n, line in record_lines]
        by_workload: dict[int, list[tuple[int, RecordLine]]] = defaultdict(list)
        for (number, _), record in zip(record_lines, records, strict=True):
            by_workload[record.workload_index].append((number, record))
        modules = [(n, decode_workload_line(line, n)[1]) for n, line in workload_lines]
        for n, module in modules:
            where = f"{WORKLOAD_FILE} line {n}: "
            check_tir_size(settings, "json", module, ("body", WORKLOAD_FILE), where)
        parsed = []
        with parsing_turn(limits, who):  # checks the quota before the first workload
            for index, (n, module) in enumerate(modules):
                if index:  # and before each next: an import stops once ``who`` is in debt
                    limits.parse_time.check(who)
                with parser_slot(limits, who):
                    parsed.append(_checked_workload(n, module, by_workload[index]))
    except InterchangeError as err:
        field = RECORD_FILE if str(err).startswith(RECORD_FILE) else WORKLOAD_FILE
        raise InvalidInput(("body", field), str(err), "invalid_database") from None
    return parsed, [number for number, _ in workload_lines], records


def _checked_workload(
    number: int, mod_json: str, records: list[tuple[int, RecordLine]]
) -> ParsedTir:
    """A workload line's module parsed and re-derived in isolation, and its records' traces
    replayed on it in another isolated child (a trace that crashes TVM kills that child only)."""
    try:
        workload = parse_untrusted("json", mod_json)
    except TirRejected as err:
        raise InterchangeError(f"{WORKLOAD_FILE} line {number}: {err}") from None
    if not records:
        return workload
    try:
        bad = check_stored(workload.mod_json, workload.shash, [r.trace for _, r in records])
    except TirRejected as err:
        raise InterchangeError(
            f"{RECORD_FILE} lines {records[0][0]}-{records[-1][0]}: replaying their traces "
            f"on {WORKLOAD_FILE} line {number} failed: {err}"
        ) from None
    if bad:
        raise InterchangeError(
            f"{RECORD_FILE} line {records[bad[0]][0]}: its trace does not replay on "
            f"{WORKLOAD_FILE} line {number}"
        )
    return workload

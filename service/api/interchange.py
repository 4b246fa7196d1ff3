"""``/api/v1/export`` and ``/api/v1/import``: plain MetaSchedule JSON databases in and out.

Export writes what `ms.database.JSONDatabase` opens (and `compile_tir` applies) for one target.
Import takes such a database for a target, stores its workloads and records (the modules are
parsed only in the limited child process of `tuning.sandbox.user_tir`), and queues one job per
workload whose budget is already covered by the imported records: the target's worker then
skips the search and verifies the best against the reference before it can be served.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from schedules_db.values import JobState, NewRecord
from service.api.jobs import resolve_job_target
from service.api.schedules import target_id_of
from service.auth import AnyReader, Submitter, check_target
from service.errors import invalid, not_found, responses
from service.queue import queue_name
from service.strict_input import StrictRoute
from service.untrusted_input import ISOLATION_RESPONSES, isolated_parser
from tuning.hardware.targets import HOST, host_fingerprint
from tuning.publish.interchange import (
    RECORD_FILE,
    WORKLOAD_FILE,
    InterchangeError,
    RecordLine,
    decode_record_line,
    decode_workload_line,
    encode_record_line,
    encode_workload_line,
    split_lines,
)
from tuning.sandbox.user_tir import ParsedTir, TirRejected, check_stored, parse_untrusted
from tuning.search.traces import run_failed

router = APIRouter(tags=["interchange"], route_class=StrictRoute)
log = logging.getLogger("tunehub.api")

MAX_WORKLOADS = 64  # each is parsed, re-derived and replayed in isolated children (~5 s)
MAX_RECORDS = 200_000


class ImportBody(BaseModel):
    """A MetaSchedule JSON database (both files' text) measured on ``target``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    target: str | dict[str, Any] = Field(description='"host", a label/key, or a JSON target')
    workloads: str = Field(alias=WORKLOAD_FILE, max_length=64 * 2**20)
    records: str = Field(alias=RECORD_FILE, max_length=256 * 2**20)


@router.get("/export", responses=responses(404))
def export_database(
    request: Request,
    who: AnyReader,
    target: str = Query(description="key, label, 'host' or JSON"),
) -> dict[str, Any]:
    """The target's successful records as the two files of a MetaSchedule JSON database."""
    store = request.app.state.store
    target_id = target_id_of(request, target)
    if target_id is None:
        raise not_found("target", target)
    target_row = store.catalog.get_target(target_id)
    canonical = json.loads(target_row.canonical_json)
    index: dict[int, int] = {}
    workload_lines, record_lines = [], []
    for row in store.records.list_records(target_id):
        if row.mean_run_us is None:
            continue
        if row.workload_id not in index:
            workload = store.catalog.get_workload(row.workload_id)
            index[row.workload_id] = len(workload_lines)
            workload_lines.append(encode_workload_line(workload.shash, workload.mod_json))
        record_lines.append(
            encode_record_line(
                index[row.workload_id], row.trace_json, row.run_secs, canonical, row.args_info
            )
        )
    return {
        "target": {"key": target_row.key, "label": target_row.label, "canonical": canonical},
        "tvm_series": store.series,
        "workloads": len(workload_lines),
        "records": len(record_lines),
        WORKLOAD_FILE: "".join(line + "\n" for line in workload_lines),
        RECORD_FILE: "".join(line + "\n" for line in record_lines),
    }


def _checked_workload(number: int, line: str, records: list[tuple[int, RecordLine]]) -> ParsedTir:
    """A workload line parsed and re-derived in isolation, and its records' traces replayed on
    it in another isolated child (a trace that crashes TVM kills that child only)."""
    _, mod_json = decode_workload_line(line, number)
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


@router.post("/import", status_code=201, responses=ISOLATION_RESPONSES)
def import_database(body: ImportBody, request: Request, who: Submitter) -> dict[str, Any]:
    """Store a JSON database's workloads and records for ``target`` and queue the verification
    of each workload's best. Any bad line is a 422 naming the file and line; nothing is written
    then."""
    import tvm

    state = request.app.state
    store = state.store
    target = resolve_job_target(body.target, store)
    check_target(who, target.canonical, store)
    workload_lines = split_lines(body.workloads)
    record_lines = split_lines(body.records)
    if not workload_lines or len(workload_lines) > MAX_WORKLOADS:
        raise invalid(
            ("body", WORKLOAD_FILE),
            f"expected 1 to {MAX_WORKLOADS} workloads, got {len(workload_lines)}",
            "invalid_database",
        )
    if len(record_lines) > MAX_RECORDS:
        raise invalid(("body", RECORD_FILE), f"more than {MAX_RECORDS} records", "invalid_database")
    try:
        records = [decode_record_line(line, n, len(workload_lines)) for n, line in record_lines]
        by_workload: dict[int, list[tuple[int, RecordLine]]] = defaultdict(list)
        for (number, _), record in zip(record_lines, records, strict=True):
            by_workload[record.workload_index].append((number, record))
        with isolated_parser(who.limit_key):  # one parser slot for the whole database
            parsed = [
                _checked_workload(n, line, by_workload[index])
                for index, (n, line) in enumerate(workload_lines)
            ]
    except InterchangeError as err:
        field = RECORD_FILE if str(err).startswith(RECORD_FILE) else WORKLOAD_FILE
        raise invalid(("body", field), str(err), "invalid_database") from None

    fingerprint = host_fingerprint() if body.target == HOST else {}
    target_row = store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )
    workload_ids = [
        store.catalog.get_or_create_workload(p.shash, p.mod_json, None, {}, p.flop).id
        for p in parsed
    ]
    added = 0
    for record in records:
        added += store.records.add(
            workload_ids[record.workload_index],
            target_row.id,
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
    jobs = []
    for workload_id in dict.fromkeys(workload_ids):
        measured = store.records.count(target_row.id, workload_id)
        pending = store.jobs.unfinished(workload_id, target_row.id)
        if not measured or pending is not None:  # a job that will see these records exists
            if pending is not None:
                jobs.append({"id": pending.id, "workload_id": workload_id, "state": pending.state})
            continue
        job = store.jobs.create(
            workload_id, target_row.id, measured, queue_name(target_row.key), who.name
        )
        if job.state == JobState.QUEUED.value:
            try:
                store.jobs.mark_enqueued(job.id, state.queue.enqueue(job.id, job.queue))
            except Exception:  # the broker is down: the reaper sends it later
                log.exception("could not enqueue import job %s", job.id)
        jobs.append({"id": job.id, "workload_id": workload_id, "state": job.state})
    return {
        "target": {"key": target_row.key, "label": target_row.label},
        "workloads": len(set(workload_ids)),
        "records_added": added,
        "records_known": len(records) - added,
        "jobs": jobs,
    }

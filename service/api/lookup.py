"""``/api/v1/lookup`` and ``/api/v1/top-records``: the read side a TVM build stands on.

The HTTP face of `schedule_reads.ScheduleReader` (over SQL: `schedules_db.reader`), so the
light client's reader (`service.client.reader`) answers what the server's would: verified bests
and successful records of one target, in the server's TVM series only, never across targets.
A lookup of a whole model's workloads is one request. With ``allow_neighbour`` a known
workload without a verified best is answered at once with its nearest tuned neighbour's
schedule, refitted and marked unverified (`service.app.usecases.neighbour_answers`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from schedules_db.reader import SqlScheduleReader
from schedules_db.tokens import SUBMIT
from service.api.deps import QueueDep, SettingsDep, StoreDep
from service.app.admission import lookup_target
from service.app.responses.lookups import (
    LookupOut,
    TunedRecordOut,
    tuned_record_json,
    tuned_schedule_json,
)
from service.app.usecases.neighbour_answers import answer_missing
from service.web.auth import AnyReader, PostedReader
from service.web.schemas import SHASH_PATTERN, LookupBody
from service.web.strict_input import StrictRoute

router = APIRouter(tags=["lookup"], route_class=StrictRoute)

MAX_TOP_K = 100


@router.post("/lookup", response_model=LookupOut, response_model_exclude_unset=True)
def lookup(
    body: LookupBody,
    who: PostedReader,
    store: StoreDep,
    queue: QueueDep,
    settings: SettingsDep,
) -> LookupOut:
    """The verified best of each workload (structural hashes, as MetaSchedule writes them) on
    one target, in this server's TVM series: one request for a whole model. A target given as
    "host" or JSON is canonicalised as for jobs; one the store has never seen answers every
    workload as missing. Nothing is written, unless ``allow_neighbour``: then every answer
    carries ``provenance`` and ``verified``, a known workload without a verified best gets its
    nearest tuned neighbour's schedule (``provenance`` "neighbour", ``verified`` false; made
    and its verifying job queued on the first request of a caller who may submit — a reader
    gets the answers made already), and ``withdrawn`` lists the hashes whose neighbour answer
    failed verification."""
    key, stored = lookup_target(store, body.target)
    reader = SqlScheduleReader(store)
    found = reader.lookup(key, body.workloads) if stored is not None else {}
    # A verified best's provenance and verified flag are answered only to those who asked
    # for neighbour answers (old clients see exactly what they always saw).
    schedules = {shash: tuned_schedule_json(schedule) for shash, schedule in found.items()}
    missing = [shash for shash in dict.fromkeys(body.workloads) if shash not in found]
    answer: LookupOut = {
        "target": {"key": key, "label": stored.label if stored is not None else None},
        "tvm_series": reader.tvm_series,
        "schedules": schedules,
        "missing": missing,
    }
    if not body.allow_neighbour:
        return answer
    for schedule in schedules.values():
        schedule["provenance"] = "tuned"
        schedule["verified"] = True
    withdrawn: list[str] = []
    if stored is not None and missing:
        reply = answer_missing(
            store, queue, settings, stored, reader.tvm_series, missing, who.can(SUBMIT)
        )
        schedules.update(reply.schedules)
        withdrawn = reply.withdrawn
        answer["missing"] = [shash for shash in missing if shash not in reply.schedules]
    answer["withdrawn"] = withdrawn
    return answer


@router.get("/top-records", response_model=list[TunedRecordOut])
def top_records(
    who: AnyReader,
    store: StoreDep,
    workload: Annotated[
        str, Query(pattern=SHASH_PATTERN, description="the workload's structural hash")
    ],
    target: Annotated[str, Query(description="a target key (as POST /lookup answers it)")],
    k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
) -> list[TunedRecordOut]:
    """The ``k`` fastest successful, verified records of one workload on one target (this
    server's TVM series), fastest first; empty when there are none."""
    return [tuned_record_json(r) for r in SqlScheduleReader(store).top_k(workload, target, k)]

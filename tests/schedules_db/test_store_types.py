"""No store method hands out an ORM row or `Any`: by their annotations (every public method of
every aggregate, the lookups, the SQL reader) and at run time (on SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest

from schedules_db import browse, lookups, values
from schedules_db.reader import SqlScheduleReader
from schedules_db.store import Store
from schedules_db.store.catalog import CatalogRows
from schedules_db.store.fleet import Fleet
from schedules_db.store.jobs import Jobs
from schedules_db.store.models import Models
from schedules_db.store.neighbours import Neighbours
from schedules_db.store.records import Records
from schedules_db.store.schedules import Schedules
from schedules_db.tables import Base
from tests.schedules_db.published import publish

AGGREGATES = (CatalogRows, Jobs, Records, Schedules, Fleet, Models, Neighbours, SqlScheduleReader)
VALUES = (
    values.Target,
    values.WorkloadInfo,
    values.Job,
    values.Record,
    values.RecordTrace,
    values.ScheduleInfo,
    values.Artifact,
    values.Worker,
    values.ModelJob,
    values.ModelTask,
    values.NeighbourAnswer,
)


def _public(owner: type | ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in inspect.getmembers(owner, inspect.isfunction):
        module = getattr(member, "__module__", "")
        if isinstance(owner, ModuleType) and module != owner.__name__:
            continue  # imported into the module (its SQL helpers): checked where defined
        if not name.startswith("_") and module.startswith(("schedules_db", "schedule_reads")):
            yield name, member


def _leaves(annotation: Any) -> Iterator[Any]:
    """Every type an annotation is built of (``list[Job | None]`` -> list, Job, NoneType)."""
    yield typing.get_origin(annotation) or annotation
    for arg in typing.get_args(annotation):
        yield from _leaves(arg)


METHODS = [
    (f"{owner.__name__}.{name}", method)
    for owner in (*AGGREGATES, lookups, browse)
    for name, method in _public(owner)
]


def test_every_aggregate_is_walked() -> None:
    owners = {name.rpartition(".")[0] for name, _ in METHODS}
    assert owners == {
        *(owner.__name__ for owner in AGGREGATES),
        "schedules_db.lookups",
        "schedules_db.browse",
    }
    assert len(METHODS) >= 50


@pytest.mark.parametrize(("name", "method"), METHODS, ids=[name for name, _ in METHODS])
def test_no_method_returns_a_row_or_any(name: str, method: Callable[..., Any]) -> None:
    hints = typing.get_type_hints(method)
    assert "return" in hints, f"{name} has no return annotation"
    for leaf in _leaves(hints["return"]):
        assert leaf is not Any, f"{name} returns Any"
        assert not (isinstance(leaf, type) and issubclass(leaf, Base)), f"{name} returns {leaf}"


def test_values_name_the_columns_and_are_frozen() -> None:
    for value, row, left_out in (
        (values.Target, "targets", ()),
        (values.Workload, "workloads", ()),
        (values.WorkloadInfo, "workloads", ("mod_json",)),
        (values.Job, "jobs", ()),
        (values.Record, "tuning_records", ()),
        (values.Schedule, "schedules", ()),
        (values.ScheduleInfo, "schedules", ("tir",)),
        (values.Artifact, "artifacts", ()),
        (values.Worker, "workers", ()),
        (values.ModelJob, "models", ()),
        (values.ModelTask, "model_tasks", ()),
        (values.NeighbourAnswer, "neighbour_answers", ()),
    ):
        columns = {c.name for c in Base.metadata.tables[row].c} - set(left_out)
        assert {f.name for f in dataclasses.fields(value)} == columns, value.__name__
        assert value.__dataclass_params__.frozen, value.__name__  # type: ignore[attr-defined]


def _walk(result: object) -> Iterator[object]:
    yield result
    if isinstance(result, (list, tuple, set)):
        for item in result:
            yield from _walk(item)
    elif isinstance(result, dict):
        for item in result.values():
            yield from _walk(item)


def test_what_the_store_returns_is_values(store: Store) -> None:
    schedule_id, job_id = publish(store, "matmul", 16)
    job = store.jobs.get(job_id)
    assert job is not None
    wid, tid = job.workload_id, job.target_id
    schedule = store.schedules.get(schedule_id)
    assert schedule is not None
    store.fleet.register("w", "host", 1, [tid], {})
    results = {
        values.Target: [store.catalog.get_target(tid), store.catalog.list_targets()],
        values.Workload: [store.catalog.get_workload(wid), store.catalog.list_workloads()],
        values.Job: [
            job,
            store.jobs.list_jobs(),
            store.jobs.create(wid, tid, 10**6, "q"),
            store.jobs.requeue_stale(timedelta(0)),
            store.jobs.queued_not_enqueued_since(job.created_at),
        ],
        values.Record: [store.records.top_k(wid, tid, 5), store.records.list_records(tid)],
        values.Schedule: [schedule, store.schedules.list_schedules()],
        values.Artifact: [store.schedules.get_artifact(schedule.artifact_id)],
        values.Worker: [store.fleet.list_workers()],
    }
    seen = set()
    for value, found in results.items():
        for item in _walk(found):
            assert not isinstance(item, Base)
            if not isinstance(item, (list, tuple)) and item is not None:
                assert isinstance(item, value), (value, item)
                seen.add(value)
    assert seen == set(results)
    parts = lookups.schedule(store, schedule_id)
    assert parts is not None and isinstance(parts.schedule, values.Schedule)
    # The joined reads build their values without __init__ (values.adopt): the same values.
    for value in (*parts[:4], parts.record, *lookups.job(store, job_id)):
        assert value == type(value)(**dataclasses.asdict(value))
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.id = 0
    listed = lookups.schedules(store)[0]
    assert (
        type(listed.schedule) is values.ScheduleInfo
        and type(listed.workload) is values.WorkloadInfo
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = "cancelled"  # type: ignore[misc]

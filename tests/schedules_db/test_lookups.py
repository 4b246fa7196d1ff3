"""The joined lookups (schedules_db.lookups) answer what the store's getters answer, in one
query each, on SQLite and on PostgreSQL."""

from __future__ import annotations

from schedules_db import Store, lookups
from schedules_db.tables import ArtifactRow, JobRow, ScheduleRow, TargetRow, WorkloadRow
from tests.schedules_db.published import publish


def _same(orm_row: object, plain: object, model: type, skip: tuple[str, ...] = ()) -> None:
    for column in model.__table__.c:
        if column.name not in skip:
            assert getattr(plain, column.name) == getattr(orm_row, column.name), column.name


def test_schedule_and_job_lookups_match_the_getters(store: Store) -> None:
    schedule_id, job_id = publish(store, "matmul", 16)
    parts = lookups.schedule(store, schedule_id)
    row = store.schedules.get(schedule_id)
    _same(row, parts.schedule, ScheduleRow)
    _same(
        store.catalog.get_workload(row.workload_id), parts.workload, WorkloadRow, skip=("mod_json",)
    )
    _same(store.catalog.get_target(row.target_id), parts.target, TargetRow)
    _same(store.schedules.get_artifact(row.artifact_id), parts.artifact, ArtifactRow)
    record = store.records.get(row.record_id)
    assert (parts.record.tvm_version, parts.record.trace_json) == (
        record.tvm_version,
        record.trace_json,
    )
    assert not hasattr(parts.workload, "mod_json")  # never loaded
    assert lookups.artifact(store, schedule_id).sha256 == parts.artifact.sha256

    job = lookups.job(store, job_id)
    _same(store.jobs.get(job_id), job.job, JobRow)
    assert (job.workload.id, job.target.id) == (row.workload_id, row.target_id)

    for missing in (lookups.schedule, lookups.job, lookups.artifact):
        assert missing(store, 10**6) is None


def test_schedule_list_matches_the_store_and_its_filters(store: Store) -> None:
    for operator in ("matmul", "softmax"):
        for size in (8, 16, 32):
            publish(store, operator, size)
    series = Store(store.engine, tvm_series="0.27")
    other = Store(store.engine, tvm_series="0.99")
    target_id = store.catalog.list_targets()[0].id
    for view in (store, series, other):
        for operator, target, workload, limit in [
            (None, None, None, 100),
            ("matmul", None, None, 100),
            ("softmax", target_id, None, 2),
            (None, None, 2, 100),
            ("nope", None, None, 100),
        ]:
            found = lookups.schedules(view, operator, target, workload, limit)
            expected = view.schedules.list_schedules(operator, target, workload, limit)
            assert [p.schedule.id for p in found] == [r.id for r in expected]
            assert all(p.record is None and not hasattr(p.schedule, "tir") for p in found)
    assert lookups.schedules(other) == []
    assert len(lookups.schedules(series)) == 6

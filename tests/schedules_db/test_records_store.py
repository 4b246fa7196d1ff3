"""The records aggregate (measured candidates), on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest

from schedules_db.store import Store
from schedules_db.values import NewRecord, Record
from tests.schedules_db.store_data import STALE, TVM_VERSION, pair, record, schedule


def test_records_dedupe_and_failed_ones_stay_out_of_top_k(store: Store) -> None:
    wid, tid = pair(store)
    other_target = store.catalog.get_or_create_target(
        {"kind": "llvm", "mcpu": "y"}, "llvm", "y", {}
    ).id
    assert store.records.add(wid, tid, None, record(30.0, "[3]"))
    assert store.records.add(wid, tid, None, record(10.0, "[1]"))
    assert store.records.add(wid, tid, None, record(None, "[f]"))
    assert not store.records.add(wid, tid, None, record(11.0, "[1]"))  # same trace again
    assert store.records.add(wid, other_target, None, record(1.0, "[1]"))  # other target
    assert store.records.count(tid, wid) == 3
    top = store.records.top_k(wid, tid, 5)
    assert [r.trace_json for r in top] == ["[1]", "[3]"]
    assert isinstance(top[0], Record) and top[0].mean_run_us == pytest.approx(10.0)
    assert store.records.has_trace(wid, tid, "[f]") and not store.records.has_trace(
        wid, tid, "[zz]"
    )
    # Target isolation: the faster record of the other target is never returned here.
    assert all(r.target_id == tid for r in store.records.list_records(tid))
    failed = [r for r in store.records.list_records(tid) if r.trace_json == "[f]"][0]
    assert failed.mean_run_us is None and store.records.get(failed.id).trace_json == "[f]"
    assert store.records.get(10**6) is None


def test_failed_is_the_callers_word_not_a_marker(store: Store) -> None:
    """The store knows no MetaSchedule marker: ``failed`` decides alone."""
    wid, tid = pair(store)
    slow = NewRecord("[slow]", [2e9] * 3, [], TVM_VERSION, failed=False)  # above 1e9 s
    fast = NewRecord("[said failed]", [1e-6] * 3, [], TVM_VERSION, failed=True)
    assert store.records.add(wid, tid, None, slow) and store.records.add(wid, tid, None, fast)
    assert [r.trace_json for r in store.records.top_k(wid, tid, 5)] == ["[slow]"]


def test_counts_stats_and_filters(store: Store) -> None:
    wid, tid = pair(store)
    job = store.jobs.create(wid, tid, 8, "q")
    store.records.add(wid, tid, job.id, record(5.0, "[a]"))
    store.records.add(wid, tid, None, record(7.0, "[b]"))
    store.records.add(wid, tid, None, record(None, "[c]"))
    assert store.records.count(tid) == 3
    assert store.records.count(tid, job_id=job.id) == 1
    assert store.records.count(tid, space="packed") == 0
    assert [r.trace_json for r in store.records.list_records(tid, wid, job.id)] == ["[a]"]
    count, fastest = store.records.stats_by_target(wid)[tid]
    assert count == 3 and fastest == pytest.approx(5.0)


def test_records_of_another_series_are_invisible(store: Store) -> None:
    wid, tid = pair(store)
    store.records.add(wid, tid, None, record(5.0, "[old]", version="0.26.1"))
    store.records.add(wid, tid, None, record(9.0, "[new]"))
    series = Store(store.engine, tvm_series="0.27")
    assert [r.trace_json for r in series.records.top_k(wid, tid, 5)] == ["[new]"]
    assert series.records.count(tid) == 1 and store.records.count(tid) == 2
    assert not series.records.has_trace(wid, tid, "[old]")


def test_imported_records_stay_out_of_seeds_and_training_until_verified(store: Store) -> None:
    wid, tid = pair(store)
    store.records.add(wid, tid, None, record(20.0, "[measured]"))
    store.records.add(wid, tid, None, record(1.0, "[imported]", unverified=True))
    assert [r.trace_json for r in store.records.top_k(wid, tid, 5)] == ["[imported]", "[measured]"]
    assert [r.trace_json for r in store.records.top_k(wid, tid, 5, verified_only=True)] == [
        "[measured]"
    ]
    assert [r.trace_json for r in store.records.list_records(tid, verified_only=True)] == [
        "[measured]"
    ]
    # A worker verifies the imported record and publishes it: from then on it counts.
    rec = store.records.top_k(wid, tid, 1)[0]
    job = store.jobs.create(wid, tid, 2, "q")
    store.jobs.claim(job.id, "w1", STALE)
    store.schedules.publish(job.id, "w1", schedule(rec.id, 1.0))
    assert len(store.records.list_records(tid, verified_only=True)) == 2


def test_only_unverified_records_can_be_dropped(store: Store) -> None:
    wid, tid = pair(store)
    store.records.add(wid, tid, None, record(20.0, "[measured]"))
    store.records.add(wid, tid, None, record(1.0, "[imported]", unverified=True))
    ids = [r.id for r in store.records.list_records(tid)]
    assert store.records.drop_unverified(ids) == 1
    assert [r.trace_json for r in store.records.list_records(tid)] == ["[measured]"]

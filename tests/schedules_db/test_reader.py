"""`SqlScheduleReader`, the SQL side of `schedule_reads.ScheduleReader`: one target, one TVM
series, verified records only, a whole model's batch in one statement; on SQLite and on
PostgreSQL. And `schedule_reads` imports without SQLAlchemy."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from schedule_reads import ScheduleKey, ScheduleReader, TunedRecord, TunedSchedule, tvm_series
from schedules_db.reader import SqlScheduleReader
from schedules_db.store import Store
from tests.schedules_db.store_data import STALE, record, schedule

SERIES = "0.27"
ROOT = Path(__file__).resolve().parents[2]


def _target(store: Store, mcpu: str) -> tuple[int, str]:
    found = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": mcpu}, "llvm", mcpu, {})
    return found.id, found.key


def _publish(
    store: Store, wid: int, tid: int, run_us: float | None, version: str = "0.27.0"
) -> int:
    """Measure one record of ``run_us`` (None: publish the plain function) and publish it."""
    store = Store(store.engine, tvm_series=tvm_series(version))  # no cache hit across series
    job = store.jobs.create(wid, tid, 1, "q")
    assert store.jobs.claim(job.id, "w", STALE)
    record_id = None
    if run_us is not None:
        trace = f"[{wid}, {tid}, {run_us}, {version!r}]"
        assert store.records.add(wid, tid, job.id, record(run_us, trace, version))
        record_id = store.records.list_records(tid, wid, job.id)[-1].id
    new = schedule(record_id, run_us or 3.0, f"{wid:032x}{tid:032x}")
    schedule_id = store.schedules.publish(job.id, "w", new)
    assert schedule_id is not None
    return schedule_id


@pytest.fixture
def reader(store: Store) -> SqlScheduleReader:
    return SqlScheduleReader(Store(store.engine, tvm_series=SERIES))


def test_best_answers_only_its_target_and_series(store: Store, reader: SqlScheduleReader) -> None:
    here, here_key = _target(store, "here")
    there, there_key = _target(store, "there")
    wid = store.catalog.get_or_create_workload("11", "{}", "matmul", {}, 1.0).id
    sid = _publish(store, wid, here, 20.0)
    _publish(store, wid, there, 1.0)  # faster, on other hardware
    _publish(store, wid, here, 0.5, version="0.26.1")  # faster, in another series

    best = reader.best(ScheduleKey("11", here_key, SERIES))
    assert isinstance(best, TunedSchedule) and best.schedule_id == sid
    assert best.key == ScheduleKey("11", here_key, SERIES) and best.latency_us == 20.0
    assert isinstance(best.record, TunedRecord)
    assert best.record.mean_run_us == pytest.approx(20.0) and best.record.tvm_version == "0.27.0"
    assert best.record.trace_json == f"[{wid}, {here}, 20.0, '0.27.0']"
    assert reader.best(ScheduleKey("11", there_key, SERIES)).latency_us == 1.0
    assert reader.best(ScheduleKey("12", here_key, SERIES)) is None  # a miss
    assert reader.best(ScheduleKey("11", "0" * 32, SERIES)) is None
    with pytest.raises(ValueError, match="series"):
        reader.best(ScheduleKey("11", here_key, "0.26"))  # never answered across series
    assert SqlScheduleReader(store, "0.26").best(ScheduleKey("11", here_key, "0.26")) is not None
    with pytest.raises(ValueError, match="one TVM series"):
        SqlScheduleReader(store)  # the fixture's store sees every series: not a reader's


def test_a_plain_best_has_no_record(store: Store, reader: SqlScheduleReader) -> None:
    tid, key = _target(store, "here")
    wid = store.catalog.get_or_create_workload("11", "{}", "softmax", {}, 1.0).id
    sid = _publish(store, wid, tid, None)
    best = reader.best(ScheduleKey("11", key, SERIES))
    assert best is not None and (best.schedule_id, best.record, best.space) == (sid, None, "plain")


def test_top_k_skips_failed_unverified_and_other_targets(
    store: Store, reader: SqlScheduleReader
) -> None:
    tid, key = _target(store, "here")
    other, _ = _target(store, "there")
    wid = store.catalog.get_or_create_workload("11", "{}", "matmul", {}, 1.0).id
    for run_us, trace in ((30.0, "[30]"), (10.0, "[10]"), (20.0, "[20]"), (None, "[failed]")):
        store.records.add(wid, tid, None, record(run_us, trace))
    store.records.add(wid, tid, None, record(1.0, "[imported]", unverified=True))
    store.records.add(wid, tid, None, record(2.0, "[old series]", version="0.26.1"))
    store.records.add(wid, other, None, record(3.0, "[other target]"))
    assert [r.trace_json for r in reader.top_k("11", key, 10)] == ["[10]", "[20]", "[30]"]
    assert [r.trace_json for r in reader.top_k("11", key, 2)] == ["[10]", "[20]"]
    top = reader.top_k("11", key, 1)[0]
    assert (top.run_secs, top.args_info, top.space) == ([10.0 * 1e-6] * 3, [], "plain")
    assert reader.top_k("11", key, 0) == [] and reader.top_k("99", key, 5) == []
    assert reader.top_k("11", "0" * 32, 5) == []


def test_a_catalog_workload_answers_before_a_users_of_the_same_hash(
    store: Store, reader: SqlScheduleReader
) -> None:
    tid, key = _target(store, "here")
    user = store.catalog.get_or_create_workload("11", "{}", None, {}, 1.0).id
    user_best = _publish(store, user, tid, 5.0)
    assert reader.best(ScheduleKey("11", key, SERIES)).schedule_id == user_best
    catalog = store.catalog.get_or_create_workload("11", "{}", "matmul", {}, 1.0).id
    catalog_best = _publish(store, catalog, tid, 9.0)
    assert reader.lookup(key, ["11"])["11"].schedule_id == catalog_best
    assert [r.mean_run_us for r in reader.top_k("11", key, 5)] == [pytest.approx(9.0)]


def test_a_batch_of_200_hashes_is_one_statement(store: Store, reader: SqlScheduleReader) -> None:
    tid, key = _target(store, "here")
    _, other_key = _target(store, "there")
    published = {}
    for n in range(20):
        wid = store.catalog.get_or_create_workload(str(n), "{}", "matmul", {"n": n}, 1.0).id
        published[str(n)] = _publish(store, wid, tid, 10.0 + n)
    hashes = [str(n) for n in range(200)]
    reader.lookup(key, hashes[:1])  # connect (and let a dialect initialise) beforehand
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        found = reader.lookup(key, hashes + hashes[:5])  # duplicates answered once
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert len(statements) == 1, statements
    assert {h: best.schedule_id for h, best in found.items()} == published
    assert found["3"].key == ScheduleKey("3", key, SERIES) and found["3"].latency_us == 13.0
    assert reader.lookup(other_key, hashes) == {} and reader.lookup(key, []) == {}


def test_the_interface_imports_without_sqlalchemy() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("sqlalchemy", "tvm", "httpx", "schedules_db"):
                    raise ImportError(f"{name} is blocked")
                return None

        sys.meta_path.insert(0, Refuse())
        import schedule_reads
        from schedule_reads import ScheduleKey, ScheduleReader, TunedSchedule, target_key

        assert "sqlalchemy" not in sys.modules
        assert len(target_key({"kind": "llvm"})) == 32
        try:
            import sqlalchemy  # noqa: F401
        except ImportError:
            print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_sql_reader_is_a_schedule_reader() -> None:
    assert issubclass(SqlScheduleReader, ScheduleReader)
    with pytest.raises(TypeError):
        ScheduleReader("0.27")  # type: ignore[abstract]

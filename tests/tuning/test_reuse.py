"""Reuse: records are keyed by (workload, target, TVM series); a bigger budget continues from
the stored records instead of starting over."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.keys import tvm_series
from schedules_db.values import NewRecord, NewSchedule
from service.worker.execution import WorkerContext, run_job
from service.worker.store_database import StoreDatabase
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target


def test_tvm_series_of_versions() -> None:
    assert tvm_series("0.27.0.post1") == "0.27"
    assert tvm_series("0.27.dev12+g1234") == "0.27"
    assert tvm_series("1.0.0") == "1.0"
    assert current_tvm_series() == tvm_series(__import__("tvm").__version__)


def test_a_bigger_budget_continues_from_the_stored_records(tmp_path: Path) -> None:
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.cost_model import RandomModel
    from tvm.s_tir.meta_schedule.search_strategy import SearchStrategy

    from tuning.search.fresh_candidates import FreshCandidates

    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    spec = catalog_workload("matmul", get_operator("matmul").Params(M=48, N=64, K=32))
    target = resolve_target("host")
    tid = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {}).id
    wid = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, 1.0
    ).id
    context = WorkerContext(
        store=store, artifact_dir=tmp_path / "artifacts", worker_name="pytest",
        num_trials_per_iter=4,
    )  # fmt: skip

    first = store.jobs.create(wid, tid, 8, "q")
    assert run_job(context, first.id) == "succeeded"
    best_after_first = store.schedules.best(wid, tid)
    assert best_after_first.trials == 8

    # Same budget again: a cache hit, no worker involved.
    again = store.jobs.create(wid, tid, 8, "q")
    assert again.cache_hit and again.schedule_id == best_after_first.id

    more = store.jobs.create(wid, tid, 16, "q")
    assert not more.cache_hit
    assert run_job(context, more.id) == "succeeded"
    # Only the 8 missing candidates were measured, all of them new.
    assert store.records.count(tid, wid, more.id) == 8
    assert store.records.count(tid, wid) == 16
    best = store.schedules.best(wid, tid)
    assert best.trials == 16 and store.jobs.get(more.id).trials_done == 16
    assert best.latency_us <= best_after_first.latency_us

    # MetaSchedule's evolutionary search seeds each round with the database's best records and
    # would measure them again; `FreshCandidates` drops them (the "all of them new" above), and
    # ends a search that finds only stored schedules.
    database = StoreDatabase(store, tid)
    # The store's text form of a trace is what is_stored compares: every stored record is found.
    workload = database.commit_workload(spec.mod)
    for row in store.records.list_records(tid):
        assert database.is_stored(spec.mod, database._to_record(row, workload).trace)

    def search(is_stored: Callable[[Any, Any], bool]) -> Any:
        tune = TuneContext(
            mod=spec.mod, target=target.tvm(), space_generator="post-order-apply",
            search_strategy=FreshCandidates(
                SearchStrategy.create("evolutionary", population_size=64), is_stored
            ),
            num_threads=2,
        )  # fmt: skip
        tune.search_strategy.pre_tuning(
            64, 32, tune.generate_design_space(), database, RandomModel()
        )
        return tune  # the strategy holds a raw pointer to its TuneContext: keep it alive

    # The database's 16 records seed the search's first population; none is offered again.
    fresh = search(database.is_stored)
    candidates = fresh.search_strategy.generate_measure_candidates()
    assert candidates and not any(database.is_stored(spec.mod, c.sch.trace) for c in candidates)
    # A search that finds nothing new ends instead of measuring old schedules.
    stale = search(lambda mod, trace: True)
    assert stale.search_strategy.generate_measure_candidates() is None
    engine.dispose()


def test_records_never_cross_targets_or_tvm_series(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine, tvm_series="0.27")
    ta = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "a"}, "llvm", "a", {}).id
    tb = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "b"}, "llvm", "b", {}).id
    wid = store.catalog.get_or_create_workload("9", "{}", "matmul", {}, 1.0).id
    record = NewRecord(
        trace_json="[1]", run_secs=[1e-5] * 3, args_info=[], tvm_version="0.27.0", failed=False
    )
    assert store.records.add(wid, ta, None, record)
    assert len(store.records.top_k(wid, ta, 5)) == 1
    assert store.records.top_k(wid, tb, 5) == [] and store.records.count(tb) == 0
    assert store.records.list_records(tb) == [] and not store.records.has_trace(wid, tb, "[1]")
    # MetaSchedule's view through the adapter, bound to target B, sees nothing of A.
    assert len(StoreDatabase(store, tb)) == 0 and len(StoreDatabase(store, ta)) == 1
    # The same trace measured with another TVM series is a separate record, invisible here.
    old = NewRecord(
        trace_json="[1]", run_secs=[2e-5] * 3, args_info=[], tvm_version="0.26.1", failed=False
    )
    assert store.records.add(wid, ta, None, old)
    assert [r.tvm_version for r in store.records.top_k(wid, ta, 5)] == ["0.27.0"]
    older_store = Store(engine, tvm_series="0.26")
    assert [r.tvm_version for r in older_store.records.top_k(wid, ta, 5)] == ["0.26.1"]
    # A best schedule verified under 0.26 is served to 0.26 lookups only.
    job = older_store.jobs.create(wid, ta, 1, "q")
    assert older_store.jobs.claim(job.id, "w", timedelta(seconds=60))
    old_record = older_store.records.top_k(wid, ta, 1)[0]
    sched_id = older_store.schedules.publish(job.id, "w", _schedule(old_record.id))
    assert older_store.schedules.get(sched_id).tvm_series == "0.26"
    assert older_store.schedules.best(wid, ta).id == sched_id
    assert store.schedules.best(wid, ta) is None and store.schedules.list_schedules() == []
    assert not store.jobs.create(wid, ta, 1, "q").cache_hit
    assert older_store.jobs.create(wid, ta, 1, "q").cache_hit
    engine.dispose()


def _schedule(record_id: int) -> NewSchedule:
    sha = "b" * 64
    return NewSchedule(
        record_id=record_id, latency_us=20.0, untuned_latency_us=100.0, max_abs_error=0.0,
        tir="# tir", artifact_sha256=sha, artifact_size=1, artifact_path=f"bb/{sha}.so",
    )  # fmt: skip


def test_the_plain_function_is_served_when_no_candidate_beats_it(tmp_path: Path) -> None:
    """A stored candidate that parallelises a 16-element add (thread start-up costs far more
    than the add) is verified and re-timed, loses to the plain function, and the plain function
    is what gets published."""
    from tvm.s_tir.schedule import Schedule

    from tuning.traces import trace_to_text

    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    spec = catalog_workload("add", get_operator("add").Params(shape=[16]))
    target = resolve_target("host")
    tid = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {}).id
    wid = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "add", spec.params, 16.0
    ).id
    sch = Schedule(spec.mod)
    block = sch.get_sblock("T_add") if hasattr(sch, "get_sblock") else sch.get_block("T_add")
    sch.parallel(sch.get_loops(block)[0])
    slow = NewRecord(
        trace_json=trace_to_text(sch.trace.as_json()),
        run_secs=[1e-9] * 3,  # claimed fast, so it is the top candidate
        args_info=[],
        tvm_version=__import__("tvm").__version__,
        failed=False,
    )
    assert store.records.add(wid, tid, None, slow)
    job = store.jobs.create(wid, tid, 1, "q")  # the budget is covered: no search, verify only
    context = WorkerContext(store=store, artifact_dir=tmp_path / "a", worker_name="pytest")
    assert run_job(context, job.id) == "succeeded"
    best = store.schedules.best(wid, tid)
    assert best.record_id is None and best.latency_us == best.untuned_latency_us
    assert "T.parallel" not in best.tir
    assert best.max_abs_error < 1e-6  # checked against the numpy reference like any candidate
    engine.dispose()

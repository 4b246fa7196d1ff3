"""The models aggregate: a model with its tasks, readiness, compile claims (one winner, stale
ones taken over), owner-only writes, cancel; on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

from schedules_db.store import Store
from schedules_db.tables import utcnow
from schedules_db.values import ModelState, NewModelTask, PublishedModel
from tests.schedules_db.store_data import STALE, target

NEVER_STALE = timedelta(hours=1)


def _model(store: Store, tasks: int = 2) -> tuple[int, list[int], int]:
    """A model on an llvm target with ``tasks`` task jobs queued: (model id, job ids, target)."""
    tid = target(store, "model-cpu")
    source = store.models.create_source("f" * 64, 10, "ff/f.onnx", "model-onnx")
    new_tasks, job_ids = [], []
    for i in range(tasks):
        workload = store.catalog.get_or_create_workload(
            str(1000 + i), "{}", None, {"task": f"fused_conv2d{i}"}, 1e6
        )
        job = store.jobs.create(workload.id, tid, 4, "q")
        job_ids.append(job.id)
        new_tasks.append(NewModelTask(f"fused_conv2d{i}", 1 + i, workload.id, job.id, 4))
    model = store.models.create(
        name="tiny",
        fmt="onnx",
        source_artifact_id=source.id,
        inputs=[{"name": "x", "shape": [1, 3, 8, 8], "dtype": "float32"}],
        outputs=[{"shape": [1, 10], "dtype": "float32"}],
        target_id=tid,
        trials=8,
        queue="q",
        submitted_by="alice",
        tasks=new_tasks,
    )
    return model.id, job_ids, tid


def _finish_jobs(store: Store, job_ids: list[int]) -> None:
    for job_id in job_ids:
        assert store.jobs.claim(job_id, "tuner", STALE)
        assert store.jobs.fail(job_id, "tuner", "done for this test")


def test_a_model_is_ready_once_every_task_job_is_final(store: Store) -> None:
    model_id, job_ids, tid = _model(store)
    model = store.models.get(model_id)
    assert model is not None and model.state == ModelState.TUNING.value
    tasks = store.models.tasks(model_id)
    assert [t.task.position for t in tasks] == [0, 1]
    assert [t.job.id for t in tasks] == job_ids and tasks[1].task.weight == 2
    assert store.models.ready([tid], STALE) == []
    assert not store.models.claim_compile(model_id, "w1", STALE)
    _finish_jobs(store, job_ids[:1])
    assert store.models.ready([tid], STALE) == []  # one task still queued
    _finish_jobs(store, job_ids[1:])
    assert [m.id for m in store.models.ready([tid], STALE)] == [model_id]
    assert store.models.ready([tid + 1000], STALE) == []  # another target's workers
    assert store.models.get(10**6) is None


def test_one_compile_claim_wins_and_a_stale_one_is_taken_over(store: Store) -> None:
    model_id, job_ids, tid = _model(store)
    _finish_jobs(store, job_ids)
    wins: list[str] = []
    barrier = threading.Barrier(4)

    def claim(name: str) -> None:
        barrier.wait()
        if store.models.claim_compile(model_id, name, NEVER_STALE):
            wins.append(name)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    owner = wins[0]
    assert store.models.ready([tid], NEVER_STALE) == []  # compiling, heartbeat fresh
    assert store.models.heartbeat(model_id, owner) and not store.models.heartbeat(model_id, "x")
    # The owner dies: its heartbeat goes stale and another worker takes the compile over.
    assert [m.id for m in store.models.ready([tid], timedelta(seconds=-1))] == [model_id]
    assert store.models.claim_compile(model_id, "w-new", timedelta(seconds=-1))
    published = PublishedModel("b" * 64, 123, "bb/b.so", 2, 10.0, 2.5, 1e-6)
    assert not store.models.finish(model_id, owner, published)  # no longer the owner
    assert not store.models.fail(model_id, owner, "late")
    assert store.models.finish(model_id, "w-new", published)
    done = store.models.get(model_id)
    assert done is not None and done.state == ModelState.SUCCEEDED.value
    assert (done.attempt, done.tasks_applied, done.tuned_ms) == (2, 2, 2.5)
    artifact = store.schedules.get_artifact(done.artifact_id or 0)
    assert artifact is not None and artifact.sha256 == "b" * 64
    assert artifact.kind == "relax-vm-library"
    assert not store.models.claim_compile(model_id, "w3", timedelta(seconds=-1))  # final


def test_cancel_stops_a_tuning_model_and_flags_a_compiling_one(store: Store) -> None:
    model_id, job_ids, tid = _model(store)
    cancelled = store.models.request_cancel(model_id)
    assert cancelled is not None and cancelled.state == ModelState.CANCELLED.value
    _finish_jobs(store, job_ids)
    assert store.models.ready([tid], STALE) == []  # a cancelled model is never compiled
    other, other_jobs, _ = _model(store)
    _finish_jobs(store, other_jobs)
    assert store.models.claim_compile(other, "w1", STALE)
    flagged = store.models.request_cancel(other)
    assert flagged is not None and flagged.state == ModelState.COMPILING.value
    assert flagged.cancel_requested
    # Its worker dies: nobody compiles it again, and the reaper marks it cancelled.
    assert store.models.ready([tid], timedelta(seconds=-1)) == []
    assert not store.models.claim_compile(other, "w2", timedelta(seconds=-1))
    assert store.models.cancel_abandoned(STALE) == []  # w1's heartbeat is fresh
    assert store.models.cancel_abandoned(timedelta(seconds=-1)) == [other]
    after = store.models.get(other)
    assert after is not None and after.state == ModelState.CANCELLED.value
    assert not store.models.cancel_compiling(other, "w1")  # final already
    assert store.models.request_cancel(10**6) is None


def test_ready_models_not_woken_recently_are_the_reapers(store: Store) -> None:
    model_id, job_ids, _ = _model(store)
    _finish_jobs(store, job_ids)
    assert [m.id for m in store.models.not_woken_since(utcnow(), STALE)] == [model_id]
    store.models.mark_woken(model_id)
    earlier = utcnow() - timedelta(seconds=30)
    assert store.models.not_woken_since(earlier, STALE) == []
    assert [m.id for m in store.models.not_woken_since(utcnow(), STALE)] == [model_id]

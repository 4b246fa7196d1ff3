"""`TunehubDatabase` in a TVM build: MetaSchedule's ``compile_tir`` applies the schedule tunehub
verified (a real trace from a real search), the answers come in one lookup request, the result
computes what numpy does, and a database bound to another target answers nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.s_tir.meta_schedule.database import TuningRecord
from tvm.s_tir.meta_schedule.tir_integration import compile_tir

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.values import NewRecord, NewSchedule
from service.client import TunehubClient
from service.client.errors import Offline, OfflineWarning
from service.client.tvm_database import TunehubDatabase
from service.entry.app import create_app
from service.shared.settings import Settings
from service.worker.execution import WorkerContext, run_next
from tests.conftest import TINY, ServerThread
from tuning.catalog import get_operator
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target
from tuning.measure.timing import run_module
from tuning.publish.verify import compile_to_library


def _tuned_settings(tuned_store: dict, tmp_path: Path) -> tuple[Settings, WorkloadSpec]:
    """Settings of a store holding the tiny matmul's fastest record from a real search,
    published as the verified best on the host target (so the best has a trace to replay)."""
    source: Store = tuned_store["store"]
    best = source.records.top_k(tuned_store["workload_id"], tuned_store["target_id"], 1)[0]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    host = resolve_target("host")
    target = store.catalog.get_or_create_target(host.canonical, host.kind, host.label, {})
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    job = store.jobs.create(workload.id, target.id, 8, "q")
    assert store.jobs.claim(job.id, "w", timedelta(seconds=60))
    record = NewRecord(
        best.trace_json, best.run_secs, best.args_info, best.tvm_version, failed=False
    )
    assert store.records.add(workload.id, target.id, job.id, record)
    record_id = store.records.top_k(workload.id, target.id, 1)[0].id
    published = NewSchedule(record_id, best.mean_run_us or 1.0, 2.0, 0.0, "# tir", "a" * 64, 1, "a")
    assert store.schedules.publish(job.id, "w", published) is not None
    engine.dispose()
    return Settings(data_dir=tmp_path, database_url=url), spec


@pytest.fixture
def served(tuned_store: dict, tmp_path: Path) -> Iterator[tuple[TunehubClient, WorkloadSpec]]:
    """A server over `_tuned_settings`' store, and a client of it."""
    settings, spec = _tuned_settings(tuned_store, tmp_path)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        TunehubClient(server.url) as client,
    ):
        yield client, spec


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's lookup cache in its own folder (never the user's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_build_applies_the_tuned_schedule_from_one_lookup(
    served: tuple[TunehubClient, WorkloadSpec], tmp_path: Path
) -> None:
    client, spec = served
    sent: list[httpx.Request] = []
    client.http.event_hooks["request"].append(sent.append)
    target = tvm.target.Target(resolve_target("host").canonical)
    database = TunehubDatabase(client, target)  # one request: the server names the target's key
    assert database.prefetch(spec.mod) == 1 and len(sent) == 2
    schedule = compile_tir(database, spec.mod, target)
    assert len(sent) == 2  # every query answered from the prefetched lookup
    assert schedule is not None and len(schedule.trace.insts) > 0
    assert not tvm_ffi.structural_equal(schedule.mod, spec.mod)  # it is the tuned function
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((32, 32)).astype("float32") for _ in range(2))
    library = compile_to_library(schedule.mod, target, tmp_path / "tuned.so")
    out = run_module(library, "llvm", [a, b], [32, 32], "float32")
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    assert len(database) == 1


def test_a_database_of_another_target_answers_nothing(
    served: tuple[TunehubClient, WorkloadSpec],
) -> None:
    client, spec = served
    other = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}
    database = TunehubDatabase(client, other)
    assert database.prefetch(spec.mod) == 0
    assert compile_tir(database, spec.mod, tvm.target.Target(other)) is None


def test_offline_the_database_answers_from_its_last_lookup_and_says_so(
    tuned_store: dict, tmp_path: Path
) -> None:
    settings, spec = _tuned_settings(tuned_store, tmp_path)
    target = tvm.target.Target(resolve_target("host").canonical)
    server = ServerThread(create_app(settings, run_reaper=False))
    with server, TunehubClient(server.url) as client:
        online = TunehubDatabase(client, target)
        assert online.prefetch(spec.mod) == 1 and online.offline_since is None
    # The server is gone (same URL): the cache of that lookup answers, and a warning says so.
    with TunehubClient(server.url, timeout=2) as client:
        with pytest.warns(OfflineWarning, match="offline: tunehub at .* does not answer"):
            offline = TunehubDatabase(client, target)
        assert offline.offline_since is not None
        assert offline.prefetch(spec.mod) == 1
        schedule = compile_tir(offline, spec.mod, target)
        assert schedule is not None and not tvm_ffi.structural_equal(schedule.mod, spec.mod)
        # Another target was never looked up: nothing cached, a clear error.
        other = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}
        with pytest.raises(Offline, match="nothing is cached for this target"):
            TunehubDatabase(client, other)
        # Without a cache, no answer is a clear error too.
        with pytest.raises(Offline):
            TunehubDatabase(client, target, cache=False)


def test_commit_sends_records_that_are_served_only_once_verified(
    served: tuple[TunehubClient, WorkloadSpec], tmp_path: Path
) -> None:
    """A build that tunes with ``commit=True`` pushes its records to another (empty) service as
    an import: stored, not served, until that service's worker has verified them."""
    client, spec = served
    target = tvm.target.Target(resolve_target("host").canonical)
    source = TunehubDatabase(client, target)
    source.prefetch(spec.mod)
    (measured,) = source.get_top_k(source.commit_workload(spec.mod), 1)
    data_dir = tmp_path / "fresh"
    settings = Settings(data_dir=data_dir)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        TunehubClient(server.url) as fresh,
    ):
        database = TunehubDatabase(fresh, target, commit=True)
        assert database.push() is None  # nothing committed yet
        workload = database.commit_workload(spec.mod)
        database.commit_tuning_record(
            TuningRecord(measured.trace, workload, [2e-6, 2e-6], target, measured.args_info)
        )
        summary = database.push()
        assert summary is not None and summary["records_added"] == 1
        assert database.push() is None  # sent once
        host = resolve_target("host").canonical
        assert fresh.lookup(host, [spec.shash])["missing"] == [spec.shash]  # not verified yet
        store = Store(make_engine(f"sqlite:///{data_dir / 'tunehub.db'}"), current_tvm_series())
        worker = WorkerContext(
            store=store,
            artifact_dir=data_dir / "artifacts",
            worker_name="pytest-commit",
            target_ids=tuple(t.id for t in store.catalog.list_targets()),
        )
        assert run_next(worker) == "succeeded"  # the verification job the import queued
        # Served now (the plain function may win the re-timing on so small a matmul: the best
        # is verified either way).
        assert spec.shash in fresh.lookup(host, [spec.shash])["schedules"]


def _save_many(cache_home: str, first: int, count: int) -> None:
    """A build process saving ``count`` answers one lookup at a time (as a build does)."""
    import os

    os.environ["XDG_CACHE_HOME"] = cache_home
    from service.client.lookup_cache import LookupCache

    cache = LookupCache("http://tunehub.test", "host")
    for shash in range(first, first + count):
        cache.save("key", "0.27", {str(shash): None})


def test_builds_saving_side_by_side_lose_no_cached_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes merging answers into one cache file at once (``make -j``): every answer
    is kept (the merge holds a lock; without it a read-merge-write races and drops some)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    builds = [
        context.Process(target=_save_many, args=(str(tmp_path), first, 60)) for first in (0, 1000)
    ]
    for build in builds:
        build.start()
    for build in builds:
        build.join(120)
        assert build.exitcode == 0
    from service.client.lookup_cache import LookupCache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # cache_root reads it on every call
    cached = LookupCache("http://tunehub.test", "host").load()
    assert cached is not None
    assert set(cached.answers) == {str(i) for i in (*range(60), *range(1000, 1060))}

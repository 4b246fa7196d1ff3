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
from tvm.s_tir.meta_schedule.tir_integration import compile_tir

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.values import NewRecord, NewSchedule
from service.app import create_app
from service.client import TunehubClient
from service.client.tvm_database import TunehubDatabase
from service.settings import Settings
from tests.conftest import TINY, ServerThread
from tuning.catalog import get_operator
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target
from tuning.publish.verify import compile_to_library, run_module


@pytest.fixture
def served(tuned_store: dict, tmp_path: Path) -> Iterator[tuple[TunehubClient, WorkloadSpec]]:
    """A server whose store holds the tiny matmul's fastest record from a real search, published
    as the verified best on the host target (so the best has a trace to replay)."""
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
    settings = Settings(data_dir=tmp_path, database_url=url)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        TunehubClient(server.url) as client,
    ):
        yield client, spec
    engine.dispose()


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

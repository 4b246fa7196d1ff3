"""Issue 25, finding 1: an imported trace ran code as root on the worker (and in every client
that loaded the published library), and an import could take over another identity's best.

Against c7ee873 these tests fail: the probe's import answered 201 and the worker created the
marker; a `submit` token could import; another identity's workload took the import; claimed
timings pushed the real best out of the verification and a slower import replaced it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from schedules_db import Store
from schedules_db.tables import ScheduleRow
from schedules_db.values import NewRecord
from service.worker.execution import WorkerContext, run_job
from tests.conftest import host_store
from tests.security.payloads import probe_module, probe_trace
from tests.service.deployment import Deployment
from tests.service.rows import row_counts
from tuning.hardware.targets import resolve_target
from tuning.publish.interchange import encode_record_line, encode_workload_line
from tuning.traces import plain_json, trace_to_text


def _args_info(mod: Any) -> list[Any]:
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return [plain_json(a.as_json()) for a in ArgInfo.from_prim_func(mod["main"])]


def _split_trace(mod: Any, block: str, factors: list[int]) -> str:
    """A trace of the search's kind: the block's last loop split by ``factors``."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    *_, loop = sch.get_loops(sch.get_sblock(block))
    sch.split(loop, factors)
    return trace_to_text(sch.trace.as_json())


def _vectorised_matmul_trace(mod: Any) -> str:
    """C's j loop split into 16 vector lanes, innermost under k: several times the plain
    function's speed."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j_outer, lanes = sch.split(j, [None, 16])
    sch.reorder(i, j_outer, k, lanes)
    sch.vectorize(lanes)
    return trace_to_text(sch.trace.as_json())


def _database(mod: Any, traces: list[Any], run_secs: float = 1e-6) -> dict[str, str]:
    import tvm

    from tuning.ir import normalize, structural_hash

    mod = normalize(mod["main"])
    target = resolve_target("host").canonical
    records = [
        encode_record_line(0, t if isinstance(t, str) else json.dumps(t), [run_secs], target,
                           _args_info(mod))
        for t in traces
    ]  # fmt: skip
    return {
        "target": "host",
        "database_workload.json": encode_workload_line(structural_hash(mod), tvm.ir.save_json(mod))
        + "\n",
        "database_tuning_record.json": "".join(line + "\n" for line in records),
    }


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("imports")
    with Deployment(root, auth=True, write_rate_per_s=0, max_active_jobs=0) as deployment:
        deployment.token["dave"], _ = deployment.tokens.create("dave", ["submit-code"])
        yield deployment


def test_the_probes_import_is_refused_at_its_line_and_runs_nothing(
    deployment: Deployment, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    body = _database(probe_module(), [probe_trace(marker)])
    # Other tests of this module store the probe's workload themselves: count, do not look it up.
    written = ("jobs", "workloads", "targets", "tuning_records")
    before = row_counts(deployment.settings.data_dir, written)
    answer = deployment.post("submit-code", "/import", body)
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["detail"]
    assert detail["loc"] == ["body", "database_tuning_record.json"]
    assert "line 1" in detail["msg"] and "pragma_import_llvm" in detail["msg"]
    assert row_counts(deployment.settings.data_dir, written) == before  # nothing written
    assert not marker.exists()


def test_an_import_needs_submit_code_and_the_workloads_owner(deployment: Deployment) -> None:
    mod = probe_module()
    good = _database(mod, [_split_trace(mod, "B", [2, 8])])
    refused = deployment.post("submit", "/import", good)  # modules and traces are code
    assert refused.status_code == 403 and refused.json()["scope"] == "submit-code"

    first = deployment.post("submit-code", "/import", good)  # carol: the first submitter
    assert first.status_code == 201, first.text
    shash = json.loads(good["database_workload.json"])[0]
    assert deployment.store.catalog.find_user_workload(shash).owner == "carol"

    more = _database(mod, [_split_trace(mod, "B", [4, 4])])
    taken = deployment.post("dave", "/import", more)  # another identity's workload
    assert taken.status_code == 403, taken.text
    assert taken.json()["type"] == "not_owner"
    assert taken.json()["loc"] == ["body", "database_workload.json"]
    assert "carol" in taken.json()["detail"]
    owner = deployment.post("submit-code", "/import", more)
    assert owner.status_code == 201 and owner.json()["records_added"] == 1
    admin = deployment.post("admin", "/import", _database(mod, [_split_trace(mod, "B", [8, 2])]))
    assert admin.status_code == 201, admin.text
    assert deployment.store.catalog.find_user_workload(shash).owner == "carol"


@pytest.fixture
def worker(tmp_path: Path) -> Any:
    """A store with the host target and a worker context over it (the job runner, in this
    process: the process that must never run a candidate's code)."""
    engine, store, row = host_store(tmp_path)
    context = WorkerContext(store=store, artifact_dir=tmp_path / "artifacts",
                            worker_name="pytest-security", stale_after=timedelta(seconds=60),
                            num_trials_per_iter=4, target_ids=(row.id,))  # fmt: skip
    yield store, row, context
    engine.dispose()


def _user_workload(store: Store, mod: Any, owner: str = "carol") -> Any:
    import tvm

    from tuning.ir import normalize, structural_hash

    mod = normalize(mod["main"])
    return store.catalog.get_or_create_workload(
        structural_hash(mod), tvm.ir.save_json(mod), None, {}, 1.0, owner=owner
    ), mod


@pytest.mark.parametrize("unverified", [True, False], ids=["imported", "marked-verified"])
def test_a_stored_probe_record_never_runs_on_the_worker(
    worker: Any, tmp_path: Path, unverified: bool
) -> None:
    """The payload reaches the store past the API (an older store, a copied database): the
    worker's job neither replays, builds nor loads it, whether or not it is marked verified."""
    store, target, context = worker
    workload, mod = _user_workload(store, probe_module())
    marker = tmp_path / "marker"
    store.records.add(workload.id, target.id, None, NewRecord(
        trace_json=json.dumps(probe_trace(marker)), run_secs=[1e-9], args_info=_args_info(mod),
        tvm_version="0.27.0.post1", unverified=unverified, failed=False,
    ))  # fmt: skip
    job = store.jobs.create(workload.id, target.id, 2, "tunehub.test", "carol")
    assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
    assert not marker.exists()
    best = store.schedules.best(workload.id, target.id)
    published = store.records.get(best.record_id) if best.record_id else None
    assert published is None or "pragma_import_llvm" not in published.trace_json
    if unverified:  # an import that fails the gate is dropped, as one that does not replay
        assert all("pragma" not in r.trace_json for r in store.records.list_records(target.id))


def _strided_matmul_trace(mod: Any, factor: int) -> str:
    """C's loops in the order j, k, i (split by ``factor``): correct, and an order of magnitude
    slower than `_vectorised_matmul_trace` (i innermost walks A and C down their columns)."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i_outer, i_inner = sch.split(i, [None, factor])
    sch.reorder(j, k, i_outer, i_inner)
    return trace_to_text(sch.trace.as_json())


def _matmul(n: int) -> Any:
    import tvm
    from tvm import te

    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def test_claimed_timings_never_replace_a_best_they_do_not_out_measure(worker: Any) -> None:
    """The best's stored figure is inflated (measured while the machine was busy) and five
    imported records claim 1 ns each, so the best ranks sixth by stored figures: it is
    re-measured beside them anyway and stays the best (the claims are strided loops, an order
    of magnitude slower: the outcome does not hang on timing noise)."""
    store, target, context = worker
    workload, mod = _user_workload(store, _matmul(128))

    def record(trace: str, secs: float, unverified: bool) -> int:
        store.records.add(workload.id, target.id, None, NewRecord(
            trace_json=trace, run_secs=[secs], args_info=_args_info(mod),
            tvm_version="0.27.0.post1", unverified=unverified, failed=False,
        ))  # fmt: skip
        return next(r.id for r in store.records.list_records(target.id) if r.trace_json == trace)

    good = record(_vectorised_matmul_trace(mod), 1e-5, unverified=False)
    first = store.jobs.create(workload.id, target.id, 1, "tunehub.test", "carol")
    assert run_job(context, first.id) == "succeeded", store.jobs.get(first.id).error
    assert store.schedules.best(workload.id, target.id).record_id == good
    with store.session() as s:
        s.execute(update(ScheduleRow).values(latency_us=1e6))
    claims = [record(_strided_matmul_trace(mod, f), 1e-9, True) for f in (2, 4, 8, 16, 32)]
    assert good not in [r.id for r in store.records.top_k(workload.id, target.id, 5)]
    second = store.jobs.create(workload.id, target.id, 6, "tunehub.test", "carol")
    assert run_job(context, second.id) == "succeeded", store.jobs.get(second.id).error
    best = store.schedules.best(workload.id, target.id)
    assert best.record_id == good, (best.record_id, claims)
    assert best.latency_us < 1e6  # re-measured here, beside the claims

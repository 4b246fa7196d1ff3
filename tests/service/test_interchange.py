"""Export to and import from plain MetaSchedule JSON databases, over HTTP and the CLI."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from schedules_db import Store, make_engine
from schedules_db.keys import target_key
from service.client import TunehubClient, TunehubError
from service.entry.app import create_app
from service.shared.settings import Settings
from service.worker.execution import WorkerContext, run_next
from tests.conftest import TINY, ServerThread
from tests.e2e.helpers import cli
from tuning.hardware.host import current_tvm_series


def _server(data_dir: Path, database_url: str | None = None, artifacts: Path | None = None):  # noqa: ANN202
    settings = Settings(data_dir=data_dir, database_url=database_url, artifact_dir=artifacts)
    return ServerThread(create_app(settings, run_reaper=False))


def test_export_is_a_database_plain_tvm_applies_and_import_round_trips(
    tuned_store: dict, tmp_path: Path
) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target

    exported = tmp_path / "exported"
    with _server(tmp_path / "a", tuned_store["url"], tuned_store["artifact_dir"]) as server:
        listed = cli(["export", str(exported), "--target", "host", "--server", server.url])
        assert listed.returncode == 0, listed.stderr
        assert re.search(r": [1-9]\d* workloads, [1-9]\d* records for ", listed.stdout)
    # Plain TVM opens it and compiles the best schedule; the kernel computes A @ B.
    database = ms.database.JSONDatabase(
        str(exported / "database_workload.json"),
        str(exported / "database_tuning_record.json"),
        allow_missing=False,
    )
    mod = catalog_workload("matmul", get_operator("matmul").Params(**TINY)).mod
    target = tvm.target.Target(resolve_target("host").canonical)
    assert len(database.get_top_k(database.commit_workload(mod), 1)) == 1
    scheduled = ms.tir_integration.compile_tir(database, mod, target)
    assert scheduled is not None
    lib = tvm.compile(scheduled.mod, target=target)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (TINY["M"], TINY["K"])).astype("float32")
    b = rng.uniform(-1, 1, (TINY["K"], TINY["N"])).astype("float32")
    out = tvm.runtime.empty((TINY["M"], TINY["N"]), "float32", tvm.cpu(0))
    lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)

    # Import into a fresh service: the workloads and records arrive, and a verification job
    # is queued; the target's worker (here the job runner, in process) verifies and publishes.
    fresh = tmp_path / "b"
    with _server(fresh) as server, TunehubClient(server.url) as client:
        imported = cli(["import", str(exported), "--target", "host", "--server", server.url])
        assert imported.returncode == 0, imported.stderr
        again = client.import_database(exported, "host")  # idempotent: nothing new
        assert again["records_added"] == 0 and again["records_known"] >= 1
        engine = make_engine(f"sqlite:///{fresh / 'tunehub.db'}")
        store = Store(engine, tvm_series=current_tvm_series())
        target_row = store.catalog.find_target(target_key(resolve_target("host").canonical))
        context = WorkerContext(
            store=store, artifact_dir=fresh / "artifacts", worker_name="pytest-import",
            stale_after=timedelta(seconds=60), target_ids=(target_row.id,),
        )  # fmt: skip
        # One verification job per workload (the session's tuned store may hold several).
        assert [run_next(context) for _ in range(again["workloads"])] == ["succeeded"] * again[
            "workloads"
        ]
        assert run_next(context) == "idle"
        source = tuned_store["store"]
        original = source.records.top_k(tuned_store["workload_id"], tuned_store["target_id"], 1)
        workload = store.catalog.find_workload(
            source.catalog.get_workload(tuned_store["workload_id"]).shash
        )
        assert workload is not None  # same structural hash: the same workload
        best_record = store.records.top_k(workload.id, target_row.id, 1)[0]
        assert best_record.mean_run_us == pytest.approx(original[0].mean_run_us)
        assert json.loads(best_record.trace_json) == json.loads(original[0].trace_json)
        # The tuned workload's schedule: the session's store holds other tests' workloads too.
        (sched,) = [s for s in client.schedules()
                    if s["workload"]["structural_hash"] == workload.shash]  # fmt: skip
        assert sched["max_abs_error"] < 1e-4
        assert sched["trials"] == store.records.count(target_row.id, workload.id)
        engine.dispose()


def _refused_import(client: TunehubClient, workloads: str, records: str) -> dict:
    """The first error of an import of these two files for the host, which must be a 422."""
    body = {
        "target": "host",
        "database_workload.json": workloads,
        "database_tuning_record.json": records,
    }
    response = client.http.post("/import", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["type"] == "invalid_database", detail
    return detail


def test_a_bad_database_is_a_422_naming_the_line_and_writes_nothing(tmp_path: Path) -> None:
    import sqlite3

    good_workload = '["1", "AAAAAAAAAAA="]'  # an empty module text: the parser refuses it
    with _server(tmp_path) as server, TunehubClient(server.url) as client:
        cases = [
            ("not json\n", "", "database_workload.json line 1"),
            (good_workload + "\n", "", "database_workload.json line 1"),
            (good_workload + "\n", '[5, [[], [1e-5], {"kind": "llvm"}, []]]\n',
             "database_tuning_record.json line 1"),
            (good_workload + "\n", '[0, [[], [-1], {"kind": "llvm"}, []]]\n',
             "database_tuning_record.json line 1"),
        ]  # fmt: skip
        for workloads, records, where in cases:
            detail = _refused_import(client, workloads, records)
            assert where in detail["msg"], detail
        with pytest.raises(TunehubError) as err:  # a valid target nothing was measured on
            client.export_database('{"kind": "llvm", "mcpu": "skylake"}', tmp_path / "x")
        assert err.value.status == 404
        with pytest.raises(TunehubError) as err:  # a name no target has: nothing to export
            client.export_database("no-such-target", tmp_path / "x")
        assert err.value.status == 404
        with pytest.raises(TunehubError) as err:  # JSON tunehub refuses
            client.export_database('{"kind": "llvm", "mcpu": "nope"}', tmp_path / "x")
        assert err.value.status == 422 and err.value.detail[0]["type"] == "invalid_target"
    with sqlite3.connect(tmp_path / "tunehub.db") as db:
        for table in ("workloads", "tuning_records", "jobs"):
            assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0


def test_imported_numbers_and_traces_are_checked_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    """run_secs must be finite numbers of a plausible size (NaN, Infinity, strings and 1e-300
    were accepted, the last putting its trace first in line for verification); a deeply
    nested line is a 422, not a RecursionError; a trace the gate refuses, or one that does not
    replay in an isolated child, is a 422 naming the records."""
    import sqlite3

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.publish.interchange import encode_workload_line

    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    workload = encode_workload_line(spec.shash, spec.mod_json) + "\n"

    def record(trace: str, run_secs: str) -> str:
        return f'[0, [{trace}, {run_secs}, {{"kind": "llvm"}}, []]]\n'

    cases = [
        (record("[[], []]", "[NaN]"), "not a finite number"),
        (record("[[], []]", "[Infinity]"), "not a finite number"),
        (record("[[], []]", '"123"'), "list of 1 to"),
        (record("[[], []]", '["1e-5"]'), "not a finite number"),
        (record("[[], []]", "[1e-300]"), "outside"),
        ("[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        # A decision of no instruction crashed TVM's replay (SIGSEGV in the isolated child):
        # the trace gate refuses it now before anything replays it.
        (record("[[], [[0, 1]]]", "[1e-5]"), "its trace is refused"),
        # One the gate passes but that names a block the function lacks: replayed in the
        # isolated child, it fails there.
        (
            record('[[["GetSBlock", [], ["no_such_block", "main"], ["b0"]]], []]', "[1e-5]"),
            "does not replay",
        ),
    ]
    with _server(tmp_path) as server, TunehubClient(server.url) as client:
        for records, reason in cases:
            detail = _refused_import(client, workload, records)
            assert detail["loc"] == ["body", "database_tuning_record.json"], detail
            assert reason in detail["msg"], detail
    with sqlite3.connect(tmp_path / "tunehub.db") as db:
        for table in ("workloads", "tuning_records", "jobs"):
            assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0


def test_metaschedules_failed_candidates_import_as_failed_records() -> None:
    """A JSONDatabase holds failed candidates as run_secs [1e10]: they import (and teach the
    cost model nothing is there), while any other value past 1000 s is refused."""
    from tuning.publish.interchange import checked_run_secs

    assert checked_run_secs([1e10, 1e10]) == [1e10, 1e10]
    assert checked_run_secs([2e-5, 3]) == [2e-5, 3.0]
    for bad in ([1e10, 1e-5], [5e3], [0], [True]):
        with pytest.raises(ValueError):
            checked_run_secs(bad)

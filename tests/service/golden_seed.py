"""The golden record's deployment: a fresh SQLite store and a real server over it (auth on, no
reaper, no worker), seeded the same way every time: through HTTP where the API can do it and
through the store where only a worker can (tests/service/test_api_golden.py tours it)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.keys import tvm_series
from schedules_db.tokens import TokenStore
from schedules_db.values import NewRecord, NewSchedule
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread
from tests.service.golden_record import Normaliser, Recorder

API = "/api/v1"
# Explicit targets (never "host": the record must not depend on the machine it runs on).
SKYLAKE = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 3}  # label skylake-avx512-3c
CUDA = {"kind": "cuda", "arch": "sm_90"}  # label cuda-sm_90
CASCADE = {"kind": "llvm", "mcpu": "cascadelake", "num-cores": 6}  # label cascadelake-6c
UNKNOWN = {"kind": "llvm", "mcpu": "znver3", "num-cores": 5}  # valid, never stored

TVM_VERSION = "0.27.0"  # the records' TVM version (series 0.27, the installed one's)
WORKER = timedelta(seconds=60)
# Three MetaSchedule traces of the tiny matmul (they replay on it: the import checks that).
TRACES = [
    '[[["GetSBlock",[],["C","main"],["b0"]],["GetLoops",["b0"],[],["l1","l2","l3"]],'
    f'["Split",["l2",{a},{b}],[true,false],["l4","l5"]]],[]]'
    for a, b in ((4, 8), (8, 4), (2, 16))
]
ARTIFACT = b"tunehub golden record: the library of schedule 1\n"
TIR_SOURCE = """@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                v_i = T.axis.spatial(16, i)
                B[v_i] = A[v_i] * T.float32(2.0)
"""

# Who asks: a token per identity ("anonymous" sends none; "stranger" a well-formed unknown one).
TOKENS = {
    "root": ["admin"],
    "alice": ["submit"],
    "reader": ["read"],
    "mallory": ["submit"],  # revoked before the server starts
}


@dataclass
class Seeded:
    """The recorder over a seeded server, and the app (for its route table)."""

    api: Recorder
    app: Any
    ids: dict[str, int]


def job_body(operator: str, params: dict[str, Any], target: Any, trials: int, **extra: Any) -> dict:
    """A catalog job's body."""
    return {"operator": {"name": operator, "params": params}, "target": target, "trials": trials,
            **extra}  # fmt: skip


def _publish_job_1(store: Store, artifacts: Path, job_id: int) -> None:
    """What worker-a does with job 1: claim it, measure three candidates (one fails), report
    progress, write the artifact and publish the best."""
    job = store.jobs.get(job_id)
    assert store.jobs.claim(job_id, "worker-a", WORKER)
    for trace, secs in zip(TRACES, ([2e-5, 2.2e-5, 2.1e-5], [1.5e-5] * 3, [1e10]), strict=True):
        record = NewRecord(
            trace, secs, [["TENSOR", "float32", [32, 32]]] * 3, TVM_VERSION, failed=secs == [1e10]
        )
        assert store.records.add(job.workload_id, job.target_id, job_id, record)
    assert store.jobs.update_progress(job_id, "worker-a", 3, 15.0)
    best = store.records.top_k(job.workload_id, job.target_id, 1)[0]
    sha = hashlib.sha256(ARTIFACT).hexdigest()
    (artifacts / sha[:2]).mkdir(parents=True, exist_ok=True)
    (artifacts / sha[:2] / f"{sha}.so").write_bytes(ARTIFACT)
    schedule = NewSchedule(
        record_id=best.id, latency_us=15.0, untuned_latency_us=120.0, max_abs_error=2.5e-7,
        tir="# the scheduled TIR of matmul 32x32x32\n", artifact_sha256=sha,
        artifact_size=len(ARTIFACT), artifact_path=f"{sha[:2]}/{sha}.so",
    )  # fmt: skip
    assert store.schedules.publish(job_id, "worker-a", schedule) is not None


@contextmanager
def seeded_deployment(tmp_path: Path) -> Iterator[Seeded]:
    """A fresh SQLite store and a real server over it (auth on, no reaper, no worker), seeded
    through HTTP where the API can do it and through the store where only a worker can."""
    import tvm

    data_dir = tmp_path / "data"
    settings = Settings(
        data_dir=data_dir,
        auth=True,
        write_rate_per_s=0,  # the rate limit depends on timing; the job cap answers 429 instead
        parse_seconds_per_minute=0,  # so does the parse-time quota
        max_active_jobs=5,
        max_trials=500,
    )
    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=tvm_series(tvm.__version__))
    tokens = TokenStore(engine)
    texts = {"stranger": "thb_" + "0" * 43}
    for name, scopes in TOKENS.items():
        expires = None if name != "alice" else _in_days(30)
        texts[name], _ = tokens.create(name, scopes, expires)
    tokens.revoke("mallory")
    app = create_app(settings, run_reaper=False)
    ids: dict[str, int] = {}
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, timeout=120) as http,
    ):
        api = Recorder(http, texts, Normaliser(str(tmp_path)))
        jobs = API + "/jobs"
        first = job_body("matmul", dict(TINY), SKYLAKE, 8)
        # Job 1 (target 1, workload 1), done by worker-a below.
        created = api.call("POST", jobs, body=first, why="a queued job; no worker yet")
        assert created.status_code == 201, created.text
        target_1 = store.catalog.find_target(created.json()["target"]["key"]).id
        store.fleet.register("worker-a", "node-a", 1001, [target_1], {"cpu_model": "golden"})
        # Job 2 (alice's, by target label), which she cancels.
        alice_job = job_body("matmul", {"M": 16, "N": 8, "K": 4}, "skylake-avx512-3c", 4,
                         submitted_by="mallory")  # fmt: skip
        api.call("POST", jobs, "alice", body=alice_job, why="submitted_by is ignored")
        api.call("POST", jobs + "/{job_id}/cancel", "alice", job_id=2, why="a queued job")
        _publish_job_1(store, settings.artifacts, 1)
        # Job 3: the same budget again is a cache hit.
        api.call("POST", jobs, body=first, why="a cache hit")
        # Job 4 (target 2, workload 3): worker-b fails it after a failed candidate.
        api.call("POST", jobs, body=job_body("dense", {"M": 1, "N": 64, "K": 64}, CUDA, 16))
        target_2 = store.jobs.get(4).target_id
        store.fleet.register("worker-b", "node-b", 1002, [target_2], {"gpu": "golden"},
                              {"tracker": "127.0.0.1:9190", "key": "h200"})  # fmt: skip
        assert store.jobs.claim(4, "worker-b", WORKER)
        failed = NewRecord(TRACES[0], [1e10], [], TVM_VERSION, failed=True)
        assert store.records.add(store.jobs.get(4).workload_id, target_2, 4, failed)
        assert store.jobs.fail(4, "worker-b", "RuntimeError: every candidate failed to build")
        # Job 5 (workload 4): the plain function wins; its artifact file is missing.
        api.call("POST", jobs, body=job_body("exp", {"shape": [16]}, CUDA, 4))
        assert store.jobs.claim(5, "worker-b", WORKER)
        plain = NewSchedule(None, 3.0, 3.0, 0.0, "# the plain exp\n", "ab" * 32, 1234,
                            f"{'ab'}/{'ab' * 32}.so", tvm_series=store.series)  # fmt: skip
        assert store.schedules.publish(5, "worker-b", plain) is not None
        store.fleet.stopped("worker-b")
        # Job 6 (workload 5): running on worker-a, with progress.
        api.call("POST", jobs, body=job_body("softmax", {"rows": 4, "cols": 8}, SKYLAKE, 32))
        assert store.jobs.claim(6, "worker-a", WORKER)
        assert store.jobs.update_progress(6, "worker-a", 12, 42.5)
        store.fleet.heartbeat("worker-a", 6)
        # Jobs 7 and 8: queued, one on a served target and one on a target nobody serves.
        api.call("POST", jobs, body=job_body("matmul", {"M": 64, "N": 64, "K": 64}, SKYLAKE, 64,
                 priority=-5, transfer_cost_model=False, space="plain"))  # fmt: skip
        api.call("POST", jobs, body=job_body("relu", {"shape": [4, 8]}, CUDA, 8))
        # Job 9 (workload 8): raw TIR, parsed in isolation.
        tir = {"tir": {"format": "tvmscript", "source": TIR_SOURCE}, "target": SKYLAKE, "trials": 2}
        created = api.call("POST", jobs, body=tir, why="raw TIR")
        assert created.status_code == 201, created.text
        # Export target 1's database and import it for target 3: workload 9, job 10.
        exported = api.call("GET", API + "/export", query={"target": "skylake-avx512-3c"})
        assert exported.status_code == 200, exported.text
        database = {k: v for k, v in exported.json().items() if k.startswith("database_")}
        imported = api.call("POST", API + "/import", body={"target": CASCADE, **database})
        assert imported.status_code == 201, imported.text
        ids.update(target_1=target_1, target_2=target_2)
        yield Seeded(api, app, ids)
    engine.dispose()


def _in_days(days: int) -> datetime:
    return datetime.now(timezone.utc) + timedelta(days=days)

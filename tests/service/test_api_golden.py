"""A golden record of the whole HTTP API: every route's status and JSON on a seeded store.

Captured before the restructure of issue 15 so that the restructure can show it changed no
answer. One fresh SQLite store is seeded the same way every time (auth on; no worker, no
search): three targets, catalog and raw-TIR workloads, jobs in every state (queued, running
with progress, succeeded, a cache hit, cancelled, failed), tuning records (one failed), two
published schedules (one with its artifact file, one the plain function without one), two
registered workers (one live, one stopped), an import of an exported database, and four API
tokens (admin, submit with an expiry, read, revoked). What only a worker does (claim, progress,
records, finish or fail, registration) goes through the store's Python API; the rest goes
through HTTP. Then every route of the app is called (`app.routes` is enumerated: a route the
record does not cover fails the test) with valid input, with its filters, and with what it
refuses: 401, 403, 404, 413, 422 and 429 answers and their bodies.

Recorded per exchange, in order (``exchanges`` in tests/service/golden/api.json): the route,
the request (method, path and query), who asked, the request body, the status, a few headers
(content type, ETag, X-Content-SHA256, Content-Disposition, WWW-Authenticate, Retry-After,
Cache-Control) and the body: JSON as it came (object key order included: the record is
compared as text, so a response whose keys come in another order fails), server-sent events
line by line (each ``data:`` line's JSON normalised), anything else as its size and sha256.
For ``/openapi.json`` only, per path and method (``openapi``): the documented status codes,
the request body's content types and schema ``$ref`` and the parameters (name, in, required),
sorted; the rest of that document is not compared.

Normalised before recording: ISO timestamps -> ``<time>``; ETags of JSON answers (hashes of
bodies that hold timestamps) -> ``<etag>`` (the artifact's, its sha256, is kept);
``heartbeat_age_s`` -> ``<age>``; this machine's host target in ``GET /targets`` -> ``<host>``;
token texts -> ``<token>``; the temporary data folder -> ``<data_dir>``; strings over 1000
characters (the exported database's files) -> their length and sha256. Ids are kept: they are
deterministic on a fresh store. Worker names, host names, pids and fingerprints are the
seeded constants, and every target is named explicitly (never ``"host"``), so nothing here
depends on the machine (an x86-64 LLVM is assumed: the targets are skylake-avx512 and
cascadelake CPUs and an sm_90 GPU).

After the restructure (issue 15), the only difference allowed is that response schemas are
added to the OpenAPI document (``content`` of responses), which this record does not compare;
every exchange, status code, parameter and request body must stay as it is here.

Regenerate (only for an intended change of the API, and say why in the commit):
``TUNEHUB_UPDATE_GOLDEN=1 python -m pytest tests/service/test_api_golden.py`` writes the file
and passes; without it a mismatch fails with a unified diff of the record.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

import service
from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.keys import tvm_series
from schedules_db.tokens import TokenStore
from schedules_db.values import NewRecord, NewSchedule
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread
from tests.service.golden_record import (
    Normaliser,
    Recorder,
    app_routes,
    changed_parts,
    openapi_summary,
)
from tests.tuning.model_cases import TINY_RELAX

GOLDEN = Path(__file__).with_name("golden") / "api.json"
UPDATE = os.environ.get("TUNEHUB_UPDATE_GOLDEN", "").lower() in ("1", "true", "yes", "on")
API = "/api/v1"
DIFF_LINES = 200

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


# ---------------------------------------------------------------- the seeded deployment
@dataclass
class Seeded:
    """The recorder over a seeded server, and the app (for its route table)."""

    api: Recorder
    app: Any
    ids: dict[str, int]


def _job(operator: str, params: dict[str, Any], target: Any, trials: int, **extra: Any) -> dict:
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


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    """A fresh SQLite store and a real server over it (auth on, no reaper, no worker), seeded
    through HTTP where the API can do it and through the store where only a worker can."""
    import tvm

    data_dir = tmp_path / "data"
    settings = Settings(
        data_dir=data_dir,
        auth=True,
        write_rate_per_s=0,  # the rate limit depends on timing; the job cap answers 429 instead
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
        first = _job("matmul", dict(TINY), SKYLAKE, 8)
        # Job 1 (target 1, workload 1), done by worker-a below.
        created = api.call("POST", jobs, body=first, why="a queued job; no worker yet")
        assert created.status_code == 201, created.text
        target_1 = store.catalog.find_target(created.json()["target"]["key"]).id
        store.fleet.register("worker-a", "node-a", 1001, [target_1], {"cpu_model": "golden"})
        # Job 2 (alice's, by target label), which she cancels.
        alice_job = _job("matmul", {"M": 16, "N": 8, "K": 4}, "skylake-avx512-3c", 4,
                         submitted_by="mallory")  # fmt: skip
        api.call("POST", jobs, "alice", body=alice_job, why="submitted_by is ignored")
        api.call("POST", jobs + "/{job_id}/cancel", "alice", job_id=2, why="a queued job")
        _publish_job_1(store, settings.artifacts, 1)
        # Job 3: the same budget again is a cache hit.
        api.call("POST", jobs, body=first, why="a cache hit")
        # Job 4 (target 2, workload 3): worker-b fails it after a failed candidate.
        api.call("POST", jobs, body=_job("dense", {"M": 1, "N": 64, "K": 64}, CUDA, 16))
        target_2 = store.jobs.get(4).target_id
        store.fleet.register("worker-b", "node-b", 1002, [target_2], {"gpu": "golden"},
                              {"tracker": "127.0.0.1:9190", "key": "h200"})  # fmt: skip
        assert store.jobs.claim(4, "worker-b", WORKER)
        failed = NewRecord(TRACES[0], [1e10], [], TVM_VERSION, failed=True)
        assert store.records.add(store.jobs.get(4).workload_id, target_2, 4, failed)
        assert store.jobs.fail(4, "worker-b", "RuntimeError: every candidate failed to build")
        # Job 5 (workload 4): the plain function wins; its artifact file is missing.
        api.call("POST", jobs, body=_job("exp", {"shape": [16]}, CUDA, 4))
        assert store.jobs.claim(5, "worker-b", WORKER)
        plain = NewSchedule(None, 3.0, 3.0, 0.0, "# the plain exp\n", "ab" * 32, 1234,
                            f"{'ab'}/{'ab' * 32}.so", tvm_series=store.series)  # fmt: skip
        assert store.schedules.publish(5, "worker-b", plain) is not None
        store.fleet.stopped("worker-b")
        # Job 6 (workload 5): running on worker-a, with progress.
        api.call("POST", jobs, body=_job("softmax", {"rows": 4, "cols": 8}, SKYLAKE, 32))
        assert store.jobs.claim(6, "worker-a", WORKER)
        assert store.jobs.update_progress(6, "worker-a", 12, 42.5)
        store.fleet.heartbeat("worker-a", 6)
        # Jobs 7 and 8: queued, one on a served target and one on a target nobody serves.
        api.call("POST", jobs, body=_job("matmul", {"M": 64, "N": 64, "K": 64}, SKYLAKE, 64,
                 priority=-5, transfer_cost_model=False, space="plain"))  # fmt: skip
        api.call("POST", jobs, body=_job("relu", {"shape": [4, 8]}, CUDA, 8))
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


# ---------------------------------------------------------------- the tour
def _tour(api: Recorder) -> None:
    """Every route: valid input, filters, and what it refuses."""
    call = api.call
    jobs, job, schedules = API + "/jobs", API + "/jobs/{job_id}", API + "/schedules"
    call("GET", "/healthz", who="anonymous")
    call("GET", "/openapi.json", who="anonymous")
    for page in ("/docs", "/redoc"):
        call("GET", page, who="anonymous")

    # Who is asking.
    for who in ("root", "alice", "reader"):
        call("GET", API + "/me", who)
    for who in ("anonymous", "stranger", "mallory"):
        call("GET", API + "/me", who, why="no usable token")
    call("GET", jobs, "anonymous", why="reads need a token too (anonymous_reads off)")

    # Catalog, targets, workers.
    call("GET", API + "/operators")
    call("GET", API + "/targets")
    call("GET", API + "/workers")

    # Jobs.
    call("GET", jobs)
    for query in ({"state": "queued"}, {"state": "succeeded"}, {"state": "running"},
                  {"state": "cancelled", "limit": 1}, {"limit": 2}):  # fmt: skip
        call("GET", jobs, query=query)
    for query in ({"sort": "trials", "order": "asc"}, {"limit": 3, "offset": 3},
                  {"sort": "best", "offset": 9}):  # fmt: skip
        call("GET", jobs, query=query)
    for query in ({"state": "done"}, {"limit": 0}, {"limit": 1001}, {"limit": "many"},
                  {"sort": "speed"}, {"order": "up"}, {"offset": -1}):  # fmt: skip
        call("GET", jobs, query=query)
    for job_id in range(1, 11):
        call("GET", job, job_id=job_id)
    call("GET", job, job_id=999)
    for bad in (0, 2**31, "abc"):
        call("GET", job, job_id=bad)
    for job_id in (1, 2, 3, 4):  # final jobs: the stream ends
        call("GET", job + "/events", job_id=job_id)
    call("GET", job + "/events", job_id=999)
    call("GET", job + "/events", job_id=0)

    # Schedules and artifacts.
    call("GET", schedules)
    for query in (
        {"operator": "matmul"},
        {"operator": "nope"},
        {"target": "skylake-avx512-3c"},
        {"target": json.dumps(SKYLAKE)},
        {"target": "cuda-sm_90"},
        {"target": json.dumps(UNKNOWN)},
        {"workload_id": 4},
        {"limit": 1},
        {"limit": 1, "offset": 1},
        {"sort": "gflops"},
        {"sort": "latency", "order": "asc"},
        {"dtype": "float32", "layout": "NCHW"},
        {"origin": "user"},
        {"space": "packed"},
    ):
        call("GET", schedules, query=query)
    for query in ({"target": "nope"}, {"workload_id": 0}, {"limit": 1001}, {"sort": "name"},
                  {"origin": "elsewhere"}, {"offset": -1}):  # fmt: skip
        call("GET", schedules, query=query)
    one = call("GET", schedules + "/{schedule_id}", schedule_id=1)
    call("GET", schedules + "/{schedule_id}", headers={"If-None-Match": one.headers["etag"]},
         schedule_id=1, why="ETag still current")  # fmt: skip
    call("GET", schedules + "/{schedule_id}", schedule_id=2, why="the plain function")
    call("GET", schedules + "/{schedule_id}", schedule_id=999)
    call("GET", schedules + "/{schedule_id}", schedule_id=2**31)
    artifact = schedules + "/{schedule_id}/artifact"
    got = call("GET", artifact, schedule_id=1, keep_etag=True)
    call("GET", artifact, headers={"If-None-Match": got.headers["etag"]}, schedule_id=1,
         keep_etag=True)  # fmt: skip
    call("GET", artifact, schedule_id=2, why="its file is missing")
    call("GET", artifact, schedule_id=999)
    call("GET", artifact, schedule_id=0)

    # Workloads.
    call("GET", API + "/workloads")
    for query in ({"operator": "matmul"}, {"operator": "nope"}, {"limit": 2}):
        call("GET", API + "/workloads", query=query)
    call("GET", API + "/workloads", query={"limit": 0})
    for workload_id in (1, 3, 4, 9):
        call("GET", API + "/workloads/{workload_id}", workload_id=workload_id)
    call("GET", API + "/workloads/{workload_id}", workload_id=999)
    call("GET", API + "/workloads/{workload_id}", workload_id=0)
    records = API + "/workloads/{workload_id}/records"
    call("GET", records, workload_id=1, query={"target": "skylake-avx512-3c"})
    call("GET", records, workload_id=1, query={"target": "skylake-avx512-3c", "space": "nope"})
    call("GET", records, workload_id=1, query={"target": "skylake-avx512-3c", "limit": 1})
    call("GET", records, workload_id=1, query={"target": "cuda-sm_90"}, why="never stored")
    call("GET", records, workload_id=999, query={"target": "skylake-avx512-3c"})
    call("GET", records, workload_id=1)
    call("GET", records, workload_id=1, query={"target": "nope"})

    # Export and import.
    key = api.exchanges[0]["json"]["target"]["key"]
    for target in (key, "cuda-sm_90", json.dumps(CASCADE)):
        call("GET", API + "/export", query={"target": target})
    call("GET", API + "/export", query={"target": json.dumps(UNKNOWN)}, why="nothing measured")
    call("GET", API + "/export", query={"target": "nope"})
    call("GET", API + "/export")
    bad_imports = [
        {"target": CASCADE, "database_workload.json": "not json\n",
         "database_tuning_record.json": ""},
        {"target": CASCADE, "database_workload.json": "", "database_tuning_record.json": ""},
        {"target": CASCADE, "database_workload.json": "", "extra": 1},
    ]  # fmt: skip
    for body in bad_imports:
        call("POST", API + "/import", body=body)
    call("POST", API + "/import", "alice", body=bad_imports[1], why="a target no worker has")
    call("POST", API + "/import", "reader", body=bad_imports[1])

    # Cancelling.
    cancel = job + "/cancel"
    call("POST", cancel, "alice", job_id=7, why="root's job")
    call("POST", cancel, job_id=7, why="queued: cancelled at once")
    call("POST", cancel, job_id=6, why="running: cancel_requested")
    call("POST", cancel, job_id=1, why="final: unchanged")
    call("POST", cancel, job_id=999)
    call("POST", cancel, job_id=0)
    call("POST", cancel, content=b"x" * 70_000, job_id=8, why="over the 64 KiB body cap")
    call("GET", jobs, query={"limit": 3})

    # Refused job bodies (root has 4 unfinished jobs: under the cap of 5).
    tiny = _job("matmul", dict(TINY), SKYLAKE, 8)
    refused = [
        (b'{"trials": 8,', None),
        (None, {}),
        (None, {**tiny, "tir": {"format": "tvmscript", "source": TIR_SOURCE}}),
        (None, {**tiny, "operator": {"name": "conv9d", "params": {}}}),
        (None, _job("matmul", {"M": 0, "N": 4.5}, SKYLAKE, 8)),
        (None, {**tiny, "trials": 501}),
        (None, {**tiny, "trials": "8"}),
        (None, {**tiny, "target": "llvm -mcpu=znver4"}),
        (None, {**tiny, "target": {"kind": "quantum"}}),
        (None, {**tiny, "space": "dense"}),
        (None, _job("softmax", {"rows": 4, "cols": 8}, SKYLAKE, 8, space="packed")),
        (None, {**tiny, "unknown": 1}),
        (None, {**tiny, "tir": {"format": "c", "source": "int main;"}, "operator": None}),
        (b'{"operator": {"name": "matmul", "params": {"M": NaN}}, "trials": 8}', None),
    ]
    for content, body in refused:
        call("POST", jobs, body=body, content=content)
    tir = {"tir": {"format": "tvmscript", "source": TIR_SOURCE}, "target": SKYLAKE, "trials": 2}
    call("POST", jobs, "alice", body=tir, why="raw TIR needs submit-code")
    call("POST", jobs, "alice", body={**tiny, "priority": 10}, why="priority > 0 needs admin")
    call("POST", jobs, "alice", body={**tiny, "target": CASCADE}, why="no worker has it")
    call("POST", jobs, "reader", body=tiny)
    call("POST", jobs, "anonymous", body=tiny)
    call("POST", jobs, body=_job("matmul", dict(TINY), CASCADE, 16), why="root's 5th")
    call("POST", jobs, body=tiny, why="over the cap of 5 unfinished jobs")
    call("GET", API + "/targets")
    call("GET", API + "/workers")

    # The build side's reads (added after the restructure: issue 16's lookup).
    shash = api.http.get(API + "/workloads/1", headers=_as(api, "root")).json()["structural_hash"]
    lookup = API + "/lookup"
    found = call("POST", lookup, body={"target": SKYLAKE, "workloads": [shash, "12345"]})
    key = found.json()["target"]["key"]
    call("POST", lookup, "reader", body={"target": "skylake-avx512-3c", "workloads": [shash]})
    call("POST", lookup, body={"target": UNKNOWN, "workloads": [shash]}, why="never stored")
    call("POST", lookup, "anonymous", body={"workloads": [shash]})
    call("POST", lookup, body={"workloads": ["x1"], "target": "nowhere"})
    top = API + "/top-records"
    call("GET", top, query={"workload": shash, "target": key, "k": 2})
    call("GET", top, query={"workload": shash, "target": "0" * 32}, why="a target with none")
    call("GET", top, query={"workload": "abc", "target": key, "k": 0})

    # Fetch by key (issue 16): the verified best of a catalog key or a workload hash.
    best = schedules + "/best"
    call("GET", best, "reader", query={"workload": shash, "target": "skylake-avx512-3c"})
    params = json.dumps({"M": 64, "N": 64, "K": 64})
    call("GET", best, query={"operator": "matmul", "params": params, "target": "skylake-avx512-3c"},
         why="nothing tuned: 404 not_tuned naming the key")  # fmt: skip
    call("GET", best, query={"operator": "matmul", "params": '{"M": 0}', "target": "host"})
    call("GET", best, query={"target": "host"}, why="neither operator nor workload")
    call("GET", best, query={"workload": "12a", "target": "host"})

    # Whole-model jobs (issue 16): parsed in the jail, one job per task.
    models, model = API + "/models", API + "/models/{model_id}"
    upload = {"name": "mlp", "format": "relax", "source": TINY_RELAX, "target": SKYLAKE,
              "trials": 4, "inputs": [{"name": "x", "shape": [4, 16]},
                                      {"name": "w", "shape": [16, 8]}]}  # fmt: skip
    call("POST", models, "alice", body=upload, why="a model is code: submit-code")
    call("POST", models, body=upload, why="root is at its cap of unfinished jobs")
    queued = api.http.get(jobs, params={"state": "queued"}, headers=_as(api, "root")).json()
    for found in queued:
        if found["submitted_by"] == "root":
            call("POST", job + "/cancel", job_id=found["id"], why="make room")
    created = call("POST", models, body=upload)
    model_id = created.json()["id"]
    call("GET", models)
    call("GET", model, "reader", model_id=model_id)
    call("GET", model, model_id=987654)
    call("GET", model + "/artifact", model_id=model_id, why="not compiled yet")
    call("POST", model + "/cancel", "alice", model_id=model_id, why="not alice's")
    call("POST", model + "/cancel", model_id=model_id)
    call("POST", models, body={**upload, "format": "onnx", "source": "not base64!"})
    call("POST", models, body={**upload, "inputs": [{"name": "x", "shape": [0]}]})

    # Neighbour answers (issue 16): opt-in; without the field a lookup answers as before.
    call("POST", lookup, body={"target": SKYLAKE, "workloads": [shash, "12345"],
                               "allow_neighbour": True})  # fmt: skip
    call("POST", lookup, body={"target": SKYLAKE, "workloads": [shash], "allow_neighbour": "maybe"})

    # A build's missing tasks, sent to be tuned (issue 16, tune_missing).
    tasks = API + "/tasks"
    sent = {"target": SKYLAKE, "tasks": [{"name": "fused_matmul_relu1", "module": _task_json()}]}
    call("POST", tasks, "alice", body=sent, why="a task module is code: submit-code")
    call("POST", tasks, body={**sent, "tasks": [{"name": "x", "module": "{not json"}]})
    call("POST", tasks, body={**sent, "tasks": []})
    call("POST", tasks, body=sent, why="no tuned neighbour of its kind: a tuning job")
    call("POST", tasks, body=sent, why="sent again: the job under way, not a second one")

    # The dashboard's login (issue 17): a token for a session cookie, and logout. Last: the
    # recorder's client keeps the cookie, which authenticates what it sends without a token.
    session, logout = "/dashboard/session", "/dashboard/logout"
    call("POST", session, "anonymous", body={"token": "thb_unknown"})
    call("POST", session, "anonymous", body={"token": ""})
    call("POST", session, "anonymous", body={"token": api.tokens["reader"]})
    call("GET", API + "/me", "anonymous", why="the session cookie identifies the reader")
    call("POST", logout, "anonymous", why="a session's writes need its CSRF token")
    api.http.cookies.clear()
    call("POST", logout, "anonymous", why="no session: nothing to end")


def _task_json() -> str:
    """TINY_RELAX's one task as a build sends it: the function MetaSchedule queries, TVM JSON."""
    import tvm
    from tvm.script.parser.core.entry import parse

    from tuning.models.pipeline import tuning_pipeline

    target = tvm.target.Target(SKYLAKE)
    fused = tuning_pipeline(parse(TINY_RELAX.replace("from tvm.script import", "#")), target)
    func = fused["fused_matmul_relu1"]
    return str(tvm.ir.save_json(tvm.IRModule({"main": func.with_attr("global_symbol", "main")})))


def _as(api: Recorder, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.tokens[who]}"}


def test_every_route_answers_as_the_golden_record_says(seeded: Seeded) -> None:
    here = Path(__file__).resolve().parents[2]
    assert Path(service.__file__).resolve().is_relative_to(here), (
        f"service is imported from {service.__file__}, not this checkout ({here}): run from "
        "its root or set PYTHONPATH"
    )
    api = seeded.api
    _tour(api)

    served = app_routes(seeded.app)
    covered = {entry["route"] for entry in api.exchanges}
    assert not served - covered, f"routes the golden record does not cover: {served - covered}"
    assert not covered - served, f"recorded routes the app does not serve: {covered - served}"
    assert api.openapi is not None
    record = {
        "about": "tests/service/test_api_golden.py: regenerate with TUNEHUB_UPDATE_GOLDEN=1",
        "routes": sorted(covered),
        "exchanges": api.exchanges,
        "openapi": openapi_summary(api.openapi),
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
        return
    assert GOLDEN.is_file(), f"{GOLDEN} is missing: run with TUNEHUB_UPDATE_GOLDEN=1"
    golden = GOLDEN.read_text(encoding="utf-8")
    if golden != text:
        diff = list(
            difflib.unified_diff(
                golden.splitlines(), text.splitlines(), "golden/api.json", "live", lineterm=""
            )
        )
        shown = "\n".join(diff[:DIFF_LINES])
        more = f"\n... {len(diff) - DIFF_LINES} more diff lines" if len(diff) > DIFF_LINES else ""
        pytest.fail(
            f"the API no longer answers as {GOLDEN.name} records (regenerate with "
            f"TUNEHUB_UPDATE_GOLDEN=1 only for an intended change)\n"
            f"{changed_parts(json.loads(golden), record)}\n{shown}{more}",
            pytrace=False,
        )

"""A golden record of the whole HTTP API: every route's status and JSON on a seeded store.

Captured before the restructure of issue 15 so that the restructure can show it changed no
answer. One fresh SQLite store is seeded the same way every time (tests/service/golden_seed.py;
auth on; no worker, no search): three targets, catalog and raw-TIR workloads, jobs in every
state (queued, running with progress, succeeded, a cache hit, cancelled, failed), tuning
records (one failed), two published schedules (one with its artifact file, one the plain
function without one), two registered workers (one live, one stopped), an import of an
exported database, and four API tokens (admin, submit with an expiry, read, revoked). What only
a worker does (claim, progress, records, finish or fail, registration) goes through the store's
Python API; the rest goes through HTTP. Then every route of the app is called (`app.routes` is
enumerated: a route the record does not cover fails the test) with valid input, with its
filters, and with what it refuses: 401, 403, 404, 413, 422 and 429 answers and their bodies.

Recorded per exchange, in order (``exchanges`` in tests/service/golden/api.json): the route,
the request (method, path and query), who asked, the request body, the status, a few headers
(content type, ETag, X-Content-SHA256, Content-Disposition, WWW-Authenticate, Retry-After,
Cache-Control) and the body: JSON as it came (object key order included: the record is
compared as text, so a response whose keys come in another order fails), server-sent events
line by line (each ``data:`` line's JSON normalised), anything else as its size and sha256.
``/metrics`` as its families' names and types (their values change from run to run).
For ``/openapi.json`` only, per path and method (``openapi``): the documented status codes,
the request body's content types and schema ``$ref`` and the parameters (name, in, required),
sorted; the rest of that document is not compared.

Normalised before recording: ISO timestamps -> ``<time>``; ETags of JSON answers (hashes of
bodies that hold timestamps) -> ``<etag>`` (the artifact's, its sha256, is kept);
``heartbeat_age_s`` -> ``<age>``; an error body's ``request_id`` -> ``<request_id>``; this
machine's host target in ``GET /targets`` -> ``<host>``; token texts -> ``<token>``; the
temporary data folder -> ``<data_dir>``; strings over 1000 characters (the exported
database's files) -> their length and sha256. Ids are kept: they are
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
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import service
from tests.conftest import TINY
from tests.service.golden_record import (
    Recorder,
    app_routes,
    changed_parts,
    openapi_summary,
)
from tests.service.golden_seed import (
    API,
    CASCADE,
    SKYLAKE,
    TIR_SOURCE,
    UNKNOWN,
    Seeded,
    job_body,
    seeded_deployment,
)
from tests.tuning.model_cases import TINY_RELAX

GOLDEN = Path(__file__).with_name("golden") / "api.json"
UPDATE = os.environ.get("TUNEHUB_UPDATE_GOLDEN", "").lower() in ("1", "true", "yes", "on")
DIFF_LINES = 200


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    """The seeded deployment (`tests.service.golden_seed`), fresh for the test."""
    with seeded_deployment(tmp_path) as deployment:
        yield deployment


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
    tiny = job_body("matmul", dict(TINY), SKYLAKE, 8)
    refused = [
        (b'{"trials": 8,', None),
        (None, {}),
        (None, {**tiny, "tir": {"format": "tvmscript", "source": TIR_SOURCE}}),
        (None, {**tiny, "operator": {"name": "conv9d", "params": {}}}),
        (None, job_body("matmul", {"M": 0, "N": 4.5}, SKYLAKE, 8)),
        (None, {**tiny, "trials": 501}),
        (None, {**tiny, "trials": "8"}),
        (None, {**tiny, "target": "llvm -mcpu=znver4"}),
        (None, {**tiny, "target": {"kind": "quantum"}}),
        (None, {**tiny, "space": "dense"}),
        (None, job_body("softmax", {"rows": 4, "cols": 8}, SKYLAKE, 8, space="packed")),
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
    call("POST", jobs, body=job_body("matmul", dict(TINY), CASCADE, 16), why="root's 5th")
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

    # What an operator's Prometheus scrapes (issue 37): a token with the read scope.
    call("GET", "/metrics", "anonymous", why="the metrics need a token, whatever anonymous reads")
    call("GET", "/metrics", "reader")


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

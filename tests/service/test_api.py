"""The REST API over a real uvicorn server (SQLite store, SQLite broker), without workers."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from schedules_db.tables import JobRow, TargetRow, WorkloadRow
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread
from tests.service.rows import row_counts

MAX_TRIALS = 500


def _server(
    data_dir: Path, database_url: str | None = None, artifact_dir: Path | None = None
) -> ServerThread:
    settings = Settings(
        data_dir=data_dir,
        database_url=database_url,
        artifact_dir=artifact_dir,
        max_trials=MAX_TRIALS,
        write_rate_per_s=0,  # hundreds of bad bodies in a row: the rate limit has its own tests
    )
    return ServerThread(create_app(settings, run_reaper=False))


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("api")
    with _server(data_dir) as server, httpx.Client(base_url=server.url + "/api/v1") as client:
        yield client, data_dir


def _body(
    params: object = None, target: object = "host", trials: object = 8, name: str = "matmul"
) -> dict:
    return {
        "operator": {"name": name, "params": params if params is not None else dict(TINY)},
        "target": target,
        "trials": trials,
    }


@pytest.mark.parametrize(
    "body, loc, kind",
    [
        (_body(name="conv9d"), ["body", "operator", "name"], "unknown_operator"),
        (
            _body({"M": -1, "N": 4, "K": 4}),
            ["body", "operator", "params", "M"],
            "greater_than_equal",
        ),
        (
            _body({"M": 0, "N": 4, "K": 4}),
            ["body", "operator", "params", "M"],
            "greater_than_equal",
        ),
        (_body({"M": 4, "N": 1.5, "K": 4}), ["body", "operator", "params", "N"], "int_type"),
        (
            _body({"M": 4, "N": 4, "K": 10**9}),
            ["body", "operator", "params", "K"],
            "less_than_equal",
        ),
        (_body({"M": 8192, "N": 8192, "K": 8192}), ["body", "operator", "params"], "value_error"),
        (_body({"M": 4, "N": 4}), ["body", "operator", "params", "K"], "missing"),
        (_body(target={"kind": "quantum"}), ["body", "target", "kind"], "invalid_target"),
        (_body(target="llvm -mcpu=znver4"), ["body", "target"], "invalid_target"),
        (_body(trials=0), ["body", "trials"], "greater_than_equal"),
        (_body(trials=-5), ["body", "trials"], "greater_than_equal"),
        (_body(trials=MAX_TRIALS + 1), ["body", "trials"], "less_than_equal"),
        (_body(trials="many"), ["body", "trials"], "int_type"),
        ({**_body(), "space": "dense"}, ["body", "space"], "literal_error"),
        (
            {**_body({"rows": 4, "cols": 8}, name="softmax"), "space": "packed"},
            ["body", "space"],
            "space_unavailable",
        ),
        (
            {**_body(target={"kind": "cuda", "arch": "sm_90"}), "space": "packed"},
            ["body", "space"],
            "space_unavailable",
        ),
    ],
)
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(
    api: tuple[httpx.Client, Path], body: dict, loc: list, kind: str
) -> None:
    client, data_dir = api
    before = row_counts(data_dir)
    response = client.post("/jobs", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"] == loc and d["type"] == kind for d in detail), detail
    assert all(isinstance(d["msg"], str) and d["msg"] for d in detail)
    assert row_counts(data_dir) == before


def test_malformed_json_is_a_422(api: tuple[httpx.Client, Path]) -> None:
    client, data_dir = api
    before = row_counts(data_dir)
    response = client.post(
        "/jobs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"]
    assert row_counts(data_dir) == before


def test_a_job_is_recorded_and_handed_to_the_broker(api: tuple[httpx.Client, Path]) -> None:
    client, data_dir = api
    response = client.post("/jobs", json=_body({"M": 16, "N": 8, "K": 4}, trials=4))
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "queued" and job["cache_hit"] is False
    assert job["operator"] == {
        "name": "matmul",
        "params": {"M": 16, "N": 8, "K": 4, "dtype": "float32"},
    }
    assert job["target"]["kind"] == "llvm" and job["target"]["canonical"]["mcpu"]
    assert job["queue"] == f"tunehub.{job['target']['key']}"
    assert job["progress"] == {"trials_done": 0, "best_latency_us": None, "best_gflops": None}
    assert client.get(f"/jobs/{job['id']}").json()["state"] == "queued"
    # The real SQLite broker holds one message for this job on the target's queue.
    with sqlite3.connect(data_dir / "broker.db") as conn:
        rows = conn.execute(
            "SELECT q.name, m.payload FROM kombu_message m JOIN kombu_queue q ON m.queue_id = q.id"
        ).fetchall()
    assert [r[0] for r in rows].count(job["queue"]) >= 1
    assert any(f"[{job['id']}]" in r[1] for r in rows)
    # Cancelling a queued job is immediate.
    assert client.post(f"/jobs/{job['id']}/cancel").json()["state"] == "cancelled"
    assert client.get("/jobs", params={"state": "cancelled"}).json()[0]["id"] == job["id"]


def test_unknown_ids_are_404(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    for path in ("/jobs/999999", "/schedules/999999", "/schedules/999999/artifact"):
        response = client.get(path)
        assert response.status_code == 404 and "not found" in response.json()["detail"]
    assert client.post("/jobs/999999/cancel").status_code == 404
    assert client.get("/jobs", params={"state": "sleeping"}).status_code == 422


def test_operators_list_schemas_and_examples(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    ops = {op["name"]: op for op in client.get("/operators").json()}
    matmul = ops["matmul"]
    assert set(matmul["params_schema"]["properties"]) >= {"M", "N", "K"}
    assert matmul["params_schema"]["properties"]["M"]["maximum"] >= 1024
    assert matmul["example"]["operator"]["name"] == "matmul"
    assert matmul["dtypes"] == ["float32", "float16", "int8", "bfloat16"]
    assert ops["softmax"]["dtypes"] == ["float32", "float16"]
    assert "int8" in matmul["tolerance"] and "float16" in matmul["tolerance"]
    assert "bfloat16" in matmul["tolerance"]


def test_cache_hit_and_schedule_download_without_any_worker(
    tuned_store: dict, tmp_path: Path
) -> None:
    """The store already has a verified best for (64³-ish matmul, host): no worker runs here."""
    store = tuned_store["store"]
    with (
        _server(tmp_path, tuned_store["url"], tuned_store["artifact_dir"]) as server,
        httpx.Client(base_url=server.url + "/api/v1") as client,
    ):
        with store.session() as s:
            jobs_before = s.scalar(select(func.count(JobRow.id)))
        hit = client.post("/jobs", json=_body(trials=8))
        assert hit.status_code == 201
        job = hit.json()
        assert (job["state"], job["cache_hit"]) == ("succeeded", True)
        assert job["schedule_id"] == store.jobs.get(tuned_store["job_id"]).schedule_id
        assert job["progress"]["best_gflops"] > 0
        # "auto" takes the best of either space; the stored best came from the plain space, so
        # an explicit "plain" request is a hit too, and an explicit "packed" one is not.
        assert job["space"] == "packed"
        plain = client.post("/jobs", json={**_body(trials=8), "space": "plain"}).json()
        assert (plain["state"], plain["cache_hit"], plain["space"]) == ("succeeded", True, "plain")
        packed = client.post("/jobs", json={**_body(trials=8), "space": "packed"}).json()
        assert (packed["state"], packed["cache_hit"]) == ("queued", False)
        # A bigger budget is not a hit: it is queued for a worker.
        more = client.post("/jobs", json=_body(trials=16)).json()
        assert (more["state"], more["cache_hit"]) == ("queued", False)
        with store.session() as s:
            assert s.scalar(select(func.count(JobRow.id))) == jobs_before + 4
            assert s.scalar(select(func.count(WorkloadRow.id))) >= 1
            assert s.scalar(select(func.count(TargetRow.id))) >= 1

        listed = client.get("/schedules", params={"operator": "matmul", "target": "host"}).json()
        # The filters hold (the shared store may hold other tests' matmul schedules on host).
        assert job["schedule_id"] in [s["id"] for s in listed]
        assert {(s["workload"]["operator"], s["target"]["key"]) for s in listed} == {
            ("matmul", job["target"]["key"])
        }
        assert client.get("/schedules", params={"operator": "softmax"}).json() == []
        assert client.get("/schedules", params={"target": listed[0]["target"]["label"]}).json()
        assert client.get("/schedules", params={"target": "{bad"}).status_code == 422

        detail = client.get(f"/schedules/{job['schedule_id']}").json()
        assert detail["trace"] and "T.prim_func" in detail["tir"]
        assert detail["speedup_vs_untuned"] >= 1
        assert detail["gflops"] == pytest.approx(
            detail["workload"]["flop"] / detail["latency_us"] / 1e3
        )
        assert detail["trials"] == 8 and detail["max_abs_error"] < 1e-4
        assert (detail["space"], detail["packed_params"], detail["entry"]) == ("plain", [], "main")
        # The key it is served under, and the workload's bests per target side by side.
        from tuning.hardware.host import current_tvm_series

        assert detail["key"] == {
            "workload": detail["workload"]["structural_hash"],
            "target": detail["target"]["key"],
            "tvm_series": current_tvm_series(),
        }
        compare = client.get(f"/workloads/{detail['workload']['id']}").json()
        assert [t["best"]["id"] for t in compare["targets"]] == [detail["id"]]
        assert compare["targets"][0]["records"] >= 8
        assert compare["targets"][0]["fastest_measured_us"] > 0
        assert client.get("/workloads/999999").status_code == 404
        listed_workloads = client.get("/workloads", params={"operator": "matmul"}).json()
        assert detail["workload"]["id"] in [w["id"] for w in listed_workloads]

        response = client.get(detail["artifact"]["url"].removeprefix("/api/v1"))
        assert response.status_code == 200
        sha = hashlib.sha256(response.content).hexdigest()
        assert sha == detail["artifact"]["sha256"] == response.headers["x-content-sha256"]
        assert response.headers["etag"] == f'"{sha}"'
        again = client.get(
            detail["artifact"]["url"].removeprefix("/api/v1"), headers={"If-None-Match": f'"{sha}"'}
        )
        assert again.status_code == 304 and not again.content


def _bound_violations() -> list[tuple[str, dict, list, str]]:
    """For every catalog operator and every numeric bound in its JSON Schema (fields and list
    items): a body just past the bound, the error location and the rule FastAPI must name."""
    from tests.tuning.catalog_cases import CASES
    from tuning.catalog import list_operators

    valid = {}
    for name, params in CASES:
        valid.setdefault(name, params)
    cases = []
    for op in list_operators():
        for field, prop in op.schema()["properties"].items():
            variants = [prop, *prop.get("anyOf", [])]
            for schema in variants:
                item = schema.get("items") if schema.get("type") == "array" else None
                bounds = item if item is not None else schema
                for key, delta, rule in (
                    ("minimum", -1, "greater_than_equal"),
                    ("maximum", +1, "less_than_equal"),
                    ("exclusiveMinimum", 0, "greater_than"),
                ):
                    if key not in bounds:
                        continue
                    bad_value = bounds[key] + delta
                    params = dict(valid[op.name])
                    if item is not None:
                        base = list(params.get(field) or params["shape"])
                        params[field] = [bad_value, *base[1:]]
                        loc = ["body", "operator", "params", field, 0]
                    else:
                        params[field] = bad_value
                        loc = ["body", "operator", "params", field]
                    cases.append((op.name, params, loc, rule))
    return cases


BOUND_VIOLATIONS = _bound_violations()


def test_every_operator_has_bounded_numeric_parameters() -> None:
    from tuning.catalog import list_operators

    bounded = {name for name, *_ in BOUND_VIOLATIONS}
    assert bounded == {op.name for op in list_operators()}
    assert len(BOUND_VIOLATIONS) >= 100


@pytest.mark.parametrize(
    "name, params, loc, rule",
    BOUND_VIOLATIONS,
    ids=[f"{c[0]}-{'.'.join(map(str, c[2][3:]))}-{c[3]}" for c in BOUND_VIOLATIONS],
)
def test_each_parameter_bound_is_a_422(
    api: tuple[httpx.Client, Path], name: str, params: dict, loc: list, rule: str
) -> None:
    client, data_dir = api
    before = row_counts(data_dir)
    response = client.post("/jobs", json=_body(params, name=name))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"] == loc and d["type"] == rule for d in detail), detail
    assert row_counts(data_dir) == before


def test_dtypes_outside_an_operators_set_are_a_422(api: tuple[httpx.Client, Path]) -> None:
    """Each operator lists its dtypes in the schema; any other is refused, naming the field."""
    from tests.tuning.catalog_cases import CASES
    from tuning.catalog import list_operators

    client, data_dir = api
    valid = {}
    for name, params in CASES:
        valid.setdefault(name, params)
    before = row_counts(data_dir)
    offered = {}
    for op in list_operators():
        allowed = set(op.schema()["properties"]["dtype"]["enum"])
        offered[op.name] = allowed
        for dtype in {"float32", "float16", "int8", "float64", "bfloat16"} - allowed:
            response = client.post(
                "/jobs", json=_body({**valid[op.name], "dtype": dtype}, name=op.name)
            )
            assert response.status_code == 422, (op.name, dtype)
            detail = response.json()["detail"]
            assert [d["type"] for d in detail] == ["literal_error"], detail
            assert detail[0]["loc"] == ["body", "operator", "params", "dtype"]
    assert row_counts(data_dir) == before
    assert all("float32" in a and "float16" in a for a in offered.values())
    assert {n for n, a in offered.items() if "int8" in a} == {
        "matmul",
        "batch_matmul",
        "dense",
        "conv2d",
        "conv2d_bias_relu",
        "depthwise_conv2d",
        "max_pool2d",
    }
    assert {n for n, a in offered.items() if "bfloat16" in a} == {
        "matmul",
        "batch_matmul",
        "dense",
        "conv2d",
        "conv2d_bias_relu",
    }


def test_auto_space_is_packed_for_weights_and_plain_otherwise(
    api: tuple[httpx.Client, Path],
) -> None:
    client, _ = api
    cases = [
        (_body({"M": 8, "N": 8, "K": 8}, trials=3), "packed"),
        (_body({"rows": 4, "cols": 8}, name="softmax", trials=3), "plain"),
        ({**_body({"M": 8, "N": 8, "K": 8}, trials=3), "space": "plain"}, "plain"),
    ]
    for body, space in cases:
        job = client.post("/jobs", json=body).json()
        assert job["space"] == space, job
        assert client.get(f"/jobs/{job['id']}").json()["space"] == space
        client.post(f"/jobs/{job['id']}/cancel")

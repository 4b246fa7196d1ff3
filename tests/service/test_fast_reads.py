"""The hot read routes (one joined query, pre-serialised JSON) answer exactly what the rows
say, as the routes did when they rendered ORM rows; a schedule's ETag gives a 304."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schedules_db import Store, make_engine, upgrade_schema
from service.app.responses.jobs import job_json
from service.app.responses.schedules import schedule_detail_json, schedule_json
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.schedules_db.published import artifact_blob, publish


@pytest.fixture
def api(store_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, Store, dict]]:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series="0.27")
    ids = {(op, n): publish(store, op, n, tmp_path / "artifacts") for op in ("matmul", "dense")
           for n in (8, 16)}  # fmt: skip
    queued = store.jobs.create(store.schedules.get(ids["dense", 8][0]).workload_id,
                              store.catalog.list_targets()[0].id, 10**4, "q")  # fmt: skip
    ids["queued"] = (None, queued.id)
    settings = Settings(
        data_dir=tmp_path,
        database_url=store_url,
        artifact_dir=tmp_path / "artifacts",
        artifact_store="directory",  # where `publish` put them (auto would be the database)
    )
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1") as client,
    ):
        yield client, store, ids
    engine.dispose()


def _as_before(store: Store, schedule_id: int, detail: bool) -> dict:
    """What the route answered when it rendered the store's values one getter at a time."""
    row = store.schedules.get(schedule_id)
    parts = (
        row,
        store.catalog.get_workload(row.workload_id),
        store.catalog.get_target(row.target_id),
        store.schedules.get_artifact(row.artifact_id),
    )
    if detail:
        record = store.records.get(row.record_id) if row.record_id is not None else None
        return schedule_detail_json(*parts, record)
    return schedule_json(*parts)


def test_a_schedule_is_what_its_rows_say_and_its_etag_answers_304(api: tuple) -> None:
    client, store, ids = api
    schedule_id = ids["matmul", 16][0]
    response = client.get(f"/schedules/{schedule_id}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == _as_before(store, schedule_id, detail=True)
    etag = response.headers["etag"]
    again = client.get(f"/schedules/{schedule_id}", headers={"If-None-Match": etag})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    other = client.get(f"/schedules/{schedule_id}", headers={"If-None-Match": '"x", ' + etag})
    assert other.status_code == 304
    stale = client.get(f"/schedules/{schedule_id}", headers={"If-None-Match": '"x"'})
    assert stale.status_code == 200 and stale.json() == response.json()
    assert client.get(f"/schedules/{ids['dense', 8][0]}").headers["etag"] != etag


def test_lists_and_jobs_are_what_their_rows_say(api: tuple) -> None:
    client, store, ids = api
    workload_id = store.schedules.get(ids["matmul", 8][0]).workload_id
    queries = [{}, {"operator": "dense"}, {"operator": "nope"}, {"limit": 2}]
    for query in [*queries, {"workload_id": workload_id}]:
        listed = client.get("/schedules", params=query)
        assert listed.status_code == 200, listed.text
        expected = [
            _as_before(store, row.id, detail=False)
            for row in store.schedules.list_schedules(
                query.get("operator"), None, query.get("workload_id"), query.get("limit", 100)
            )
        ]
        assert listed.json() == expected
    for _, job_id in ids.values():
        job = store.jobs.get(job_id)
        body = client.get(f"/jobs/{job_id}").json()
        expected = job_json(
            job,
            store.catalog.get_workload(job.workload_id),
            store.catalog.get_target(job.target_id),
        )
        waiting = body.pop("waiting_for")
        expected.pop("waiting_for")
        assert body == expected
        assert (waiting is None) == (job.state != "queued")


def test_artifacts_are_served_with_their_sha256(api: tuple) -> None:
    client, store, ids = api
    schedule_id = ids["dense", 16][0]
    artifact = store.schedules.get_artifact(store.schedules.get(schedule_id).artifact_id)
    response = client.get(f"/schedules/{schedule_id}/artifact")
    assert response.status_code == 200 and response.content == artifact_blob("dense", 16)
    assert response.headers["x-content-sha256"] == artifact.sha256
    again = client.get(
        f"/schedules/{schedule_id}/artifact", headers={"If-None-Match": response.headers["etag"]}
    )
    assert again.status_code == 304
    assert client.get("/schedules/999999/artifact").status_code == 404

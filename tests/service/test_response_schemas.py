"""Every JSON route declares its response type (a `service.app.responses` TypedDict) and
``/openapi.json`` documents a body for each of its 2xx answers; the two other routes (the
artifact, the event stream) declare their media types. Each type serialises what its builder
(`service.app.responses`, `service.app.views`) returns without changing it: same keys, same
order, same values (mypy checks the keys and types statically; this checks the order and that
pydantic's validation leaves values as they are, since the hot read routes skip it)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter
from typing_extensions import NotRequired, get_type_hints, is_typeddict

from schedule_reads import ScheduleKey, TunedRecord, TunedSchedule
from schedules_db import Store, lookups, make_engine, upgrade_schema
from service.api.schedules import schedule_detail_bytes
from service.app import responses
from service.app.responses.catalog import target_json, workload_json
from service.app.responses.jobs import job_json
from service.app.responses.lookups import TaskState
from service.app.responses.schedules import schedule_detail_json, schedule_json
from service.app.views.jobs import job_view
from service.app.views.schedules import schedule_view
from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.schemas import ImportBody
from tests.schedules_db.published import publish
from tuning.publish.interchange import RECORD_FILE, WORKLOAD_FILE

# The routes that answer something other than JSON, with the media type they declare.
NOT_JSON = {
    "GET /api/v1/schedules/{schedule_id}/artifact": "application/octet-stream",
    "GET /api/v1/jobs/{job_id}/events": "text/event-stream",
    "GET /api/v1/models/{model_id}/artifact": "application/octet-stream",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """The app, not started (its routes and OpenAPI document need no store)."""
    return create_app(Settings(data_dir=tmp_path_factory.mktemp("models")), run_reaper=False)


def api_routes(app: FastAPI) -> list[tuple[str, APIRoute]]:
    """(``"METHOD path"``, route) of every API route the app serves (the dashboard's HTML pages
    are left out of the schema, and out of this)."""
    try:  # FastAPI >= 0.16x includes routers lazily: walk the effective routes
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is flat
        contexts: Any = app.routes
    else:
        contexts = iter_route_contexts(app.routes)
    found = []
    for context in contexts:
        route = getattr(context, "original_route", context)
        if isinstance(route, APIRoute) and route.include_in_schema:  # not the dashboard's pages
            found += [(f"{method} {context.path}", route) for method in sorted(context.methods)]
    return found


def _is_model(annotation: Any) -> bool:
    """A declared shape (a `service.app.responses` TypedDict or a pydantic model), or a list of
    one."""
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    return is_typeddict(annotation) or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )


def test_every_json_route_declares_a_response_model(app: FastAPI) -> None:
    routes = api_routes(app)
    assert len(routes) >= 17
    without = [name for name, route in routes if name not in NOT_JSON and not _is_model(
        route.response_model)]  # fmt: skip
    assert not without, f"JSON routes without a declared response_model: {without}"
    for name, route in routes:
        if name in NOT_JSON:
            assert route.response_model is None, name
            assert list(route.responses[200]["content"]) == [NOT_JSON[name]], name


def test_openapi_documents_a_body_for_every_success(app: FastAPI) -> None:
    document = app.openapi()
    undocumented = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            successes = {k: v for k, v in operation["responses"].items() if k.startswith("2")}
            assert successes, name
            for status, response in successes.items():
                content = response.get("content", {})
                if name in NOT_JSON:
                    assert list(content) == [NOT_JSON[name]], (name, status)
                    continue
                schema = content.get("application/json", {}).get("schema", {})
                target = schema.get("items", schema)
                if list(content) != ["application/json"] or "$ref" not in target:
                    undocumented.append(f"{name} {status}: {content}")
    assert not undocumented, "2xx answers without a response schema:\n" + "\n".join(undocumented)
    names = {f"{m.upper()} {p}" for p, ops in document["paths"].items() for m in ops}
    assert set(NOT_JSON) <= names


# ---------------------------------------------------------------- models vs. builders
def _through(model: Any, body: Any) -> str:
    """``body`` validated and serialised by ``model`` as FastAPI does it (by alias), as JSON
    text re-written by ``json`` (so that only keys, order and values are compared)."""
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    return json.dumps(json.loads(adapter.dump_json(adapter.validate_python(body), by_alias=True)))


def _same(model: Any, body: Any) -> None:
    assert _through(model, body) == json.dumps(body)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    return Store(engine, tvm_series="0.27")


def test_each_model_keeps_its_builders_json_as_it_is(store: Store, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    schedule_id, job_id = publish(store, "matmul", 8)
    schedule = store.schedules.get(schedule_id)
    assert schedule is not None and schedule.record_id is not None
    workload = store.catalog.get_workload(schedule.workload_id)
    target = store.catalog.get_target(schedule.target_id)
    artifact = store.schedules.get_artifact(schedule.artifact_id)
    record = store.records.get(schedule.record_id)
    assert workload and target and artifact and record

    _same(responses.TargetOut, target_json(target))
    _same(responses.WorkloadOut, workload_json(workload))
    parts = (schedule, workload, target, artifact)
    _same(responses.ScheduleOut, schedule_json(*parts))
    _same(responses.ScheduleOut, schedule_json(*parts, record))
    _same(responses.ScheduleOut, schedule_view(store, schedule))
    _same(responses.ScheduleDetail, schedule_detail_json(*parts, record))
    _same(responses.ScheduleDetail, schedule_detail_json(*parts, None))
    detail = lookups.schedule(store, schedule_id)
    assert detail is not None
    hot = json.loads(schedule_detail_bytes(detail))
    assert hot == schedule_detail_json(*parts, record)
    _same(responses.ScheduleDetail, hot)

    done = store.jobs.get(job_id)
    queued = store.jobs.create(workload.id, target.id, 10**4, "q", "tester")
    assert done is not None
    _same(responses.JobOut, job_json(done, workload, target))
    for live in (set(), {target.id}):
        body = job_view(store, settings, queued, live)
        assert body["waiting_for"]
        _same(responses.JobOut, body)


def test_numbers_keep_their_type_and_aliases_their_names() -> None:
    limits = {"write_rate_per_s": 0, "write_burst": 30, "max_active_jobs": 5, "max_trials": 9}
    _same(responses.Limits, limits)
    _same(responses.Limits, {**limits, "write_rate_per_s": 2.5})
    export = {"target": {"key": "k", "label": "l", "canonical": {}}, "tvm_series": "0.27",
              "workloads": 0, "records": 0, WORKLOAD_FILE: "", RECORD_FILE: ""}  # fmt: skip
    _same(responses.ExportOut, export)
    aliases = {field.alias for field in ImportBody.model_fields.values()}
    assert {WORKLOAD_FILE, RECORD_FILE} <= aliases


# ------------------------------------------------ dataclasses answered through a cast
@pytest.mark.parametrize(
    ("value_type", "shape", "left_out"),
    [
        (TunedSchedule, responses.TunedScheduleOut, {"provenance", "verified"}),  # NEIGHBOUR_ONLY
        (TunedRecord, responses.TunedRecordOut, set()),
        (ScheduleKey, responses.ScheduleKeyOut, set()),
        (TaskState, responses.UploadedTaskOut, set()),
    ],
)
def test_a_dataclass_answered_as_a_response_type_has_its_keys_in_order(
    value_type: type, shape: Any, left_out: set[str]
) -> None:
    """`POST /lookup`, `GET /top-records` and `POST /tasks` answer ``asdict`` of these values,
    cast to their response types: the fields must be the type's keys, in its order (the
    neighbour-only keys come after the always-present ones, and lookups without
    ``allow_neighbour`` drop them)."""
    fields = [f.name for f in dataclasses.fields(value_type)]
    hints = get_type_hints(shape, include_extras=True)
    keys = list(hints)
    always = [key for key, hint in hints.items() if get_origin(hint) is not NotRequired]
    assert [f for f in fields if f not in left_out] == always
    assert set(fields) <= set(keys)

"""Input that used to crash the API (a 5xx) or bloat its answers is a small 422 that names the
field, and nothing is written: non-finite numbers, deep nesting, huge ids, NUL and lone
surrogates, huge integers, bad UTF-8, and 422 bodies that echoed megabytes of input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from service.app.strict_json import MAX_DEPTH, MAX_KEYS
from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.errors import MAX_ECHO, MAX_ERRORS
from service.web.strict_input import StrictRoute
from tests.conftest import TINY, ServerThread
from tests.service.rows import row_counts

JSON = {"content-type": "application/json"}
ID_ROUTES = [
    ("GET", "/jobs/{}"),
    ("POST", "/jobs/{}/cancel"),
    ("GET", "/jobs/{}/events"),
    ("GET", "/schedules/{}"),
    ("GET", "/schedules/{}/artifact"),
    ("GET", "/workloads/{}"),
    ("GET", "/schedules?workload_id={}"),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("strict")
    settings = Settings(data_dir=data_dir, max_trials=500)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client,
    ):
        yield client, data_dir


TABLES = ("jobs", "workloads", "targets", "tuning_records")


def _job(**extra: object) -> dict:
    return {"operator": {"name": "matmul", "params": dict(TINY)}, "trials": 4, **extra}


def _post_raw(client: httpx.Client, path: str, text: str | bytes) -> httpx.Response:
    return client.post(path, content=text, headers=JSON)


def _refused(response: httpx.Response, loc: list, kind: str) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"] == loc and d["type"] == kind for d in detail), detail


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    "template, loc",
    [
        ('{"operator": {"name": "matmul", "params": {"M": %s, "N": 8, "K": 8}}, "trials": 4}',
         ["body", "operator", "params", "M"]),
        ('{"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "trials": %s}',
         ["body", "trials"]),
        ('{"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "trials": 4,'
         ' "target": {"kind": "llvm", "num-cores": %s}}', ["body", "target", "num-cores"]),
        ('{"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8, "x": [1, %s]}},'
         ' "trials": 4}', ["body", "operator", "params", "x", 1]),
    ],
)  # fmt: skip
def test_non_finite_numbers_are_a_422_naming_the_field(
    api: tuple[httpx.Client, Path], literal: str, template: str, loc: list
) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    _refused(_post_raw(client, "/jobs", template % literal), loc, "finite_number")
    assert row_counts(data_dir, TABLES) == before


def test_non_finite_run_secs_in_an_import_are_a_422(api: tuple[httpx.Client, Path]) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    body = '{"target": "host", "database_workload.json": "x", "database_tuning_record.json": NaN}'
    _refused(_post_raw(client, "/import", body), ["body", "database_tuning_record.json"],
             "finite_number")  # fmt: skip
    assert row_counts(data_dir, TABLES) == before


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200, 100_000])
def test_deep_nesting_is_a_422(api: tuple[httpx.Client, Path], depth: int) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    body = '{"operator": {"name": "matmul", "params": ' + '{"a": ' * depth + "1" + "}" * depth
    _post = _post_raw(client, "/jobs", body + '}, "trials": 4}')
    assert _post.status_code == 422, _post.text
    assert _post.json()["detail"][0]["type"] == "json_too_deep"
    assert row_counts(data_dir, TABLES) == before


def test_nesting_up_to_the_limit_is_read(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    # MAX_DEPTH levels in all: the body, operator, params and the nested lists under "x".
    inner = "[" * (MAX_DEPTH - 3) + "]" * (MAX_DEPTH - 3)
    body = '{"operator": {"name": "matmul", "params": {"x": ' + inner + '}}, "trials": 4}'
    response = _post_raw(client, "/jobs", body)
    _refused(response, ["body", "operator", "params", "M"], "missing")


def test_nesting_inside_a_json_string_is_a_422(api: tuple[httpx.Client, Path]) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    response = client.post("/jobs", json=_job(target="{" + '"a": {' * 100_000))
    assert response.status_code == 422, response.text
    assert row_counts(data_dir, TABLES) == before


def test_too_many_keys_is_a_422(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    params = {f"k{i}": 1 for i in range(MAX_KEYS + 1)}
    response = client.post("/jobs", json=_job(operator={"name": "matmul", "params": params}))
    _refused(response, ["body", "operator", "params"], "too_many_keys")


@pytest.mark.parametrize(
    "body, loc",
    [
        (_job(submitted_by="a\x00b"), ["body", "submitted_by"]),
        (_job(target={"kind": "llvm", "mcpu": "\ud800"}), ["body", "target", "mcpu"]),
        (_job(operator={"name": "matmul", "params": {"M\x00": 1}}),
         ["body", "operator", "params", "M\x00"]),
    ],
)  # fmt: skip
def test_text_the_store_cannot_hold_is_a_422(
    api: tuple[httpx.Client, Path], body: dict, loc: list
) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    # json.dumps writes NUL as \u0000 and a lone surrogate as \ud800, as an attacker would.
    _refused(_post_raw(client, "/jobs", json.dumps(body)), loc, "string_unicode")
    assert row_counts(data_dir, TABLES) == before


def test_query_text_the_store_cannot_hold_is_a_422(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    _refused(client.get("/schedules?operator=a%00"), ["query", "operator"], "string_unicode")
    _refused(client.get("/export?target=%00"), ["query", "target"], "string_unicode")


@pytest.mark.parametrize(
    "body",
    [b'{"trials": ' + b"9" * 5000 + b"}", b'{"trials": "\xff\xfe"}', "\ufeff{}".encode("utf-16")],
)
def test_unreadable_json_is_a_422_not_a_400(api: tuple[httpx.Client, Path], body: bytes) -> None:
    client, _ = api
    response = _post_raw(client, "/jobs", body)
    assert response.status_code == 422, response.text


def test_a_422_echoes_little_of_its_input(api: tuple[httpx.Client, Path]) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    # Many extra keys (an error each) holding long values, and a long operator name.
    body = {f"extra{i}": "v" * 500 for i in range(MAX_KEYS - 10)}
    body["operator"] = {"name": "n" * 100_000, "params": {"M": "x" * 100_000}}
    response = client.post("/jobs", json=body)
    assert response.status_code == 422
    assert len(response.content) < 16 * 1024, len(response.content)
    detail = response.json()["detail"]
    assert len(detail) == MAX_ERRORS + 1
    assert detail[-1]["type"] == "too_many_errors"
    assert detail[-1]["msg"].endswith("more errors not shown")
    for item in detail[:-1]:
        echo = item.get("input")
        if isinstance(echo, str):
            assert len(echo) <= MAX_ECHO + 1  # the JSON's first characters and "…"
        else:
            assert len(json.dumps(echo, separators=(",", ":"))) <= MAX_ECHO
    assert row_counts(data_dir, TABLES) == before


def test_small_inputs_are_echoed_whole(api: tuple[httpx.Client, Path]) -> None:
    client, _ = api
    response = client.post("/jobs", json=_job(trials="many"))
    _refused(response, ["body", "trials"], "int_type")
    assert response.json()["detail"][0]["input"] == "many"


@pytest.mark.parametrize("value", [0, -1, 2**31, 2**63, 2**64, 10**30])
def test_ids_out_of_range_are_a_422_on_every_id_route(
    api: tuple[httpx.Client, Path], value: int
) -> None:
    client, _ = api
    for method, template in ID_ROUTES:
        response = client.request(method, template.format(value))
        assert response.status_code == 422, (method, template, response.text)


def test_every_route_with_input_reads_it_strictly() -> None:
    app = create_app(Settings(), run_reaper=False)
    checked = 0
    for context in iter_route_contexts(app.routes):
        if not isinstance(context.original_route, APIRoute):
            continue
        dependant = context.original_route.dependant
        if dependant.body_params or dependant.query_params:
            assert isinstance(context.original_route, StrictRoute), context.path
            checked += 1
    assert checked >= 6  # POST /jobs, /import; GET /jobs, /schedules, /workloads, /export


@pytest.fixture
def any_store_api(store_url: str, tmp_path: Path) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=tmp_path, database_url=store_url)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client,
    ):
        yield client


def test_largest_ids_are_a_404_and_bigger_a_422_on_sqlite_and_postgresql(
    any_store_api: httpx.Client,
) -> None:
    for method, template in ID_ROUTES:
        largest = any_store_api.request(method, template.format(2**31 - 1))
        assert largest.status_code in (200, 404), (template, largest.text)
        assert any_store_api.request(method, template.format(2**31)).status_code == 422

"""``POST /lookup`` and ``GET /top-records``: the build side's reads over HTTP answer exactly what
the SQL reader answers on the server (one contract, `schedule_reads.ScheduleReader`), a whole
model's workloads in one request, one target and one TVM series only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from schedule_reads import ScheduleKey
from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.reader import SqlScheduleReader
from schedules_db.values import NewRecord
from service.client import TunehubClient
from service.client.reader import RestScheduleReader, SeriesMismatch
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.schedules_db.published import TVM_VERSION, publish

SERIES = "0.27"


@dataclass
class Served:
    client: TunehubClient
    sql: SqlScheduleReader
    rest: RestScheduleReader
    store: Store
    target_key: str
    hashes: list[str]


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[Served]:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=SERIES)
    cases = (("matmul", 8, "1008"), ("matmul", 16, "1016"), ("dense", 8, "2008"))
    published = [publish(store, op, n, shash=shash) for op, n, shash in cases]
    schedules = [store.schedules.get(schedule_id) for schedule_id, _ in published]
    target = store.catalog.get_target(schedules[0].target_id)
    workloads = [store.catalog.get_workload(s.workload_id) for s in schedules]
    # More records of matmul 8 on that target: a slower one, a failed one, an unverified import.
    w = workloads[0]
    for trace, secs, failed, unverified in (
        ("[[],[1]]", [9e-6], False, False),
        ("[[],[2]]", [1e10], True, False),
        ("[[],[3]]", [1e-6], False, True),
    ):
        record = NewRecord(trace, secs, [], TVM_VERSION, failed=failed, unverified=unverified)
        assert store.records.add(w.id, target.id, None, record)
    # The same workload measured on another target: never answered for the first.
    other = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "x"}, "llvm", "x", {})
    fast = NewRecord("[[],[4]]", [1e-7], [], TVM_VERSION, failed=False)
    assert store.records.add(w.id, other.id, None, fast)
    settings = Settings(data_dir=tmp_path, database_url=store_url)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        TunehubClient(server.url) as client,
    ):
        yield Served(
            client,
            SqlScheduleReader(store, SERIES),
            RestScheduleReader(client, SERIES),
            store,
            target.key,
            [str(wl.shash) for wl in workloads],
        )
    engine.dispose()


def test_rest_reader_answers_what_the_sql_reader_answers(served: Served) -> None:
    asked = [*served.hashes, "99999", served.hashes[0]]  # an unknown hash, a repeat
    rest = served.rest.lookup(served.target_key, asked)
    assert rest == served.sql.lookup(served.target_key, asked)
    assert sorted(rest) == sorted(served.hashes)
    best = rest[served.hashes[0]]
    assert best.key == ScheduleKey(served.hashes[0], served.target_key, SERIES)
    assert best.record is not None and best.record.run_secs == [5e-6] * 3
    key = ScheduleKey(served.hashes[1], served.target_key, SERIES)
    assert served.rest.best(key) == served.sql.best(key) == rest[served.hashes[1]]
    # Top-k: verified, successful, this target only, fastest first.
    top = served.rest.top_k(served.hashes[0], served.target_key, 10)
    assert top == served.sql.top_k(served.hashes[0], served.target_key, 10)
    assert [r.trace_json for r in top][1:] == ["[[],[1]]"] and len(top) == 2
    assert served.rest.top_k("99999", served.target_key, 3) == []


def test_a_whole_model_is_one_request_and_other_targets_answer_nothing(served: Served) -> None:
    sent: list[httpx.Request] = []
    served.client.http.event_hooks["request"].append(sent.append)
    many = [*served.hashes, *(str(10**12 + i) for i in range(197))]
    found = served.rest.lookup(served.target_key, many)
    assert len(sent) == 1 and sorted(found) == sorted(served.hashes)
    answer = served.client.lookup(served.target_key, many)
    assert answer["target"] == {"key": served.target_key, "label": "znver4-2c"}
    assert answer["tvm_series"] == SERIES and len(answer["missing"]) == 197
    # The label names the same target; a target the store never saw answers nothing.
    assert served.rest.target_key("znver4-2c") == served.target_key
    other_key = served.rest.target_key("x")  # the other target, by its label
    assert served.rest.lookup(other_key, served.hashes) == {}
    assert served.rest.lookup("f" * 32, served.hashes) == {}  # a key nobody stored
    unseen = served.client.lookup({"kind": "llvm", "mcpu": "znver3"}, served.hashes)
    assert unseen["schedules"] == {} and unseen["target"]["label"] is None


def test_a_reader_of_another_series_is_refused(served: Served) -> None:
    older = RestScheduleReader(served.client, "0.26")
    with pytest.raises(SeriesMismatch):
        older.lookup(served.target_key, served.hashes)
    for _ in range(2):  # refused every time, not only before the server's series is known
        with pytest.raises(SeriesMismatch):
            older.top_k(served.hashes[0], served.target_key, 1)
    with pytest.raises(SeriesMismatch):
        older.target_key("host")
    with pytest.raises(ValueError):
        older.best(ScheduleKey(served.hashes[0], served.target_key, SERIES))


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"workloads": ["12a"]}, ["body", "workloads", 0]),
        ({"workloads": ["1"] * 1001}, ["body", "workloads"]),
        ({"workloads": [], "target": "no-such-target"}, ["body", "target"]),
        ({"workloads": [], "target": {"kind": "llvm", "mcpu": "nope"}}, ["body", "target", "mcpu"]),
        ({"workloads": [], "extra": 1}, ["body", "extra"]),
    ],
)
def test_bad_lookups_are_422s_naming_the_field(
    served: Served, body: dict[str, object], loc: list[object]
) -> None:
    answer = served.client.http.post("/lookup", json=body)
    assert answer.status_code == 422, answer.text
    assert loc in [error["loc"] for error in answer.json()["detail"]], answer.text
    bad_k = served.client.http.get("/top-records", params={"workload": "1", "target": "t", "k": 0})
    assert bad_k.status_code == 422

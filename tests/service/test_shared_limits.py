"""Two API replicas on one PostgreSQL store and one Redis share their limits: the write-rate
bucket of an identity, its job cap (checked and filled under one lock), and its one parse at a
time; without Redis each process keeps its own, and with Redis down a write is a 503."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from schedules_db import make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.shared_limits import shared_limits
from service.web.shared_limits.redis import RedisParseGate
from tests.conftest import ServerThread, free_port, reset_pg_schema

JOB = {"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "target": "host"}


@dataclass
class Replicas:
    urls: list[str]
    tokens: dict[str, str]

    def post(self, replica: int, who: str, path: str, body: object = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.post(
            self.urls[replica] + "/api/v1" + path, json=body, headers=headers, timeout=60
        )


@pytest.fixture
def replicas(pg_database: str, redis_url: str, tmp_path: Path) -> Iterator[Replicas]:
    reset_pg_schema(pg_database)
    engine = make_engine(pg_database)
    upgrade_schema(engine)
    tokens = TokenStore(engine)
    run = uuid.uuid4().hex[:8]  # Redis outlives the test: identities of this run only
    names = {"burst": f"burst-{run}", "capped": f"capped-{run}", "other": f"other-{run}"}
    texts = {role: tokens.create(name, ["admin"])[0] for role, name in names.items()}
    engine.dispose()
    settings = [
        Settings(
            data_dir=tmp_path / f"replica{i}",
            database_url=pg_database,
            redis_url=redis_url,
            auth=True,
            write_rate_per_s=0.01,
            write_burst=4,
            max_active_jobs=2,
        )
        for i in range(2)
    ]
    with (
        ServerThread(create_app(settings[0], run_reaper=False)) as a,
        ServerThread(create_app(settings[1], run_reaper=False)) as b,
    ):
        yield Replicas([a.url, b.url], texts)


def test_an_identitys_write_burst_is_spent_over_both_replicas(replicas: Replicas) -> None:
    # Cancelling a job that does not exist still spends a write token (then 404).
    answers = [replicas.post(i % 2, "burst", "/jobs/999999/cancel").status_code for i in range(4)]
    assert answers == [404, 404, 404, 404]
    for replica in (0, 1):
        refused = replicas.post(replica, "burst", "/jobs/999999/cancel")
        assert refused.status_code == 429 and refused.json()["type"] == "rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
    # Another identity has a bucket of its own.
    assert replicas.post(1, "other", "/jobs/999999/cancel").status_code == 404


def test_the_job_cap_holds_for_submissions_racing_on_both_replicas(replicas: Replicas) -> None:
    def submit(i: int) -> httpx.Response:
        body = {**JOB, "operator": {"name": "matmul", "params": {"M": 8 + i, "N": 8, "K": 8}}}
        return replicas.post(i % 2, "capped", "/jobs", {**body, "trials": 8})

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(submit, range(4)))  # the cap is 2, the burst 4
    codes = sorted(a.status_code for a in answers)
    assert codes == [201, 201, 429, 429], [a.text for a in answers]
    assert {a.json()["type"] for a in answers if a.status_code == 429} == {"too_many_jobs"}


def test_one_parse_per_identity_over_every_replica(redis_url: str) -> None:
    one, two = (shared_limits(Settings(redis_url=redis_url)) for _ in range(2))
    who = f"parser-{uuid.uuid4().hex[:8]}"
    token = one.parses.try_enter(who)
    assert token is not None
    assert two.parses.try_enter(who) is None  # the other replica sees the parse under way
    two.parses.leave(who, "not-its-token")  # only the holder ends it
    assert two.parses.try_enter(who) is None
    one.parses.leave(who, token)
    again = two.parses.try_enter(who)
    assert again is not None
    two.parses.leave(who, again)
    one.close()
    two.close()


def test_a_parse_outlasting_its_lease_keeps_the_identity_out_of_every_replica(
    redis_url: str,
) -> None:
    """An import parses up to 64 workloads in turn, each after a wait for a parser: far longer
    than the parse lease, which expired mid-import and let the identity start a second parse
    on another replica. The holder renews it while its parse runs (here a 0.6 s lease, held
    for five), and the mark ends with the parse."""
    one, two = (shared_limits(Settings(redis_url=redis_url)) for _ in range(2))
    assert isinstance(one.parses, RedisParseGate)
    one.parses.lease_ms = 600
    who = f"long-parse-{uuid.uuid4().hex[:8]}"
    try:
        with one.parses.parsing(who):
            until = time.monotonic() + 3.0
            while time.monotonic() < until:
                assert two.parses.try_enter(who) is None, "the lease expired mid-parse"
                time.sleep(0.05)
        again = two.parses.try_enter(who)
        assert again is not None
        two.parses.leave(who, again)
    finally:
        one.close()
        two.close()


def test_admission_waits_for_the_identitys_lock_held_on_another_replica(redis_url: str) -> None:
    one, two = (shared_limits(Settings(redis_url=redis_url)) for _ in range(2))
    who, order = f"admit-{uuid.uuid4().hex[:8]}", []
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with one.admissions.admitting(who):
            order.append("first in")
            holding.set()
            release.wait(10)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(10)
    threading.Timer(0.3, release.set).start()
    with two.admissions.admitting(who):
        order.append("second in")
    thread.join(10)
    assert order == ["first in", "first out", "second in"]
    one.close()
    two.close()


def test_without_redis_each_process_keeps_its_own_limits(tmp_path: Path) -> None:
    limits = shared_limits(Settings(data_dir=tmp_path, write_rate_per_s=1, write_burst=2))
    assert limits.where == "process"
    assert [limits.writes.take("k") for _ in range(2)] == [0.0, 0.0]
    assert limits.writes.take("k") > 0


def test_with_redis_down_a_write_is_a_503_and_a_read_still_answers(tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings = Settings(data_dir=tmp_path, redis_url=dead)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=30) as client,
    ):
        refused = client.post("/jobs/999999/cancel")
        assert refused.status_code == 503 and refused.json()["type"] == "limits_unavailable"
        assert refused.headers["retry-after"]
        assert client.get("/jobs").status_code == 200

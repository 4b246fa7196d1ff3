"""A Redis that accepts connections and never answers (behind a partition, or overloaded)
freezes nothing: writes wait for it off the event loop while reads, `/healthz` and the
dashboard answer; once a call has timed out the breaker answers every write with a 503 at
once, without touching Redis, and lets one call probe it after its cool-down."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.shared_limits.breaker import Breaker, CircuitOpen
from tests.conftest import ServerThread

STUCK_POSTS = 20


class SilentRedis:
    """A TCP server on loopback that accepts every connection, reads what it is sent and
    never answers; it counts the connections and the bytes it received."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.received = 0
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.changed:
                self.connections.append(conn)
                self.changed.notify_all()
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            with self.changed:
                self.received += len(data)
                self.changed.notify_all()

    def wait_for(self, connections: int, timeout: float = 60.0) -> None:
        with self.changed:
            reached = self.changed.wait_for(lambda: len(self.connections) >= connections, timeout)
        assert reached, f"{len(self.connections)} of {connections} connections came"

    def __enter__(self) -> SilentRedis:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def silent_redis() -> Iterator[SilentRedis]:
    with SilentRedis() as server:
        yield server


def serving(redis: SilentRedis, data_dir: Path, timeout_s: float) -> ServerThread:
    """The API with its shared limits in ``redis``, each call given ``timeout_s``."""
    settings = Settings(
        data_dir=data_dir,
        redis_url=f"redis://127.0.0.1:{redis.port}/0",
        redis_timeout_s=timeout_s,
    )
    return ServerThread(create_app(settings, run_reaper=False))


def test_reads_answer_while_writes_wait_on_a_silent_redis(
    silent_redis: SilentRedis, tmp_path: Path
) -> None:
    # 30 s: the posts stay stuck for the whole test, no timing involved.
    with (
        serving(silent_redis, tmp_path, 30.0) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
        ThreadPoolExecutor(STUCK_POSTS) as pool,
    ):
        posts = [pool.submit(client.post, "/api/v1/jobs/999999/cancel") for _ in range(STUCK_POSTS)]
        silent_redis.wait_for(STUCK_POSTS)  # every post now waits on Redis
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/v1/operators").status_code == 200
        assert client.get("/api/v1/jobs").status_code == 200
        assert client.get("/").status_code == 200  # the dashboard
        assert not any(post.done() for post in posts), "reads answered before Redis did"
        silent_redis.__exit__()  # Redis goes away: the waiting writes end, as 503s
        for post in posts:
            answer = post.result()
            assert answer.status_code == 503 and answer.json()["type"] == "limits_unavailable"


def test_after_a_timeout_the_breaker_refuses_writes_without_asking_redis(
    silent_redis: SilentRedis, tmp_path: Path
) -> None:
    with (
        serving(silent_redis, tmp_path, 0.5) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=60) as client,
    ):
        first = client.post("/jobs/999999/cancel")  # times out: the breaker opens
        assert first.status_code == 503 and first.json()["type"] == "limits_unavailable"
        with silent_redis.changed:
            seen = (len(silent_redis.connections), silent_redis.received)
        for _ in range(5):
            refused = client.post("/jobs/999999/cancel")
            assert refused.status_code == 503 and refused.json()["type"] == "limits_unavailable"
            assert "circuit open" in refused.json()["detail"]
            assert refused.headers["retry-after"]
        with silent_redis.changed:
            assert (len(silent_redis.connections), silent_redis.received) == seen
        assert client.get("/jobs").status_code == 200


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_refuses_probes_once_and_closes() -> None:
    clock = Clock()
    breaker = Breaker(open_s=5.0, clock=clock)
    with breaker.guard(TimeoutError):
        pass  # a success keeps it closed
    with pytest.raises(TimeoutError), breaker.guard(TimeoutError):
        raise TimeoutError
    assert breaker.is_open
    clock.now += 4.9
    with pytest.raises(CircuitOpen, match="TimeoutError"), breaker.guard(TimeoutError):
        raise AssertionError("an open breaker runs nothing")
    clock.now += 0.2  # the cool-down passed: one call probes, and a failed probe reopens it
    with pytest.raises(TimeoutError), breaker.guard(TimeoutError):
        raise TimeoutError
    with pytest.raises(CircuitOpen), breaker.guard(TimeoutError):
        raise AssertionError("reopened")
    clock.now += 5.1
    probing = breaker.guard(TimeoutError)
    probing.__enter__()  # a probe in flight: every other call is refused meanwhile
    with pytest.raises(CircuitOpen), breaker.guard(TimeoutError):
        raise AssertionError("only one probe at a time")
    probing.__exit__(None, None, None)  # the probe succeeded: closed
    assert not breaker.is_open
    with breaker.guard(TimeoutError):
        pass
    with pytest.raises(ValueError), breaker.guard(TimeoutError):
        raise ValueError  # not the dependency's failure: the breaker stays closed
    assert not breaker.is_open

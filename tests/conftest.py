"""Shared fixtures: real PostgreSQL, Redis, SQLite stores, and a real HTTP server in a thread.

PostgreSQL (127.0.0.1:5432, database ``test``) and Redis (127.0.0.1:6379) are started on this
machine kind before every session and before CI; a test that needs them fails when they are
missing (it never skips). Override with TUNEHUB_TEST_PG_ADMIN_URL / TUNEHUB_TEST_REDIS_URL.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from schedules_db import Store, make_engine, upgrade_schema

PG_ADMIN_URL = os.environ.get(
    "TUNEHUB_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TUNEHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
# Tests check behaviour, not speed: a timed kernel run lasts 10 ms, not 100
# (service.shared.settings), in this process and in the servers and workers it starts.
TIMING_MS = "10"
os.environ["TUNEHUB_TIMING_MS"] = TIMING_MS


def free_port() -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session (dropped afterwards)."""
    name = f"tunehub_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as err:  # noqa: BLE001 - report any connection problem as a failure
        pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is required and unreachable: {err}")
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis broker URL (its database is flushed first); fails if Redis is missing."""
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL)
        client.ping()
        client.flushdb()
    except Exception as err:  # noqa: BLE001
        pytest.fail(f"Redis at {REDIS_URL} is required and unreachable: {err}")
    return REDIS_URL


def reset_pg_schema(url: str) -> None:
    """Drop and recreate the public schema: an empty PostgreSQL database again."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty, migrated store URL: SQLite in a temp folder, or the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url = request.getfixturevalue("pg_database")
    reset_pg_schema(url)
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A `Store` over an empty, migrated database (SQLite and PostgreSQL)."""
    engine = make_engine(store_url)
    upgrade_schema(engine)
    yield Store(engine)
    engine.dispose()


class ServerThread:
    """A real uvicorn server for an app, on a free loopback port, in a thread."""

    def __init__(self, app) -> None:  # noqa: ANN001
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", proxy_headers=False
        )  # as `tunehub serve`: the app resolves the client (service.web.forwarded)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


TINY = {"M": 32, "N": 32, "K": 32}


def host_store(folder: Path) -> tuple[Any, Any, Any]:
    """A fresh SQLite store in ``folder`` with this machine's host target recorded: (engine,
    store, target row). The caller disposes of the engine."""
    from schedules_db import Store, make_engine, upgrade_schema
    from tuning.hardware.host import host_fingerprint
    from tuning.hardware.targets import resolve_target

    engine = make_engine(f"sqlite:///{folder / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    target = resolve_target("host")
    row = store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, host_fingerprint()
    )
    return engine, store, row


@pytest.fixture(scope="session")
def tuned_store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A SQLite store in which one tiny matmul job was tuned for real, in this process.

    Shared by the tests that need a verified schedule, so the suite pays for one search.
    """
    from service.worker.execution import WorkerContext, run_job
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.host import host_fingerprint
    from tuning.hardware.targets import resolve_target

    root = tmp_path_factory.mktemp("tuned")
    url = f"sqlite:///{root / 'store.db'}"
    engine = make_engine(url)
    upgrade_schema(engine)
    store = Store(engine)
    op = get_operator("matmul")
    spec = catalog_workload("matmul", op.Params(**TINY))
    target = resolve_target("host")
    target_row = store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, host_fingerprint()
    )
    workload_row = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    job = store.jobs.create(workload_row.id, target_row.id, 8, "tunehub.test")
    context = WorkerContext(
        store=store, artifact_dir=root / "artifacts", worker_name="pytest", num_trials_per_iter=4
    )
    started = time.monotonic()
    outcome = run_job(context, job.id)
    return {
        "url": url,
        "root": root,
        "store": store,
        "artifact_dir": root / "artifacts",
        "job_id": job.id,
        "outcome": outcome,
        "workload_id": workload_row.id,
        "target_id": target_row.id,
        "seconds": time.monotonic() - started,
        "context": context,
    }

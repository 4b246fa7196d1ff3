"""`schedules_db.engine.make_probe_engine`: reads that neither hang nor hold a connection (what
``/metrics`` probes the store with), on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from schedules_db.engine import PROBE_APPLICATION, make_probe_engine
from schedules_db.store import Store

# A statement that runs for minutes on either database unless it is interrupted.
ENDLESS = {
    "sqlite": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT count(*) FROM n",
    "postgresql": "SELECT pg_sleep(600)",
}


def test_a_statement_past_its_timeout_is_interrupted(store: Store) -> None:
    probe = make_probe_engine(store.engine.url.render_as_string(False), 2.0, 0.5)
    with probe.connect() as conn:
        assert conn.execute(text("SELECT 1")).scalar() == 1
    started = time.monotonic()
    with pytest.raises(OperationalError), probe.connect() as conn:
        conn.execute(text(ENDLESS[store.engine.dialect.name]))
    assert time.monotonic() - started < 5
    probe.dispose()


def test_no_connection_is_kept_after_a_read(pg_database: str) -> None:
    probe = make_probe_engine(pg_database, 2.0, 2.0)
    others = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE application_name = :name AND pid <> pg_backend_pid()"
    )
    for _ in range(3):
        with probe.connect() as conn:
            conn.execute(text("SELECT 1"))
    with probe.connect() as conn:  # the three before it are gone
        deadline = time.monotonic() + 10  # a closed backend leaves pg_stat_activity soon after
        while conn.execute(text(others), {"name": PROBE_APPLICATION}).scalar():
            assert time.monotonic() < deadline, "a probe's connection was kept"
            time.sleep(0.05)


def test_a_server_that_never_answers_fails_the_connection_within_its_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepted by the kernel, unheard
        port = silent.getsockname()[1]
        probe = make_probe_engine(f"postgresql+psycopg://u@127.0.0.1:{port}/x", 2.0, 2.0)
        started = time.monotonic()
        with pytest.raises(OperationalError):
            probe.connect()
        assert time.monotonic() - started < 6

"""A worker that would publish artifacts where its API cannot read them refuses to start, and
says what to set (`service.shared.artifact_readers`); one that publishes where the API reads
starts. The API announces how it reads when it starts (a real app, served)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx

from schedules_db import Store, make_engine
from schedules_db.store.artifact_readers import ArtifactReader
from service.entry.app import create_app
from service.shared.artifact_readers import MARKER_FILE, publishing_problem
from service.shared.settings import Settings
from tests.conftest import ServerThread, reset_pg_schema


def _problem_beside(api: Settings, worker: Settings) -> str | None:
    """What `publishing_problem` says of ``worker`` while an API with ``api`` runs."""
    with ServerThread(create_app(api, run_reaper=False)) as server:
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
        engine = make_engine(worker.store_url)
        try:
            return publishing_problem(worker, Store(engine))
        finally:
            engine.dispose()


def test_a_worker_must_write_where_the_api_reads(pg_database: str, tmp_path: Path) -> None:
    reset_pg_schema(pg_database)  # no announcement of another test's API
    api_dir = tmp_path / "api"

    def on(folder: Path, store: str = "auto") -> Settings:
        return Settings(data_dir=folder, database_url=pg_database, artifact_store=store)

    # The default of a fleet on PostgreSQL: both sides use the database.
    assert _problem_beside(on(api_dir), on(tmp_path / "w1")) is None
    # An API reading the database, a worker writing a directory: refused, says what to set.
    problem = _problem_beside(on(api_dir), on(tmp_path / "w2", "directory"))
    assert problem and "reads artifacts from the database" in problem
    assert "TUNEHUB_ARTIFACT_STORE=database" in problem
    # An API reading its directory: a worker writing the database is refused ...
    api = on(api_dir, "directory")
    problem = _problem_beside(api, on(tmp_path / "w3"))
    assert problem and str(api.artifacts) in problem and "database" in problem
    # ... and so is one writing another directory (another host, no shared disk) ...
    problem = _problem_beside(api, on(tmp_path / "w4", "directory"))
    assert problem and MARKER_FILE in problem and "TUNEHUB_ARTIFACT_DIR" in problem
    # ... but not one writing the API's own directory (same host, or the disk mounted).
    same = Settings(data_dir=tmp_path / "w5", database_url=pg_database,
                    artifact_store="directory", artifact_dir=api.artifacts)  # fmt: skip
    assert _problem_beside(api, same) is None
    # The marker is written once: a restarted API keeps it.
    marker = (api.artifacts / MARKER_FILE).read_text()
    assert _problem_beside(api, same) is None
    assert (api.artifacts / MARKER_FILE).read_text() == marker
    # A stopped API withdrew its announcement: nothing is left to check against.
    engine = make_engine(pg_database)
    try:
        store = Store(engine)
        assert store.readers.fresh() == []
        # An API killed before it withdrew (on this host, its pid gone) is not counted; a
        # live one is.
        ended = subprocess.Popen(["true"])
        ended.wait()
        host, worker = socket.gethostname(), on(tmp_path / "w6", "directory")
        killed = ArtifactReader(f"{host}:{ended.pid}:x", "database", "database", host, "")
        store.readers.announce(killed, timedelta(minutes=1))
        assert len(store.readers.fresh()) == 1 and publishing_problem(worker, store) is None
        alive = ArtifactReader(f"{host}:{os.getpid()}:y", "database", "database", host, "")
        store.readers.announce(alive, timedelta(minutes=1))
        assert publishing_problem(worker, store)
    finally:
        engine.dispose()


def test_the_worker_command_refuses_to_start(pg_database: str, tmp_path: Path) -> None:
    reset_pg_schema(pg_database)
    api = Settings(data_dir=tmp_path / "api", database_url=pg_database)  # reads the database
    worker = Settings(data_dir=tmp_path / "w", database_url=pg_database, artifact_store="directory")
    env = {**worker.as_env(), "PATH": "/usr/bin:/bin"}
    with ServerThread(create_app(api, run_reaper=False)) as server:
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
        done = subprocess.run(
            [sys.executable, "-m", "service.entry.cli", "worker", "--target", "host"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    # Refused with the configuration status, which its supervisor does not restart.
    assert done.returncode == os.EX_CONFIG, done.stdout + done.stderr
    assert "its artifacts would be lost" in done.stderr
    assert "TUNEHUB_ARTIFACT_STORE=database" in done.stderr
    # Refused before it registered or consumed anything.
    engine = make_engine(pg_database)
    try:
        assert Store(engine).fleet.list_workers() == []
    finally:
        engine.dispose()

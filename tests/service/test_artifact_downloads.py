"""Downloads from the database artifact store through the API: the bytes, their ETag and
sha256, never a damaged or truncated body (a 502 or a 503 instead), and the directory
migrated into the database with one command."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine, delete, func, select, text, update

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.blobs import CHUNK_BYTES, DatabaseBlobs
from schedules_db.tables import ArtifactRow, BlobChunkRow
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, reset_pg_schema
from tests.e2e.helpers import cli
from tests.schedules_db.published import publish


@dataclass
class Served:
    client: httpx.Client
    store: Store
    cache: Path
    schedule_id: int
    library: bytes


def _big_library(folder: Path) -> bytes:
    """The published library's bytes, padded past two chunks (a real .so plus trailing bytes:
    the store does not care what the bytes are)."""
    (path,) = folder.glob("*/*.so")
    data = path.read_bytes() + os.urandom(2 * CHUNK_BYTES)
    path.write_bytes(data)
    return data


@contextmanager
def _serving(store_url: str, tmp_path: Path) -> Iterator[Served]:
    """An API with the database artifact store, and a schedule whose library spans 3 chunks."""
    engine = make_engine(store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series="0.27")
    schedule_id, _ = publish(store, "matmul", 8, tmp_path / "files")
    data = _big_library(tmp_path / "files")
    stored = DatabaseBlobs(engine).put(next((tmp_path / "files").glob("*/*.so")), ".so")
    artifact = store.schedules.get_artifact(store.schedules.get(schedule_id).artifact_id)
    with store.session() as s:  # the row names the padded bytes
        s.execute(
            update(ArtifactRow)
            .where(ArtifactRow.id == artifact.id)
            .values(sha256=stored.sha256, size=stored.size, path=stored.path)
        )
    settings = Settings(
        data_dir=tmp_path / "api", database_url=store_url, artifact_store="database"
    )
    app = create_app(settings, run_reaper=False)
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=60) as client,
    ):
        yield Served(
            client,
            store,
            settings.artifact_cache,
            schedule_id,
            data,
        )
    engine.dispose()


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[Served]:
    with _serving(store_url, tmp_path) as serving:
        yield serving


def _cached(served: Served) -> list[Path]:
    return [p for p in served.cache.glob("*/*") if p.is_file()]


def test_a_library_downloads_from_the_database_with_its_etag(served: Served) -> None:
    got = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert got.status_code == 200 and got.content == served.library
    sha = got.headers["x-content-sha256"]
    assert got.headers["etag"] == f'"{sha}"'
    assert (
        served.client.get(
            f"/schedules/{served.schedule_id}/artifact", headers={"If-None-Match": f'"{sha}"'}
        ).status_code
        == 304
    )
    assert [p.name for p in _cached(served)] == [sha]  # the verified local copy
    again = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert again.content == served.library


def _tamper(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(BlobChunkRow).where(BlobChunkRow.seq == 1).values(data=b"evil"))


def test_damaged_bytes_are_a_502_never_a_200(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    _tamper(served.store)
    with caplog.at_level(logging.WARNING, logger="tunehub"):
        got = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert got.status_code == 502 and got.json()["type"] == "artifact_corrupt"
    assert _cached(served) == []


@pytest.mark.parametrize("gone", ["every chunk", "the last chunk"])
def test_a_blob_whose_chunks_are_gone_is_a_502_not_a_404(served: Served, gone: str) -> None:
    """The blob row is there, its bytes are not whole: damage (502 ``artifact_corrupt``, as the
    route documents), not an artifact the store never had (404)."""
    with served.store.engine.begin() as conn:
        last = conn.execute(select(func.max(BlobChunkRow.seq))).scalar_one()
        rows = delete(BlobChunkRow)
        if gone == "the last chunk":
            rows = rows.where(BlobChunkRow.seq == last)
        conn.execute(rows)
    got = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert got.status_code == 502, got.text
    assert got.json()["type"] == "artifact_corrupt"
    assert "gone" in got.json()["detail"]
    assert _cached(served) == []  # nothing partial is kept for the next download


def test_a_damaged_local_copy_is_dropped_and_refilled(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    assert served.client.get(f"/schedules/{served.schedule_id}/artifact").status_code == 200
    (copy,) = _cached(served)
    with open(copy, "r+b") as handle:
        handle.write(b"\x00\x01")
    with caplog.at_level(logging.ERROR, logger="tunehub.artifacts"):
        got = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert got.status_code == 502
    assert any("not served" in r.getMessage() for r in caplog.records)
    refilled = served.client.get(f"/schedules/{served.schedule_id}/artifact")
    assert refilled.status_code == 200 and refilled.content == served.library


def test_a_database_outage_mid_download_is_a_503_not_a_truncated_200(
    pg_database: str, tmp_path: Path
) -> None:
    """PostgreSQL ends the API's connection (pg_terminate_backend) while it reads the chunks:
    the test holds the chunk table locked, waits until the API's read waits on that lock, cuts
    that backend, then lets go."""
    reset_pg_schema(pg_database)
    with _serving(pg_database, tmp_path) as served:
        admin = create_engine(pg_database, isolation_level="AUTOCOMMIT")
        locker = create_engine(pg_database)
        try:
            with locker.connect() as holding:
                holding.execute(text("LOCK TABLE blob_chunks IN ACCESS EXCLUSIVE MODE"))
                with ThreadPoolExecutor(1) as pool:
                    answer = pool.submit(
                        served.client.get, f"/schedules/{served.schedule_id}/artifact"
                    )
                    _cut_the_reader(admin)
                    holding.rollback()  # the lock goes: nothing else was waiting on it
                    got = answer.result(timeout=60)
        finally:
            locker.dispose()
            admin.dispose()
        assert got.status_code == 503, got.text
        assert got.json()["type"] == "artifact_store_unavailable" and got.headers["retry-after"]
        assert _cached(served) == [] and not list(served.cache.glob("*/.*partial"))
        after = served.client.get(f"/schedules/{served.schedule_id}/artifact")
        assert after.status_code == 200 and after.content == served.library


def _cut_the_reader(admin: Engine) -> None:
    """Terminate the backend that waits for a lock to read blob chunks."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with admin.connect() as conn:
            pids = (
                conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE '%FROM blob_chunks%'"
                    )
                )
                .scalars()
                .all()
            )
            if pids:
                for pid in pids:
                    conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                return
        time.sleep(0.02)
    raise AssertionError("the API never read the blob's chunks")


def test_an_artifact_directory_migrates_into_the_database(store_url: str, tmp_path: Path) -> None:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series="0.27")
    folder = tmp_path / "artifacts"
    ids = [publish(store, "matmul", n, folder)[0] for n in (8, 16)]
    publish(store, "dense", 8)  # its file was lost: named, not copied
    cost_model = folder / "cost_models" / ("c" * 32) / "records-64.tar"
    cost_model.parent.mkdir(parents=True)
    cost_model.write_bytes(b"xgboost model")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    args = ["artifacts", "migrate", "--database-url", store_url, "--from", str(folder)]
    first = cli(args, env)
    assert first.returncode == 1, first.stderr  # one file missing
    assert "2 artifact(s) copied" in first.stdout and "1 missing or damaged" in first.stdout
    assert "missing" in first.stderr
    again = cli(args, env)  # rerunning is safe: nothing copied twice
    assert "0 artifact(s) copied" in again.stdout and "2 already there" in again.stdout
    newest = store.cost_models.newest("c" * 32)
    assert newest is not None and newest.records == 64
    settings = Settings(data_dir=tmp_path / "api", database_url=store_url,
                        artifact_store="database")  # fmt: skip
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1") as client,
    ):
        for schedule_id in ids:
            got = client.get(f"/schedules/{schedule_id}/artifact")
            artifact = store.schedules.get_artifact(store.schedules.get(schedule_id).artifact_id)
            assert got.status_code == 200
            assert got.content == (folder / artifact.path).read_bytes()
    env["TUNEHUB_ARTIFACT_STORE"] = "database"
    gc = ["artifacts", "gc", "--database-url", store_url, "--data-dir", str(tmp_path / "gc")]
    collected = cli([*gc, "--grace-s", "0"], env)  # everything is still referenced
    assert collected.returncode == 0, collected.stderr
    assert "0 blob(s) from the database store" in collected.stdout
    engine.dispose()

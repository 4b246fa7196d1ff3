"""The artifact store (`schedules_db.blobs`) on a directory, SQLite and PostgreSQL: content
addressing, chunked reads, verification, atomic writes, garbage collection."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.blobs import (
    CHUNK_BYTES,
    BlobCorrupt,
    BlobMissing,
    BlobStore,
    DatabaseBlobs,
    DirectoryBlobs,
    StoredBlob,
    collect_garbage,
)
from schedules_db.store.cost_models import CostModel
from schedules_db.tables import ArtifactRow, BlobChunkRow, BlobRow, CostModelRow, utcnow
from tests.schedules_db.published import publish


@pytest.fixture(params=["directory", "database"])
def blobs(request: pytest.FixtureRequest, store: Store, tmp_path: Path) -> BlobStore:
    """Each store kind (the database one on SQLite and PostgreSQL, through ``store``)."""
    if request.param == "directory":
        return DirectoryBlobs(tmp_path / "artifacts")
    return DatabaseBlobs(store.engine)


def _file(folder: Path, size: int, seed: int = 0) -> Path:
    path = folder / f"blob-{seed}-{size}.bin"
    path.write_bytes(bytes((i * 7 + seed) % 251 for i in range(size)))
    return path


def test_a_blob_is_stored_by_its_sha256_and_read_back_in_chunks(
    blobs: BlobStore, tmp_path: Path
) -> None:
    source = _file(tmp_path, 2 * CHUNK_BYTES + 12345)
    stored = blobs.put(source, ".so")
    data = source.read_bytes()
    assert stored.sha256 == hashlib.sha256(data).hexdigest() and stored.size == len(data)
    assert stored.path == f"{stored.sha256[:2]}/{stored.sha256}.so"
    chunks = list(blobs.verified_chunks(stored))
    assert [len(c) for c in chunks] == [CHUNK_BYTES, CHUNK_BYTES, 12345]
    assert b"".join(chunks) == data
    assert blobs.read_to(stored, tmp_path / "out" / "copy.so").read_bytes() == data
    assert blobs.has(stored)
    # The same bytes again: the same blob, nothing new stored.
    again = tmp_path / "again.bin"
    again.write_bytes(data)
    assert blobs.put(again, ".so") == stored
    assert [b.sha256 for b in blobs.stored()] == [stored.sha256]


def test_an_empty_file_is_a_blob_too(blobs: BlobStore, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    stored = blobs.put(empty)
    assert stored.size == 0 and b"".join(blobs.verified_chunks(stored)) == b""


def test_a_missing_blob_is_named(blobs: BlobStore, tmp_path: Path) -> None:
    ghost = StoredBlob("ab" * 32, 3, f"ab/{'ab' * 32}.so")
    assert not blobs.has(ghost)
    with pytest.raises(BlobMissing):
        blobs.read_to(ghost, tmp_path / "ghost")
    assert not (tmp_path / "ghost").exists()


def test_damaged_bytes_are_never_handed_out(blobs: BlobStore, store: Store, tmp_path: Path) -> None:
    stored = blobs.put(_file(tmp_path, CHUNK_BYTES + 10))
    if isinstance(blobs, DirectoryBlobs):
        with open(blobs.root / stored.path, "r+b") as handle:
            handle.seek(CHUNK_BYTES + 3)
            handle.write(b"X")
    else:
        with store.engine.begin() as conn:
            conn.execute(
                update(BlobChunkRow)
                .where(BlobChunkRow.sha256 == stored.sha256, BlobChunkRow.seq == 1)
                .values(data=b"tampered!!")
            )
    dest = tmp_path / "dest.so"
    with pytest.raises(BlobCorrupt):
        blobs.read_to(stored, dest)
    assert not dest.exists() and not list(tmp_path.glob(".dest.so*"))


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from sqlalchemy import event
    from schedules_db import make_engine
    from schedules_db.blobs import DatabaseBlobs

    engine = make_engine(sys.argv[1])
    inserted = []

    @event.listens_for(engine, "after_cursor_execute")
    def stall(conn, cursor, statement, params, context, many):
        if statement.startswith("INSERT INTO blob_chunks"):
            inserted.append(1)
            if len(inserted) == 2:
                print("mid-upload", flush=True)
                time.sleep(600)

    DatabaseBlobs(engine).put(Path(sys.argv[2]))
    """
)


def test_a_writer_killed_mid_upload_leaves_nothing_visible(store: Store, tmp_path: Path) -> None:
    source = _file(tmp_path, 3 * CHUNK_BYTES)
    url = store.engine.url.render_as_string(hide_password=False)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(source)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "mid-upload"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    blobs = DatabaseBlobs(store.engine)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    assert not blobs.has(StoredBlob(sha, 0, ""))
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(BlobChunkRow)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(BlobRow)).scalar() == 0
    assert blobs.put(source).sha256 == sha  # and the next writer stores it whole


def _age(store: Store, blobs: BlobStore, stored: StoredBlob, hours: float) -> None:
    """Make a blob look ``hours`` old to the collector."""
    if isinstance(blobs, DirectoryBlobs):
        moment = (utcnow() - timedelta(hours=hours)).timestamp()
        os.utime(blobs.root / stored.path, (moment, moment))
    else:
        with store.engine.begin() as conn:
            conn.execute(
                update(BlobRow)
                .where(BlobRow.sha256 == stored.sha256)
                .values(created_at=utcnow() - timedelta(hours=hours))
            )


def test_garbage_collection_removes_only_old_unreferenced_blobs(
    blobs: BlobStore, store: Store, tmp_path: Path
) -> None:
    publish(store, "matmul", 8, tmp_path / "published")  # a schedule and its library
    (library,) = (tmp_path / "published").glob("*/*.so")
    served = blobs.put(library, ".so")
    unused, cost_model, orphan, fresh = (blobs.put(_file(tmp_path, 99, s)) for s in range(4))
    store.models.create_source(unused.sha256, unused.size, unused.path, "model-onnx")
    with store.engine.begin() as conn:  # every row old; no model refers to that source
        conn.execute(update(ArtifactRow).values(created_at=utcnow() - timedelta(hours=3)))
    store.cost_models.add(CostModel("k" * 32, 40, cost_model.sha256, 99, cost_model.path))
    for blob in (served, unused, cost_model, orphan):
        _age(store, blobs, blob, 3)
    done = collect_garbage(store.engine, blobs, timedelta(hours=1))
    assert (done.artifact_rows, done.cost_models, done.blobs) == (1, 0, 2)
    left = {b.sha256 for b in blobs.stored()}
    # The schedule's library and the cost model stay; the unused source's row went first, so
    # its blob went too, as did the orphan; the fresh blob (maybe a publish under way) waits
    # out its grace.
    assert left == {served.sha256, cost_model.sha256, fresh.sha256}
    assert store.schedules.get_artifact(1) is not None


def test_only_the_newest_cost_models_of_a_target_are_kept(
    blobs: BlobStore, store: Store, tmp_path: Path
) -> None:
    models = [blobs.put(_file(tmp_path, 50, s), ".tar") for s in range(4)]
    for records, blob in zip((40, 50, 60, 70), models, strict=True):
        store.cost_models.add(CostModel("t" * 32, records, blob.sha256, 50, blob.path))
        _age(store, blobs, blob, 3)
    with store.engine.begin() as conn:
        conn.execute(update(CostModelRow).values(created_at=utcnow() - timedelta(hours=3)))
    done = collect_garbage(store.engine, blobs, timedelta(hours=1))
    assert (done.cost_models, done.blobs) == (2, 2)
    newest = store.cost_models.newest("t" * 32)
    assert newest is not None and newest.records == 70
    assert {b.sha256 for b in blobs.stored()} == {models[2].sha256, models[3].sha256}


def test_putting_stored_bytes_again_restarts_their_grace(
    blobs: BlobStore, store: Store, tmp_path: Path
) -> None:
    source = _file(tmp_path, 100)
    stored = blobs.put(source)
    _age(store, blobs, stored, 3)
    blobs.put(source)  # a publish reusing it: the collector must not race it
    collect_garbage(store.engine, blobs, timedelta(hours=1))
    assert blobs.has(stored)


@pytest.fixture
def two_stores(store_url: str) -> Iterator[tuple[Store, Store]]:
    engines = [make_engine(store_url), make_engine(store_url)]
    upgrade_schema(engines[0])
    yield Store(engines[0]), Store(engines[1])
    for engine in engines:
        engine.dispose()


def test_one_lease_holder_at_a_time_and_a_takeover_once_it_expires(
    two_stores: tuple[Store, Store],
) -> None:
    a, b = two_stores
    assert a.leases.hold("reaper", "a", timedelta(seconds=30))
    assert not b.leases.hold("reaper", "b", timedelta(seconds=30))
    assert a.leases.hold("reaper", "a", timedelta(seconds=30))  # renewed
    a.leases.release("reaper", "b")  # not b's to give up
    assert not b.leases.hold("reaper", "b", timedelta(seconds=30))
    assert a.leases.hold("reaper", "a", timedelta(seconds=-1))  # as if a died long ago
    assert b.leases.hold("reaper", "b", timedelta(seconds=30))
    assert not a.leases.hold("reaper", "a", timedelta(seconds=30))
    b.leases.release("reaper", "b")
    assert a.leases.hold("reaper", "a", timedelta(seconds=30))

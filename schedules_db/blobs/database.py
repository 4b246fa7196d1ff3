"""The artifact store in the database: a ``blobs`` row per file and its bytes in
``blob_chunks`` rows of at most `CHUNK_BYTES`, all inserted in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from schedules_db.blobs.base import (
    CHUNK_BYTES,
    BlobCorrupt,
    BlobKey,
    BlobListing,
    BlobMissing,
    BlobStore,
    BlobUnavailable,
    StoredBlob,
    blob_path,
    file_sha256,
)
from schedules_db.tables import BlobChunkRow, BlobRow, utcnow

CHUNK_QUERY = "SELECT data FROM blob_chunks WHERE sha256 = %s AND seq = %s"


class DatabaseBlobs(BlobStore):
    """Blobs in the store's own database (PostgreSQL in a fleet; SQLite works too)."""

    kind = "database"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def put(self, source: Path, suffix: str = "") -> StoredBlob:
        sha = file_sha256(source)
        size = source.stat().st_size
        stored = StoredBlob(sha256=sha, size=size, path=blob_path(sha, suffix))
        if self._touch(sha):
            return stored
        chunks = max(1, -(-size // CHUNK_BYTES))
        try:
            with self.engine.begin() as conn, open(source, "rb") as handle:
                row = {"sha256": sha, "size": size, "chunks": chunks, "created_at": utcnow()}
                conn.execute(insert(BlobRow), row)
                for seq in range(chunks):
                    data = handle.read(CHUNK_BYTES)
                    conn.execute(insert(BlobChunkRow), {"sha256": sha, "seq": seq, "data": data})
        except IntegrityError:
            if not self.has(stored):  # another writer's insert of the same bytes won
                raise
        except DBAPIError as err:
            raise BlobUnavailable(f"the database refused blob {sha}: {err}") from err
        return stored

    def chunks(self, key: BlobKey) -> Iterator[bytes]:
        try:
            with self.engine.connect() as conn:
                count = conn.execute(
                    select(BlobRow.chunks).where(BlobRow.sha256 == key.sha256)
                ).scalar()
                if count is None:
                    raise BlobMissing(f"blob {key.sha256} is not in the database")
                if conn.dialect.name == "postgresql":
                    yield from _binary_chunks(conn, key.sha256, count)
                    return
                for seq in range(count):
                    data = conn.execute(
                        select(BlobChunkRow.data).where(
                            BlobChunkRow.sha256 == key.sha256, BlobChunkRow.seq == seq
                        )
                    ).scalar()
                    if data is None:
                        raise _chunk_gone(key.sha256, seq)
                    yield bytes(data)
        except DBAPIError as err:
            raise BlobUnavailable(f"the database failed reading blob {key.sha256}: {err}") from err

    def _touch(self, sha: str) -> bool:
        """Mark a stored blob as just written (garbage collection spares it for its grace
        period, so a publish that reuses it is not raced); whether it is stored."""
        try:
            with self.engine.begin() as conn:
                touched = conn.execute(
                    update(BlobRow).where(BlobRow.sha256 == sha).values(created_at=utcnow())
                )
                return touched.rowcount == 1
        except DBAPIError as err:
            raise BlobUnavailable(f"the database is unreachable: {err}") from err

    def has(self, key: BlobKey) -> bool:
        try:
            with self.engine.connect() as conn:
                found = conn.execute(select(BlobRow.sha256).where(BlobRow.sha256 == key.sha256))
                return found.first() is not None
        except DBAPIError as err:
            raise BlobUnavailable(f"the database is unreachable: {err}") from err

    def delete(self, key: BlobKey) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(BlobChunkRow).where(BlobChunkRow.sha256 == key.sha256))
            conn.execute(delete(BlobRow).where(BlobRow.sha256 == key.sha256))

    def stored(self) -> Iterator[BlobListing]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(BlobRow.sha256, BlobRow.created_at)).all()
        for sha, created in rows:
            yield BlobListing(sha, blob_path(sha), created)


def _binary_chunks(conn: Connection, sha256: str, count: int) -> Iterator[bytes]:
    """The chunks through psycopg in binary format: bytea as text is hex, which doubles what
    PostgreSQL sends and costs a decode (measured: 47 MB in 68 ms binary, 241 ms as text)."""
    driver_error = conn.dialect.loaded_dbapi.Error  # psycopg's, without importing it here
    driver = conn.connection.driver_connection
    assert driver is not None, "a checked-out connection has its driver connection"
    try:
        with driver.cursor(binary=True) as cursor:
            for seq in range(count):
                cursor.execute(CHUNK_QUERY, (sha256, seq))
                row = cursor.fetchone()
                if row is None:
                    raise _chunk_gone(sha256, seq)
                yield bytes(row[0])
    except driver_error as err:
        raise BlobUnavailable(f"the database failed reading blob {sha256}: {err}") from err


def _chunk_gone(sha256: str, seq: int) -> BlobCorrupt:
    """A chunk missing under a blob row that is there: the blob is stored, but its bytes are
    not whole (a row deleted behind the store's back). That is damage, as bytes that hash
    wrong are (`BlobCorrupt`, a 502 download), not an absent blob (`BlobMissing`, a 404)."""
    return BlobCorrupt(f"blob {sha256}: chunk {seq} of its stored bytes is gone")

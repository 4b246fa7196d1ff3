"""The artifact store of this deployment (`open_blob_store`), and the verified local files an
API process serves downloads from (`ArtifactFiles`).

A download is served from a local file only once its bytes hashed to their sha256: with the
directory store that is the store's own file; with the database store it is a copy in the
process's cache (``<data_dir>/artifact-cache``), filled in chunks from the database, verified
as it is written and renamed into place only when whole. A file is hashed again whenever its
size, mtime or inode changed since it was last verified (a damaged or replaced copy). So a
corrupt blob is never served, and a database outage ends a download before its status line,
never as a truncated 200. The database stays the truth: the cache is dropped least recently
used first past ``artifact_cache_bytes`` and refilled on demand.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from sqlalchemy import Engine

from schedules_db.blobs import (
    BlobCorrupt,
    BlobKey,
    BlobStore,
    DatabaseBlobs,
    DirectoryBlobs,
    file_sha256,
)
from service.shared.settings import Settings

log = logging.getLogger("tunehub.artifacts")
RECENT_S = 60.0  # a cached file used this recently is never dropped (a download may be reading it)


def open_blob_store(settings: Settings, engine: Engine) -> BlobStore:
    """The artifact store of ``settings`` (`Settings.blob_store`), over ``engine`` or in the
    artifact directory."""
    if settings.blob_store == "database":
        _warn_of_unread_files(settings)
        return DatabaseBlobs(engine)
    return DirectoryBlobs(settings.artifacts)  # created by its first put


def _warn_of_unread_files(settings: Settings) -> None:
    """Say so when "auto" chose the database over an artifact directory that holds files (a
    deployment on PostgreSQL from before "auto" was the default): those are not read."""
    folder = settings.artifacts
    if settings.artifact_store == "auto" and folder.is_dir() and any(folder.iterdir()):
        log.warning(
            "artifacts live in the database (TUNEHUB_ARTIFACT_STORE=auto on a network "
            "database): the files in %s are not read; copy them with `tunehub artifacts "
            "migrate`, or set TUNEHUB_ARTIFACT_STORE=directory where every process shares it",
            folder,
        )


def _version(path: Path) -> tuple[int, int, int]:
    """What changes when a file's bytes are rewritten or replaced (size, mtime, inode)."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


class ArtifactFiles:
    """Local, verified files of the store's blobs (see the module docstring). Thread-safe:
    every file appears by an atomic rename; the eviction runs under a lock."""

    def __init__(self, blobs: BlobStore, cache_dir: Path, cache_bytes: int) -> None:
        self.blobs = blobs
        self.cache_dir = cache_dir
        self.cache_bytes = cache_bytes
        self._evicting = threading.Lock()
        # Files hashed since they last changed (size, mtime, inode): not hashed again.
        self._verified: dict[Path, tuple[int, int, int]] = {}
        self._used: dict[Path, float] = {}  # when this process last served each cached file

    def verified_file(self, key: BlobKey) -> Path:
        """A local file holding the blob's bytes, just verified. Raises `BlobMissing`,
        `BlobCorrupt` (logged) or `BlobUnavailable`."""
        own = self.blobs.local_file(key)
        path = own or self.cache_dir / key.sha256[:2] / key.sha256
        if own is None:
            self._used[path] = time.time()  # dropped last
            if not path.is_file():
                self.blobs.read_to(key, path)  # verified before the rename
                self._verified[path] = _version(path)
                self._evict()  # only a fill grows the cache
        if self._verified.get(path) != _version(path):
            found = file_sha256(path)
            if found != key.sha256:
                log.error("artifact %s: the bytes at %s hash to %s; not served", key.sha256,
                          path, found)  # fmt: skip
                self._verified.pop(path, None)
                if own is None:
                    path.unlink(missing_ok=True)  # a damaged copy: the next download refills it
                raise BlobCorrupt(f"artifact {key.sha256}: its stored bytes are damaged")
            self._verified[path] = _version(path)
        return path

    def _evict(self) -> None:
        """Drop the least recently used cached files while the cache holds more than
        ``cache_bytes`` (never one used in the last `RECENT_S`)."""
        with self._evicting:
            files = []
            for path in self.cache_dir.glob("??/*"):
                if path.is_file() and not path.name.startswith("."):
                    stat = path.stat()
                    files.append((self._used.get(path, stat.st_mtime), stat.st_size, path))
            total = sum(size for _, size, _ in files)
            now = time.time()
            for used, size, path in sorted(files):
                if total <= self.cache_bytes:
                    break
                if now - used < RECENT_S:
                    continue
                path.unlink(missing_ok=True)
                self._verified.pop(path, None)
                self._used.pop(path, None)
                total -= size

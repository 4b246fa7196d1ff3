"""The artifact store as a local directory: ``<root>/<sha[:2]>/<sha><suffix>``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from schedules_db.blobs.base import (
    CHUNK_BYTES,
    BlobKey,
    BlobListing,
    BlobMissing,
    BlobStore,
    StoredBlob,
    blob_path,
    file_sha256,
)


class DirectoryBlobs(BlobStore):
    """Blobs as files under ``root``, each written to a temp name, fsynced, then renamed."""

    kind = "directory"

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, source: Path, suffix: str = "") -> StoredBlob:
        sha = file_sha256(source)
        relpath = blob_path(sha, suffix)
        final = self.root / relpath
        if final.exists():
            os.utime(final)  # just written, for garbage collection's grace period
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            partial = final.with_name(f".{final.name}.{os.getpid()}.partial")
            shutil.copyfile(source, partial)
            with open(partial, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(partial, final)
        return StoredBlob(sha256=sha, size=final.stat().st_size, path=relpath)

    def local_file(self, key: BlobKey) -> Path:
        path = self.root / key.path
        if not path.is_file():
            raise BlobMissing(f"blob {key.sha256} is not in {self.root}")
        return path

    def chunks(self, key: BlobKey) -> Iterator[bytes]:
        with open(self.local_file(key), "rb") as handle:
            yield from iter(lambda: handle.read(CHUNK_BYTES), b"")

    def has(self, key: BlobKey) -> bool:
        return (self.root / key.path).is_file()

    def delete(self, key: BlobKey) -> None:
        (self.root / key.path).unlink(missing_ok=True)

    def stored(self) -> Iterator[BlobListing]:
        if not self.root.is_dir():
            return
        for folder in sorted(self.root.iterdir()):
            if len(folder.name) != 2 or not folder.is_dir():
                continue  # not a blob folder (cost_models/ of old versions, caches)
            for path in sorted(folder.iterdir()):
                if path.name.startswith(".") or not path.is_file():
                    continue  # a write under way
                created = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
                sha = path.name.split(".", 1)[0]
                yield BlobListing(sha, f"{folder.name}/{path.name}", created)

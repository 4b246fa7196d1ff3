"""The artifact store's contract (`BlobStore`) and what both implementations share.

Contract:

* **Content-addressed.** A blob is named by the sha256 of its bytes; `put` of bytes already
  stored stores nothing new and answers the same `StoredBlob`.
* **Whole or absent.** A blob becomes visible only once every byte is durable (a directory
  file is fsynced then renamed into place; database chunks commit in one transaction with
  their blob row). A writer killed mid-`put` leaves nothing a reader can see.
* **Chunked.** `put` and `chunks` move at most `CHUNK_BYTES` at a time: no side holds a whole
  file in memory.
* **Verified on read.** `read_to` writes a blob to a local file only when its bytes hash to its
  name (`BlobCorrupt` otherwise, and nothing is left at the destination); `verified_chunks`
  raises `BlobCorrupt` after the last chunk, so a caller must not commit the bytes before the
  iteration ends.
* **Errors.** `BlobMissing`: no such blob. `BlobCorrupt`: a stored blob whose bytes are damaged
  or not whole (they hash wrong, or a chunk of a database blob is gone). `BlobUnavailable`:
  the store could not be reached (a database outage); the caller may retry. Nothing else
  escapes for a store failure.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

CHUNK_BYTES = 1 << 20  # 1 MiB: the unit of every read and write


class BlobKey(Protocol):
    """What names a stored blob: its sha256 and its path in a directory store (an artifact
    row, a cost-model row or a `StoredBlob` all have both)."""

    @property
    def sha256(self) -> str: ...

    @property
    def path(self) -> str: ...


@dataclass(frozen=True)
class StoredBlob:
    """A blob as `BlobStore.put` stored it."""

    sha256: str
    size: int
    path: str  # relative, ``<sha[:2]>/<sha><suffix>``: the same name in every store


@dataclass(frozen=True)
class BlobListing:
    """One blob of `BlobStore.stored` (for garbage collection)."""

    sha256: str
    path: str
    created_at: datetime


class BlobError(Exception):
    """A blob could not be read or written (see the subclasses)."""


class BlobMissing(BlobError):
    """No blob of that sha256 is stored."""


class BlobCorrupt(BlobError):
    """The stored bytes do not hash to the blob's sha256: they are never served."""


class BlobUnavailable(BlobError):
    """The store could not be reached (the database is down); retrying may succeed."""


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def blob_path(sha256: str, suffix: str = "") -> str:
    """The relative path a blob of that sha256 has in a directory store."""
    return f"{sha256[:2]}/{sha256}{suffix}"


class BlobStore(ABC):
    """Where artifact bytes live (see the module's contract)."""

    kind: str  # "directory" or "database"

    @abstractmethod
    def put(self, source: Path, suffix: str = "") -> StoredBlob:
        """Store the file ``source`` (``suffix``: the extension its directory path gets)."""

    @abstractmethod
    def chunks(self, key: BlobKey) -> Iterator[bytes]:
        """The blob's bytes in order, unverified (`verified_chunks` checks them)."""

    @abstractmethod
    def has(self, key: BlobKey) -> bool:
        """Whether the blob is stored (whole)."""

    @abstractmethod
    def delete(self, key: BlobKey) -> None:
        """Remove the blob (nothing when it is not stored)."""

    @abstractmethod
    def stored(self) -> Iterator[BlobListing]:
        """Every stored blob."""

    def local_file(self, key: BlobKey) -> Path | None:
        """The blob's own file on this host, unverified, where the store keeps it as one (the
        directory store; `BlobMissing` when it is absent there); None for a store that does not
        (a reader then makes a verified copy with `read_to`)."""
        return None

    def verified_chunks(self, key: BlobKey) -> Iterator[bytes]:
        """`chunks`, then `BlobCorrupt` if the bytes did not hash to ``key.sha256``."""
        digest = hashlib.sha256()
        for chunk in self.chunks(key):
            digest.update(chunk)
            yield chunk
        if digest.hexdigest() != key.sha256:
            raise BlobCorrupt(f"blob {key.sha256}: stored bytes hash to {digest.hexdigest()}")

    def read_to(self, key: BlobKey, dest: Path) -> Path:
        """Write the blob to ``dest`` (atomically: a temp file renamed once verified) and return
        ``dest``; on any error nothing is left at ``dest``."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(f".{dest.name}.{os.getpid()}.{id(dest):x}.partial")
        try:
            with open(partial, "wb") as handle:
                for chunk in prefetched(self.verified_chunks(key)):
                    handle.write(chunk)
            os.replace(partial, dest)
        finally:
            partial.unlink(missing_ok=True)
        return dest


def prefetched(chunks: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """``chunks``, read by a thread up to ``depth`` chunks ahead of the consumer: a database's
    next chunk crosses the network while this one is hashed and written (both release the GIL).
    An error of the reader is raised here, in order."""
    ahead: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(depth)
    stop = threading.Event()

    def read() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        ahead.put((chunk, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ahead.put((None, None))
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            ahead.put((None, err))
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # a consumer that stopped early: the reader's connection goes back now

    reader = threading.Thread(target=read, name="tunehub-blob-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            chunk, error = ahead.get()
            if error is not None:
                raise error
            if chunk is None:
                return
            yield chunk
    finally:
        stop.set()
        reader.join(timeout=30)

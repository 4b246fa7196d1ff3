"""The light client's library cache: verified libraries kept on disk, so a rebuild needs no
network (``tunehub fetch``).

Where: ``$XDG_CACHE_HOME/tunehub``, else ``~/.cache/tunehub``. What:

* ``libs/<sha256>.so``: each library once, named by its content's sha256;
* ``entries/<digest>.json``: the library served for one key (`CacheKey`: server URL, target
  key, workload hash, TVM series), with the schedule id, sha256, ETag and when it was fetched;
* ``requests/<digest>.json``: which key a request (as the user wrote it: operator and params or
  workload hash, target name, server) resolved to, so that a request can be answered offline.

Every write is atomic (a temporary file, then a rename). A library is only ever handed out
after its sha256 is checked: a file that does not match is deleted (`CorruptCache`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/tunehub`` (when set and absolute, as the XDG spec asks), else
    ``~/.cache/tunehub``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "tunehub"


def sha256_of(path: Path) -> str:
    """The sha256 of a file's content, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def key_digest(value: Any) -> str:
    """A short stable name for a JSON value (a cache file name)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:32]


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class CorruptCache(Exception):
    """A cached library whose content no longer has its sha256 (it was deleted)."""


@dataclass(frozen=True)
class CacheKey:
    """What a cached library is served for: the server, the target's key, the workload's
    structural hash and the TVM series."""

    server: str
    target_key: str
    workload: str
    tvm_series: str


@dataclass(frozen=True)
class CacheEntry:
    """The library cached for a key: its schedule, sha256, ETag and fetch time (ISO 8601)."""

    key: CacheKey
    schedule_id: int
    sha256: str
    etag: str
    fetched_at: str


class LibraryCache:
    """A library cache in ``root`` (default `cache_root`, read when the cache is made)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else cache_root()

    def library_path(self, sha256: str) -> Path:
        """Where the library of this sha256 is kept (it may be absent)."""
        return self.root / "libs" / f"{sha256}.so"

    def entry(self, key: CacheKey) -> CacheEntry | None:
        """The entry of ``key``; None when there is none (or it is unreadable)."""
        data = _read_json(self._entry_path(key))
        if data is None:
            return None
        try:
            return CacheEntry(
                key=CacheKey(**data["key"]),
                schedule_id=int(data["schedule_id"]),
                sha256=str(data["sha256"]),
                etag=str(data["etag"]),
                fetched_at=str(data["fetched_at"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def resolved(self, request: dict[str, Any]) -> CacheKey | None:
        """The key ``request`` last resolved to (`remember`); None if never."""
        data = _read_json(self._request_path(request))
        try:
            return None if data is None else CacheKey(**data["key"])
        except (KeyError, TypeError):
            return None

    def remember(self, request: dict[str, Any], key: CacheKey) -> None:
        """Record that ``request`` resolves to ``key`` (for offline use)."""
        body = {"request": request, "key": asdict(key)}
        write_atomic(self._request_path(request), json.dumps(body, sort_keys=True).encode())

    def verified(self, entry: CacheEntry) -> Path | None:
        """The entry's library, its sha256 checked; None when it is absent. `CorruptCache` when
        its content does not match (the file is deleted first: it is never used)."""
        path = self.library_path(entry.sha256)
        if not path.is_file():
            return None
        found = sha256_of(path)
        if found != entry.sha256:
            path.unlink(missing_ok=True)
            raise CorruptCache(
                f"cached library {path} has sha256 {found}, not {entry.sha256}: removed"
            )
        return path

    def temporary(self) -> Path:
        """A new empty file inside the cache, for a download to be `store`d."""
        folder = self.root / "libs"
        folder.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".download.")
        os.close(handle)
        return Path(temp)

    def store(
        self, key: CacheKey, schedule_id: int, download: Path, sha256: str, etag: str
    ) -> CacheEntry:
        """Keep ``download`` (a `temporary` file whose sha256 the caller checked) as the
        library of ``key``; returns the new entry."""
        os.replace(download, self.library_path(sha256))
        entry = CacheEntry(
            key, schedule_id, sha256, etag, datetime.now(timezone.utc).isoformat(timespec="seconds")
        )
        write_atomic(self._entry_path(key), json.dumps(asdict(entry), sort_keys=True).encode())
        return entry

    def _entry_path(self, key: CacheKey) -> Path:
        return self.root / "entries" / f"{key_digest(asdict(key))}.json"

    def _request_path(self, request: dict[str, Any]) -> Path:
        return self.root / "requests" / f"{key_digest(request)}.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

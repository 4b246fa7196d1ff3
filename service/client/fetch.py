"""Fetching the verified library of a key (a catalog operator with its params, or a workload
hash, on a target) through the library cache (`service.client.cache`).

Online: the server names the verified best (``GET /schedules/best``), then its artifact is
asked for with ``If-None-Match`` the cached sha256's ETag, so an unchanged library is never
downloaded again (304); a new one is downloaded into the cache and its sha256 checked. Offline
(the server cannot be reached): the library last fetched for the same request is used, and the
result says so (`FetchedLibrary.offline`). A cached file whose sha256 does not match is
deleted, never used: downloaded again online, an `IntegrityError` offline.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from service.client.cache import CacheEntry, CacheKey, CorruptCache, LibraryCache
from service.client.downloads import check_download
from service.client.errors import IntegrityError, Offline, TunehubError, answer_error

NOT_TUNED = "not_tuned"  # the ``type`` of the server's 404 for a key without a verified best
CONNECT_TIMEOUT_S = 10.0  # how long an unreachable server is waited for before going offline


@dataclass(frozen=True)
class FetchedLibrary:
    """A fetched library: where it was written, its sha256 and schedule; ``from_cache`` when no
    byte was downloaded, ``offline`` when the server could not be reached (the cached copy of
    ``fetched_at`` was used); ``notes``: what the user should be told."""

    path: Path
    sha256: str
    schedule_id: int
    from_cache: bool
    offline: bool
    fetched_at: str
    notes: tuple[str, ...] = ()


class NotTuned(TunehubError):
    """The server has no verified schedule for the key (a 404 of type ``not_tuned``); ``body``
    names the workload hash, the target (key, label), the operator and its params."""


def fetch_library(
    http: httpx.Client,
    server: str,
    target: str | dict[str, Any],
    dest: str | Path,
    operator: str | None = None,
    params: dict[str, Any] | None = None,
    workload: str | None = None,
    cache: LibraryCache | None = None,
) -> FetchedLibrary:
    """Write the verified library of ``operator`` with ``params`` (or of the workload hash
    ``workload``) on ``target`` to ``dest``, through ``cache`` (default: `LibraryCache()`).

    ``http`` is a client's connection to ``server`` (its ``/api/v1``). Raises `NotTuned` when
    nothing is tuned for the key, `TunehubError` for another refusal (401/403: the token),
    `IntegrityError` for a download whose sha256 is not the announced one or a corrupt cached
    copy offline, and `Offline` when the server is unreachable and the request was never
    fetched (or its cached copy is gone)."""
    if (operator is None) == (workload is None):
        raise ValueError("give an operator (with params) or a workload hash")
    cache = cache if cache is not None else LibraryCache()
    target_text = target if isinstance(target, str) else json.dumps(target)
    request = _request(server, target_text, operator, params or {}, workload)
    try:
        best = _best(http, target_text, operator, params or {}, workload)
        key = CacheKey(
            server,
            str(best["key"]["target"]),
            str(best["key"]["workload"]),
            str(best["key"]["tvm_series"]),
        )
        cache.remember(request, key)
        entry, notes = _cached(cache, cache.entry(key))
        fetched = _download(http, cache, key, int(best["id"]), entry)
    except httpx.TransportError as err:
        return _offline(cache, request, server, err, Path(dest))
    install(cache.library_path(fetched.sha256), Path(dest))
    if fetched is entry:
        return _result(Path(dest), fetched, from_cache=True, offline=False, notes=notes)
    return _result(Path(dest), fetched, from_cache=False, offline=False, notes=notes)


def _request(
    server: str,
    target: str,
    operator: str | None,
    params: dict[str, Any],
    workload: str | None,
) -> dict[str, Any]:
    """The request as the cache remembers it (a JSON target in one spelling)."""
    if target.lstrip().startswith("{"):
        # Not JSON: the server refuses it, so nothing is cached under this spelling.
        with contextlib.suppress(ValueError, RecursionError):
            target = json.dumps(json.loads(target), sort_keys=True)
    if workload is not None:
        return {"server": server, "target": target, "workload": workload}
    return {"server": server, "target": target, "operator": operator, "params": params}


def _best(
    http: httpx.Client,
    target: str,
    operator: str | None,
    params: dict[str, Any],
    workload: str | None,
) -> dict[str, Any]:
    """The server's verified best for the key (``GET /schedules/best``)."""
    query = {"target": target}
    if workload is not None:
        query["workload"] = workload
    else:
        assert operator is not None
        query.update(operator=operator, params=json.dumps(params))
    timeout = httpx.Timeout(http.timeout.read, connect=CONNECT_TIMEOUT_S)
    response = http.get("/schedules/best", params=query, timeout=timeout)
    if response.status_code < 400:
        best: dict[str, Any] = response.json()
        return best
    error = answer_error(response)
    if isinstance(error.body, dict) and error.body.get("type") == NOT_TUNED:
        raise NotTuned(error.status, error.detail, error.body)
    raise error


def _cached(cache: LibraryCache, entry: CacheEntry | None) -> tuple[CacheEntry | None, list[str]]:
    """``entry`` when its library is present and intact, else None (a corrupt one deleted,
    with a note saying so)."""
    if entry is None:
        return None, []
    try:
        return (entry if cache.verified(entry) is not None else None), []
    except CorruptCache as err:
        return None, [f"{err}; downloading it again"]


def _download(
    http: httpx.Client,
    cache: LibraryCache,
    key: CacheKey,
    schedule_id: int,
    entry: CacheEntry | None,
) -> CacheEntry:
    """The cache entry of the schedule's artifact: ``entry`` itself when the server answers
    304 to its ETag, else a new one from a download whose sha256 was checked."""
    headers = {"If-None-Match": entry.etag} if entry is not None else {}
    temp: Path | None = None
    try:
        with http.stream("GET", f"/schedules/{schedule_id}/artifact", headers=headers) as response:
            if response.status_code == 304 and entry is not None:
                return entry
            if response.status_code >= 400:
                response.read()
                raise answer_error(response)
            announced = response.headers.get("x-content-sha256", "")
            etag = response.headers.get("etag", f'"{announced}"')
            temp = cache.temporary()
            digest = hashlib.sha256()
            with open(temp, "wb") as handle:
                for chunk in response.iter_bytes():
                    digest.update(chunk)
                    handle.write(chunk)
        if digest.hexdigest() != announced:
            raise IntegrityError(
                f"artifact of schedule {schedule_id}: sha256 {digest.hexdigest()} != "
                f"announced {announced!r}"
            )
        check_download(temp, f"artifact of schedule {schedule_id}")  # before it is kept
        stored = cache.store(key, schedule_id, temp, announced, etag)
        temp = None
        return stored
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


def _offline(
    cache: LibraryCache,
    request: dict[str, Any],
    server: str,
    err: httpx.TransportError,
    dest: Path,
) -> FetchedLibrary:
    """The cached library of ``request`` when ``server`` cannot be reached."""
    key = cache.resolved(request)
    entry = cache.entry(key) if key is not None else None
    reason = f"cannot reach {server} ({type(err).__name__}: {err})"
    if entry is None:
        raise Offline(f"{reason}, and nothing is cached for this request: fetch it once online")
    try:
        path = cache.verified(entry)
    except CorruptCache as corrupt:
        raise IntegrityError(f"{corrupt}; {reason} to download it again") from None
    if path is None:
        raise Offline(f"{reason}, and the cached library {entry.sha256} is gone")
    install(path, dest)
    note = (
        f"offline: using cached schedule {entry.schedule_id} (sha256 {entry.sha256[:12]}) "
        f"fetched at {entry.fetched_at}: {reason}"
    )
    return _result(dest, entry, from_cache=True, offline=True, notes=[note])


def _result(
    dest: Path, entry: CacheEntry, from_cache: bool, offline: bool, notes: list[str]
) -> FetchedLibrary:
    return FetchedLibrary(
        dest, entry.sha256, entry.schedule_id, from_cache, offline, entry.fetched_at, tuple(notes)
    )


def install(source: Path, dest: Path) -> None:
    """Copy ``source`` to ``dest`` atomically (a temporary file beside ``dest``, a rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    os.close(handle)
    try:
        shutil.copyfile(source, temp)
        os.chmod(temp, 0o644)  # mkstemp's file is private; a library is not
        os.replace(temp, dest)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise

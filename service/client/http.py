"""A Python client of the tunehub REST API (what the CLI and builds use)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from service.client.cache import LibraryCache
from service.client.downloads import check_download
from service.client.errors import IntegrityError, TunehubError, UnsafeArtifact, answer_error
from service.client.fetch import FetchedLibrary, fetch_library

__all__ = ["FetchedLibrary", "IntegrityError", "TunehubClient", "TunehubError"]

DEFAULT_URL = "http://127.0.0.1:8000"
WORKLOAD_FILE = "database_workload.json"  # the two files of a MetaSchedule JSONDatabase
RECORD_FILE = "database_tuning_record.json"
FINAL_STATES = ("succeeded", "failed", "cancelled")


def poll_until_final(
    read: Callable[[], dict[str, Any]],
    what: str,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Call ``read`` every ``poll_s`` until what it returns has a final ``state`` (succeeded,
    failed, cancelled: jobs and models alike) and return that; ``on_progress`` sees every
    read; `TimeoutError` naming ``what`` after ``timeout_s``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        current = read()
        if on_progress:
            on_progress(current)
        if current["state"] in FINAL_STATES:
            return current
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"{what} still {current['state']} after {timeout_s} s")
        time.sleep(poll_s)


class TunehubClient:
    """Talks to one tunehub server (``TUNEHUB_URL`` or http://127.0.0.1:8000 by default), with
    an API token (``token`` or ``TUNEHUB_TOKEN``; none: anonymous, fine where auth is off)."""

    def __init__(
        self, base_url: str | None = None, timeout: float = 60.0, token: str | None = None
    ) -> None:
        self.base_url = (base_url or os.environ.get("TUNEHUB_URL") or DEFAULT_URL).rstrip("/")
        token = token or os.environ.get("TUNEHUB_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=self.base_url + "/api/v1", timeout=timeout, headers=headers
        )

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> TunehubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(self, response: httpx.Response) -> Any:
        """The body of a successful answer; `TunehubError` for an error answer."""
        if response.status_code >= 400:
            raise answer_error(response)
        return response.json()

    def _object(self, response: httpx.Response) -> dict[str, Any]:
        """A successful answer whose body is a JSON object."""
        body: dict[str, Any] = self._json(response)
        return body

    def _objects(self, response: httpx.Response) -> list[dict[str, Any]]:
        """A successful answer whose body is a JSON array of objects."""
        body: list[dict[str, Any]] = self._json(response)
        return body

    # -- jobs ---------------------------------------------------------------------------------
    def submit(
        self,
        operator: str,
        params: dict[str, Any],
        target: str | dict[str, Any] = "host",
        trials: int = 64,
        priority: int = 0,
        submitted_by: str | None = None,
        space: str = "auto",
    ) -> dict[str, Any]:
        """Submit a tuning job; returns the job (already succeeded if it was a cache hit).
        ``target``: "host", a JSON target, or a target's key or label. ``space``: "auto",
        "plain" or "packed" (see `tuning.search.spaces`). ``submitted_by`` is ignored by the service
        (the job is the token's identity); it stays for old callers."""
        workload = {"operator": {"name": operator, "params": params}}
        return self._post_job(workload, target, trials, priority, submitted_by, space)

    def submit_tir(
        self,
        source: str,
        fmt: str = "tvmscript",
        target: str | dict[str, Any] = "host",
        trials: int = 64,
        priority: int = 0,
        submitted_by: str | None = None,
        space: str = "auto",
    ) -> dict[str, Any]:
        """Submit a raw TIR function (TVMScript text or TVM JSON) for tuning."""
        workload = {"tir": {"format": fmt, "source": source}}
        return self._post_job(workload, target, trials, priority, submitted_by, space)

    def _post_job(
        self,
        workload: dict[str, Any],
        target: str | dict[str, Any],
        trials: int,
        priority: int,
        submitted_by: str | None,
        space: str,
    ) -> dict[str, Any]:
        body = {
            **workload,
            "target": target,
            "trials": trials,
            "priority": priority,
            "submitted_by": submitted_by,
            "space": space,
        }
        return self._object(self.http.post("/jobs", json=body))

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's current state and progress."""
        return self._object(self.http.get(f"/jobs/{job_id}"))

    def cancel(self, job_id: int) -> dict[str, Any]:
        """Ask the service to cancel a job."""
        return self._object(self.http.post(f"/jobs/{job_id}/cancel"))

    def events(self, job_id: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """The job's server-sent events as (event, data) until the stream ends (after the job
        is final, or when the connection drops)."""
        event = "message"
        data: list[str] = []
        timeout = httpx.Timeout(self.http.timeout.connect, read=60.0)
        with self.http.stream("GET", f"/jobs/{job_id}/events", timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                self._json(response)
            for line in response.iter_lines():
                if not line:
                    if data:
                        yield event, json.loads("\n".join(data))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())

    def watch(
        self,
        job_id: int,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float | None = None,
        reconnect_s: float = 2.0,
    ) -> dict[str, Any]:
        """Follow a job through its event stream until it is final; ``on_progress`` sees the
        job at every state change and progress step. A dropped stream (an API restart) is
        reopened; the first event after that is the current state. Returns the final job."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                for kind, job in self.events(job_id):
                    if kind == "end":
                        return self.job(job_id)
                    if on_progress:
                        on_progress(job)
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"job {job_id} still {job['state']} after {timeout_s} s")
            except (httpx.TransportError, json.JSONDecodeError):
                pass  # the service went away mid-stream: reconnect below
            try:
                job = self.job(job_id)
                if job["state"] in FINAL_STATES:
                    return job
            except httpx.TransportError:
                pass
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not final after {timeout_s} s")
            time.sleep(reconnect_s)

    def wait(
        self,
        job_id: int,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        poll_s: float = 1.0,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Poll a job until it is final; ``on_progress`` sees every poll. Returns the job."""
        return poll_until_final(
            lambda: self.job(job_id), f"job {job_id}", on_progress, poll_s, timeout_s
        )

    # -- schedules ----------------------------------------------------------------------------
    def schedules(
        self, operator: str | None = None, target: str | None = None
    ) -> list[dict[str, Any]]:
        """Verified best schedules, filtered by operator and target (key, label or 'host')."""
        params = {k: v for k, v in {"operator": operator, "target": target}.items() if v}
        return self._objects(self.http.get("/schedules", params=params))

    def schedule(self, schedule_id: int) -> dict[str, Any]:
        """One schedule with its trace and TIR."""
        return self._object(self.http.get(f"/schedules/{schedule_id}"))

    def download_artifact(self, schedule_id: int, dest: str | Path) -> str:
        """Download a schedule's shared library to ``dest`` and check its sha256 (returned)."""
        return self.download(
            f"/schedules/{schedule_id}/artifact", dest, f"artifact of schedule {schedule_id}"
        )

    def download(self, path: str, dest: str | Path, what: str) -> str:
        """Stream the library at ``path`` (under ``/api/v1``) to ``dest`` through a partial
        file, check it against the ``X-Content-SHA256`` the server announced and with
        `tuning.checks.library_check` (what a process may load), and return that sha256;
        `IntegrityError` (naming ``what``) when they differ, `UnsafeArtifact` when the check
        refuses it: nothing is left at ``dest`` then."""

        dest = Path(dest)
        digest = hashlib.sha256()
        partial = dest.with_name(dest.name + ".partial")
        with self.http.stream("GET", path) as response:
            if response.status_code >= 400:
                response.read()
                self._json(response)
            announced: str = response.headers.get("x-content-sha256", "")
            with open(partial, "wb") as handle:
                for chunk in response.iter_bytes():
                    digest.update(chunk)
                    handle.write(chunk)
        if digest.hexdigest() != announced:
            partial.unlink(missing_ok=True)
            raise IntegrityError(f"{what}: sha256 {digest.hexdigest()} != announced {announced!r}")
        try:
            check_download(partial, what)
        except UnsafeArtifact:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(dest)
        return announced

    def fetch_library(
        self,
        target: str | dict[str, Any],
        dest: str | Path,
        operator: str | None = None,
        params: dict[str, Any] | None = None,
        workload: str | None = None,
        cache: LibraryCache | None = None,
    ) -> FetchedLibrary:
        """Write the verified library of ``operator`` with ``params`` (or of the workload hash
        ``workload``) on ``target`` to ``dest``, through the library cache (default
        ``$XDG_CACHE_HOME/tunehub`` or ``~/.cache/tunehub``): an unchanged library is not
        downloaded again, and an unreachable server is answered from the cache (``offline``).
        Raises `service.client.fetch.NotTuned` when nothing is tuned for the key (see
        `service.client.fetch.fetch_library` for the other errors)."""
        return fetch_library(
            self.http, self.base_url, target, dest, operator, params, workload, cache
        )

    def operators(self) -> list[dict[str, Any]]:
        """The operator catalog with parameter schemas."""
        return self._objects(self.http.get("/operators"))

    def export_database(self, target: str, directory: str | Path) -> dict[str, Any]:
        """Write the target's records as a MetaSchedule JSON database into ``directory``
        (`database_workload.json`, `database_tuning_record.json`); returns the summary."""
        answer = self._object(self.http.get("/export", params={"target": target}))
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        for name in (WORKLOAD_FILE, RECORD_FILE):
            (folder / name).write_text(answer.pop(name))
        return answer

    def import_database(
        self, directory: str | Path, target: str | dict[str, Any]
    ) -> dict[str, Any]:
        """Send a MetaSchedule JSON database folder measured on ``target``; the service stores
        it and queues the verification of each workload's best. Returns the summary."""
        folder = Path(directory)
        body: dict[str, Any] = {"target": target}
        for name in (WORKLOAD_FILE, RECORD_FILE):
            body[name] = (folder / name).read_text()
        return self._object(self.http.post("/import", json=body, timeout=600))

    def workers(self) -> list[dict[str, Any]]:
        """The worker fleet: live, stale and stopped workers with their targets and hardware."""
        return self._objects(self.http.get("/workers"))

    def targets(self) -> dict[str, Any]:
        """The host target and every known target."""
        return self._object(self.http.get("/targets"))

    def me(self) -> dict[str, Any]:
        """Who the token is: identity, scopes, expiry and the limits that apply."""
        return self._object(self.http.get("/me"))

    # -- the build side -----------------------------------------------------------------------
    def lookup(
        self, target: str | dict[str, Any], workloads: list[str], allow_neighbour: bool = False
    ) -> dict[str, Any]:
        """The verified bests of many workloads (structural hashes) on one target, in one
        request: ``{"target": {"key", "label"}, "tvm_series", "schedules": {hash: ...},
        "missing": [...]}``. ``target``: "host", a JSON target, or a stored key or label.
        ``allow_neighbour``: an untuned workload the service knows is answered with its nearest
        tuned neighbour's schedule (``verified: false``), and ``withdrawn`` lists the hashes
        whose neighbour answer failed verification."""
        body: dict[str, Any] = {"target": target, "workloads": workloads}
        if allow_neighbour:
            body["allow_neighbour"] = True
        return self._object(self.http.post("/lookup", json=body))

    def upload_tasks(
        self, target: str | dict[str, Any], tasks: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """Send tasks a build misses, ``(name, module as TVM JSON)`` each, to be tuned (needs
        ``submit-code``): ``{"target": {"key", "label"}, "tasks": [{"name", "workload",
        "state", "job_id"}]}``, ``state`` one of tuned, neighbour, tuning, queued."""
        body = {"target": target, "tasks": [{"name": n, "module": m} for n, m in tasks]}
        return self._object(self.http.post("/tasks", json=body, timeout=600))

    def top_records(self, workload: str, target_key: str, k: int = 5) -> list[dict[str, Any]]:
        """The ``k`` fastest verified records of one workload on one target (by key)."""
        params: dict[str, str | int] = {"workload": workload, "target": target_key, "k": k}
        return self._objects(self.http.get("/top-records", params=params))

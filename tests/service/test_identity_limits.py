"""Per-identity limits over a real uvicorn server (SQLite store): the write rate (a 429 with
Retry-After that spares reads), the cap on queued jobs, and with auth off, limits per address."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from service.web.shared_limits.local import WriteLimiter
from tests.service.deployment import Deployment, job_body


class Clock:
    """A monotonic clock the test moves by hand: the buckets refill only when it says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _writes_on(d: Deployment, clock: Clock) -> None:
    """The running server's write limiter, with the deployment's rate and burst, on ``clock``
    (the limiter's own hook; requests read the services from the app's state each time)."""
    services = d.app.state.services
    writes = WriteLimiter(d.settings.write_rate_per_s, d.settings.write_burst, clock)
    d.app.state.services = replace(services, limits=replace(services.limits, writes=writes))


def test_write_rate_limit_is_a_429_with_retry_after_and_spares_reads(tmp_path: Path) -> None:
    with Deployment(tmp_path, auth=True, write_rate_per_s=0.5, write_burst=3) as d:
        # The clock stands still while the burst is spent: however slow the machine, no token
        # comes back between these requests (with the wall clock, a 2 s stall refilled one).
        clock = Clock()
        _writes_on(d, clock)
        statuses = [d.post("submit", "/jobs/987654/cancel").status_code for _ in range(4)]
        assert statuses == [404, 404, 404, 429]
        limited = d.post("submit", "/jobs", job_body())
        assert limited.status_code == 429 and limited.json()["type"] == "rate_limited"
        assert limited.headers["retry-after"] == "2"  # one token at 0.5/s
        assert limited.json()["retry_after_s"] == 2
        assert d.post("other-submit", "/jobs", job_body()).status_code == 201  # per identity
        assert all(d.get("submit", "/jobs").status_code == 200 for _ in range(20))  # reads
        clock.now += 1.9
        assert d.post("submit", "/jobs", job_body()).status_code == 429  # not yet
        clock.now += 0.1  # one token back at 0.5/s
        assert d.post("submit", "/jobs", job_body()).status_code == 201
        assert d.post("submit", "/jobs", job_body()).status_code == 429  # and only one


def test_queued_jobs_per_identity_are_capped(tmp_path: Path) -> None:
    with Deployment(tmp_path, auth=True, write_rate_per_s=0, max_active_jobs=2) as d:
        first = d.post("submit", "/jobs", job_body()).json()
        assert d.post("submit", "/jobs", job_body()).status_code == 201
        capped = d.post("submit", "/jobs", job_body())
        assert capped.status_code == 429 and capped.json()["type"] == "too_many_jobs"
        assert int(capped.headers["retry-after"]) >= 1
        assert d.post("other-submit", "/jobs", job_body()).status_code == 201
        d.post("submit", f"/jobs/{first['id']}/cancel")
        assert d.post("submit", "/jobs", job_body()).status_code == 201


def test_with_auth_off_everyone_is_local_and_limits_count_per_address(tmp_path: Path) -> None:
    with Deployment(tmp_path, write_rate_per_s=0.01, write_burst=3) as d:
        me = d.get("anonymous", "/me").json()
        assert me["identity"] == "local" and me["auth"] is False
        assert me["scopes"] == ["read", "submit", "submit-code", "admin"]
        bogus = {"Authorization": "Bearer whatever"}  # ignored: there is no auth
        job = d.http.post("/jobs", json=job_body(submitted_by="x"), headers=bogus)
        assert job.status_code == 201 and job.json()["submitted_by"] == "local"
        # set-up + this job spent 2 of the address's 3; tokens of any name share the bucket
        assert d.post("other-submit", "/jobs/987654/cancel").status_code == 404
        assert d.post("submit", "/jobs/987654/cancel").status_code == 429

"""Auth over a real uvicorn server (SQLite store): the scope matrix, generated from the route
table, token states, ownership, admin-only requests, and the client CLI's token (per-identity
limits: test_identity_limits.py; the token CLI and `serve`'s refusal: test_token_cli.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from schedules_db.tables import ApiTokenRow
from service.entry.cli import main
from service.web.auth import Access, route_table
from tests.service.deployment import PREFIX, WHO, Deployment, job_body


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("auth")
    limits_off = {"write_rate_per_s": 0, "max_active_jobs": 0, "parse_seconds_per_minute": 0}
    with Deployment(root, auth=True, **limits_off) as deployment:
        yield deployment


def _routes(app: Any) -> list[tuple[str, str, list[Access]]]:
    return [row for row in route_table(app) if row[1].startswith(PREFIX)]


# ---------------------------------------------------------------- the scope matrix
@dataclass
class Sample:
    """A request to one route: what an identity allowed by its rule gets (``ok``), and any
    identity for which the route itself says otherwise (``override``)."""

    ok: int
    path: dict[str, str] = field(default_factory=dict)  # name -> key in `ids`
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    override: dict[str, int] = field(default_factory=dict)


SAMPLES = {
    ("GET", "/api/v1/jobs"): Sample(200),
    ("POST", "/api/v1/jobs"): Sample(201, body=job_body()),
    ("GET", "/api/v1/jobs/{job_id}"): Sample(200, path={"job_id": "job"}),
    ("POST", "/api/v1/jobs/{job_id}/cancel"): Sample(
        200, path={"job_id": "job"}, override={"submit-code": 403, "other-submit": 403}
    ),
    ("GET", "/api/v1/jobs/{job_id}/events"): Sample(200, path={"job_id": "done"}),
    ("GET", "/api/v1/schedules"): Sample(200),
    ("GET", "/api/v1/schedules/best"): Sample(404, query={"workload": "1", "target": "host"}),
    ("GET", "/api/v1/schedules/{schedule_id}"): Sample(404, path={"schedule_id": "none"}),
    ("GET", "/api/v1/schedules/{schedule_id}/artifact"): Sample(404, path={"schedule_id": "none"}),
    ("GET", "/api/v1/workloads"): Sample(200),
    ("GET", "/api/v1/workloads/{workload_id}"): Sample(200, path={"workload_id": "workload"}),
    ("GET", "/api/v1/workloads/{workload_id}/records"): Sample(
        200, path={"workload_id": "workload"}, query={"target": "host"}
    ),
    ("GET", "/api/v1/export"): Sample(200, query={"target": "host"}),
    ("POST", "/api/v1/import"): Sample(422, body={}),
    ("GET", "/api/v1/operators"): Sample(200),
    ("GET", "/api/v1/targets"): Sample(200),
    ("GET", "/api/v1/workers"): Sample(200),
    ("GET", "/api/v1/me"): Sample(200),
    ("POST", "/api/v1/lookup"): Sample(200, body={"target": "host", "workloads": ["1"]}),
    ("GET", "/api/v1/top-records"): Sample(200, query={"workload": "1", "target": "0" * 32}),
    ("GET", "/api/v1/models"): Sample(200),
    ("POST", "/api/v1/models"): Sample(422, body={}),
    ("POST", "/api/v1/tasks"): Sample(422, body={}),
    ("GET", "/api/v1/models/{model_id}"): Sample(404, path={"model_id": "none"}),
    ("POST", "/api/v1/models/{model_id}/cancel"): Sample(404, path={"model_id": "none"}),
    ("GET", "/api/v1/models/{model_id}/artifact"): Sample(404, path={"model_id": "none"}),
}


UNREGISTERED = {"kind": "llvm", "num-cores": 1}  # a target no worker has
# POST /jobs bodies whose content needs more than the route's `submit`: (body, scope it needs,
# status with it (None: past auth, the sandbox judges the source), status without it)
BODY_RULES = {
    "tir": (
        {"tir": {"format": "tvmscript", "source": "x = 1"}, "trials": 4},
        "submit-code",
        None,
        403,
    ),
    "priority 5": (job_body(priority=5), "admin", 201, 403),
    "unregistered target": (job_body(target=UNREGISTERED), "admin", 201, 422),
}


def _expected(rules: list[Access], who: str, sample: Sample, anonymous_reads: bool = False) -> int:
    (rule,) = rules
    if WHO[who] is None:
        return sample.ok if rule.anonymous and anonymous_reads else 401
    if who in sample.override:
        return sample.override[who]
    return sample.ok if rule.scope in _scopes(who) else 403


def _scopes(who: str) -> set[str]:
    from schedules_db.tokens import effective_scopes

    return set(effective_scopes(WHO[who][1]))


def _send(d: Deployment, who: str, method: str, path: str, sample: Sample, ids: dict) -> Any:
    url = path.removeprefix(PREFIX)
    for name, key in sample.path.items():
        url = url.replace("{" + name + "}", str(ids[key]))
    if method == "GET":
        return d.get(who, url, params=sample.query)
    return d.post(who, url, sample.body, params=sample.query)


def test_every_api_route_declares_exactly_one_access_rule(deployment: Deployment) -> None:
    routes = _routes(deployment.app)
    assert len(routes) >= len(SAMPLES)
    without = [f"{m} {p}" for m, p, rules in routes if len(rules) != 1]
    assert without == [], f"routes without exactly one access rule: {without}"
    unsampled = [f"{m} {p}" for m, p, _ in routes if (m, p) not in SAMPLES]
    assert unsampled == [], f"add these routes to SAMPLES (the scope matrix): {unsampled}"


def test_scope_matrix(deployment: Deployment) -> None:
    """Every /api/v1 route x {anonymous, read, submit, submit-code, admin, another identity's
    submit} gets the status its rule (and the route's own ownership rule) says."""
    d = deployment
    job = d.post("submit", "/jobs", job_body()).json()
    done = d.post("submit", "/jobs", job_body())
    assert done.status_code == 201
    d.post("submit", f"/jobs/{done.json()['id']}/cancel")
    ids = {"job": job["id"], "done": done.json()["id"], "none": 987654}
    ids["workload"] = job["workload"]["id"]
    table, wrong = {}, []
    for method, path, rules in _routes(d.app):
        sample = SAMPLES[(method, path)]
        for who in WHO:
            response = _send(d, who, method, path, sample, ids)
            expected = _expected(rules, who, sample)
            table[(method, path, who)] = response.status_code
            if response.status_code != expected:
                wrong.append((method, path, who, expected, response.status_code, response.text))
            if response.status_code == 401:
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert response.json()["type"] == "missing_token"
            if response.status_code == 403:
                assert response.json()["type"] in ("insufficient_scope", "not_owner")
    for label, (body, scope, ok, refused) in BODY_RULES.items():
        for who in WHO:
            response = d.post(who, "/jobs", body)
            if WHO[who] is None:
                expected = 401
            elif "submit" not in _scopes(who):
                expected = 403  # the route's own rule
            else:
                expected = ok if scope in _scopes(who) else refused
            table[("POST", f"/api/v1/jobs [{label}]", who)] = response.status_code
            passed = expected is None and response.status_code not in (401, 403)
            if response.status_code != expected and not passed:
                wrong.append((label, who, expected, response.status_code, response.text))
    assert wrong == []
    print("\n" + _render(table))  # the matrix, for the record (pytest -s)


def _render(table: dict[tuple[str, str, str], int]) -> str:
    rows = sorted({(m, p) for m, p, _ in table}, key=lambda mp: (mp[1], mp[0]))
    lines = ["| route | " + " | ".join(WHO) + " |", "|---" * (len(WHO) + 1) + "|"]
    for m, p in rows:
        lines.append(f"| {m} {p} | " + " | ".join(str(table[(m, p, w)]) for w in WHO) + " |")
    return "\n".join(lines)


def test_anonymous_reads_when_the_operator_allows_them(tmp_path: Path) -> None:
    with Deployment(tmp_path, auth=True, anonymous_reads=True, write_rate_per_s=0) as d:
        job = d.post("submit", "/jobs", job_body()).json()
        d.post("submit", f"/jobs/{job['id']}/cancel")
        ids = {"job": job["id"], "done": job["id"], "none": 987654}
        ids["workload"] = job["workload"]["id"]
        for method, path, rules in _routes(d.app):
            sample = SAMPLES[(method, path)]
            response = _send(d, "anonymous", method, path, sample, ids)
            expected = _expected(rules, "anonymous", sample, anonymous_reads=True)
            assert response.status_code == expected, (method, path, response.text)


# ---------------------------------------------------------------- tokens
def test_missing_unknown_expired_and_revoked_tokens_are_401(tmp_path: Path) -> None:
    # The test rewrites a token's expiry under the server: no token cache, whose bound on a
    # revocation's delay tests/service/test_token_cache.py proves.
    with Deployment(tmp_path, auth=True, token_cache_s=0) as d:
        expiring, info = d.tokens.create("eve", ["read"], datetime.now(timezone.utc) + timedelta(1))
        revoked, gone = d.tokens.create("mallory", ["admin"])
        assert d.http.get("/jobs", headers={"Authorization": f"Bearer {expiring}"}).is_success
        with d.engine.begin() as conn:  # time passes
            past = datetime.now(timezone.utc) - timedelta(seconds=1)
            conn.execute(
                update(ApiTokenRow).where(ApiTokenRow.id == info.id).values(expires_at=past)
            )
        d.tokens.revoke(gone.id)
        cases = {
            None: "missing_token",
            "Basic dXNlcjpwYXNz": "missing_token",
            "Bearer thb_notatoken": "invalid_token",
            f"Bearer {expiring}": "token_expired",
            f"Bearer {revoked}": "token_revoked",
        }
        for header, kind in cases.items():
            headers = {"Authorization": header} if header else {}
            for response in (
                d.http.get("/jobs", headers=headers),
                d.http.post("/jobs", json=job_body(), headers=headers),
            ):
                assert response.status_code == 401, (header, response.text)
                assert response.json()["type"] == kind
                assert response.headers["www-authenticate"].startswith('Bearer realm="tunehub"')


def test_who_may_send_a_body_is_decided_before_it_is_read(deployment: Deployment) -> None:
    """Without a token (or with one lacking the scope) a write is refused before its body is
    read: broken JSON and a 1 MB import get the 401 or 403, not a 422 after parsing them
    (a `submit` token too: an import needs `submit-code`)."""
    broken = {"content": b"{not json", "headers": {"content-type": "application/json"}}
    big = {"target": "host", "database_workload.json": "x" * 2**20,
           "database_tuning_record.json": ""}  # fmt: skip
    for who, status in (("anonymous", 401), ("read", 403), ("submit", 403)):
        headers = {**broken["headers"], **deployment.headers(who)}
        assert deployment.http.post("/import", content=broken["content"], headers=headers
                                    ).status_code == status  # fmt: skip
        assert deployment.post(who, "/import", big).status_code == status
    # An import carries modules and traces: code, so `submit-code` (read, then judged).
    assert deployment.post("submit-code", "/import", big).status_code == 422


def test_me_says_who_the_token_is(deployment: Deployment) -> None:
    expires = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=30)
    text, info = deployment.tokens.create("dora", ["submit-code"], expires)
    response = deployment.http.get("/me", headers={"Authorization": f"Bearer {text}"})
    assert response.status_code == 200
    me = response.json()
    assert me["identity"] == "dora" and me["auth"] is True and me["token_id"] == info.id
    assert me["granted"] == ["submit-code"]
    assert me["scopes"] == ["read", "submit", "submit-code"]
    assert datetime.fromisoformat(me["expires_at"]) == expires
    assert set(me["limits"]) >= {"write_rate_per_s", "write_burst", "max_active_jobs"}


# ---------------------------------------------------------------- rules in the body
def test_the_job_is_the_tokens_identity_whatever_the_body_says(deployment: Deployment) -> None:
    response = deployment.post("submit", "/jobs", job_body(submitted_by="mallory"))
    assert response.status_code == 201
    assert response.json()["submitted_by"] == "alice"
    assert deployment.get("read", f"/jobs/{response.json()['id']}").json()["submitted_by"] == (
        "alice"
    )


def test_cancelling_another_identitys_job_is_403(deployment: Deployment) -> None:
    job = deployment.post("submit", "/jobs", job_body()).json()
    response = deployment.post("other-submit", f"/jobs/{job['id']}/cancel")
    assert response.status_code == 403 and response.json()["type"] == "not_owner"
    assert deployment.get("read", f"/jobs/{job['id']}").json()["state"] == "queued"
    assert deployment.post("admin", f"/jobs/{job['id']}/cancel").json()["state"] == "cancelled"


def test_priority_above_zero_needs_admin(deployment: Deployment) -> None:
    for who in ("submit", "submit-code"):
        response = deployment.post(who, "/jobs", job_body(priority=5))
        assert response.status_code == 403, response.text
        assert response.json()["loc"] == ["body", "priority"]
        assert response.json()["scope"] == "admin"
    assert deployment.post("submit", "/jobs", job_body(priority=-5)).status_code == 201
    response = deployment.post("admin", "/jobs", job_body(priority=5))
    assert response.status_code == 201 and response.json()["priority"] == 5


def test_raw_tir_needs_submit_code_and_is_refused_before_it_is_parsed(
    deployment: Deployment,
) -> None:
    body = {"tir": {"format": "tvmscript", "source": "import os"}, "trials": 4}
    before = [job.id for job in deployment.store.jobs.list_jobs(limit=1000)]
    response = deployment.post("submit", "/jobs", body)
    assert response.status_code == 403 and response.json()["loc"] == ["body", "tir"]
    assert response.json()["scope"] == "submit-code"
    assert [job.id for job in deployment.store.jobs.list_jobs(limit=1000)] == before
    # submit-code passes the rule (the source itself is then judged by the sandbox)
    allowed = deployment.post("submit-code", "/jobs", body)
    assert allowed.status_code not in (401, 403), allowed.text


def test_a_build_without_submit_code_warns_and_builds_with_what_is_there(
    deployment: Deployment,
) -> None:
    """``tune_missing`` with a read-only token: the upload's 403 is one `TuneMissingWarning`
    naming the scope, nothing is written, and the build goes on (untuned tasks stay untuned)."""
    import tvm
    from tvm.script.parser.core.entry import parse

    from service.client import TunehubClient
    from service.client.errors import TuneMissingWarning
    from service.client.tvm_database import TunehubDatabase
    from tests.tuning.model_cases import TINY_RELAX
    from tuning.hardware.targets import resolve_target

    target = tvm.target.Target(resolve_target("host").canonical)
    module = parse(TINY_RELAX.replace("from tvm.script import", "#"))
    workloads = len(deployment.store.catalog.list_workloads(limit=100_000))
    with TunehubClient(deployment.server.url, token=deployment.token["read"]) as client:
        database = TunehubDatabase(client, target, cache=False, tune_missing=True)
        with pytest.warns(TuneMissingWarning, match="submit-code") as caught:
            assert database.prefetch(module) == 0
        assert len(caught) == 1 and "HTTP 403" in str(caught[0].message)
        assert database.prefetch(module) == 0  # no second upload, no second warning
    assert not database.sent and not database.tune_missing
    assert len(deployment.store.catalog.list_workloads(limit=100_000)) == workloads


def test_a_target_no_worker_registered_needs_admin(deployment: Deployment) -> None:
    target = {"kind": "llvm", "num-cores": 2}
    response = deployment.post("submit", "/jobs", job_body(target=target))
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "target"] and error["type"] == "unknown_target"
    host_label = deployment.get("read", "/targets").json()["host"]["label"]
    assert host_label in error["msg"] and error["input"] == [host_label]
    admin = deployment.post("admin", "/jobs", job_body(target=target))
    assert admin.status_code == 201, admin.text
    # created by the admin's job, but still no worker has it: others still get the 422
    assert deployment.post("submit", "/jobs", job_body(target=target)).status_code == 422


def test_openapi_documents_the_auth_and_limit_statuses(deployment: Deployment) -> None:
    spec = deployment.http.get(deployment.server.url + "/openapi.json").json()
    for method, path, rules in _routes(deployment.app):
        documented = set(spec["paths"][path][method.lower()]["responses"])
        assert {"401", "403"} <= documented, (method, path)
        if rules[0].write:
            assert "429" in documented, (method, path)


# ---------------------------------------------------------------- CLI
def test_cli_and_client_send_the_token(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = deployment.server.url
    assert main(["whoami", "--server", url, "--token", deployment.token["submit"]]) == 0
    assert capsys.readouterr().out.startswith("alice: read, submit (token ")
    monkeypatch.setenv("TUNEHUB_TOKEN", deployment.token["admin"])
    assert main(["whoami", "--server", url]) == 0
    assert capsys.readouterr().out.startswith("root: read, submit, submit-code, admin")
    job = deployment.post("submit", "/jobs", job_body()).json()
    argv = ["cancel", str(job["id"]), "--server", url, "--token", deployment.token["other-submit"]]
    assert main(argv) == 2
    assert "HTTP 403" in capsys.readouterr().err
    monkeypatch.delenv("TUNEHUB_TOKEN")
    assert main(["status", str(job["id"]), "--server", url]) == 2
    assert "HTTP 401" in capsys.readouterr().err

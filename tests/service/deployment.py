"""A tunehub server over its own SQLite store, with a token per kind of caller: what the auth,
limit and imported-trace tests send their requests to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread

PREFIX = "/api/v1"
# The matrix's columns: who asks, with which granted scopes ("anonymous": no token).
WHO = {
    "anonymous": None,
    "read": ("reader", ["read"]),
    "submit": ("alice", ["submit"]),  # owns the jobs the matrix acts on
    "submit-code": ("carol", ["submit-code"]),
    "admin": ("root", ["admin"]),
    "other-submit": ("bob", ["submit"]),
}


def job_body(trials: int = 8, **extra: Any) -> dict[str, Any]:
    """A tiny matmul job's body."""
    return {"operator": {"name": "matmul", "params": dict(TINY)}, "trials": trials, **extra}


class Deployment:
    """A server over its own SQLite store, with one token per `WHO` column and a worker
    registered for the host target (so that non-admins may submit to it)."""

    def __init__(self, root: Path, **settings: Any) -> None:
        self.settings = Settings(data_dir=root, **settings)
        engine = make_engine(self.settings.store_url)
        upgrade_schema(engine)
        self.engine, self.tokens, self.store = engine, TokenStore(engine), Store(engine)
        self.app = create_app(self.settings, run_reaper=False)
        self.server = ServerThread(self.app)
        self.token: dict[str, str] = {}
        for column, spec in WHO.items():
            if spec:
                self.token[column], _ = self.tokens.create(spec[0], spec[1])

    def __enter__(self) -> Deployment:
        self.server.__enter__()
        self.http = httpx.Client(base_url=self.server.url + PREFIX, timeout=120)
        host = self.post("admin", "/jobs", job_body(trials=1, priority=-100))
        assert host.status_code == 201, host.text
        self.store.fleet.register("w1", "h", 1, [self._target_id(host.json())], {})
        return self

    def _target_id(self, job: dict[str, Any]) -> int:
        return self.store.catalog.find_target(job["target"]["key"]).id

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        self.server.__exit__(*exc)
        self.engine.dispose()

    def headers(self, who: str) -> dict[str, str]:
        token = self.token.get(who)
        return {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, who: str, path: str, **kw: Any) -> httpx.Response:
        return self.http.get(path, headers=self.headers(who), **kw)

    def post(self, who: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.http.post(path, json=body, headers=self.headers(who), **kw)

"""Bearer tokens cached for a fraction of a second (`service.web.token_cache`): a client's
burst costs the store a few reads, and a revocation made by another process (the CLI) stops
the token on every replica within ``TUNEHUB_TOKEN_CACHE_S`` (0.5 s), on PostgreSQL with two
replicas served for real."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event

from schedules_db import make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.token_cache import VerifiedTokens
from tests.conftest import ServerThread, reset_pg_schema

TTL_S = 0.5  # the default


@pytest.fixture
def token_selects() -> Iterator[list[str]]:
    """The SELECTs of the ``api_tokens`` table any engine of this process runs (the servers
    below run in it)."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM api_tokens" in statement:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    yield seen
    event.remove(Engine, "before_cursor_execute", count)


def test_a_revoked_token_stops_on_every_replica_within_the_cache_time(
    pg_database: str, tmp_path: Path, token_selects: list[str]
) -> None:
    reset_pg_schema(pg_database)
    engine = make_engine(pg_database)
    upgrade_schema(engine)
    tokens = TokenStore(engine)
    text, info = tokens.create("reader", ["read"])
    headers = {"Authorization": f"Bearer {text}"}
    with ExitStack() as stack:
        urls = []
        for n in range(2):
            settings = Settings(data_dir=tmp_path / f"r{n}", database_url=pg_database, auth=True)
            server = stack.enter_context(ServerThread(create_app(settings, run_reaper=False)))
            urls.append(server.url + "/api/v1/operators")
        clients = [stack.enter_context(httpx.Client(timeout=30)) for _ in urls]
        # A burst: each replica reads the row about once per TTL, not once per request.
        token_selects.clear()
        started = time.monotonic()
        for _ in range(40):
            for client, url in zip(clients, urls, strict=True):
                assert client.get(url, headers=headers).status_code == 200
        elapsed = time.monotonic() - started
        assert len(token_selects) <= 2 * (elapsed / TTL_S + 1), (len(token_selects), elapsed)
        # Revoked the way `tunehub token revoke` does it: in the store, from another engine.
        tokens.revoke(info.id)
        revoked_at = time.monotonic()
        for client, url in zip(clients, urls, strict=True):
            while True:
                sent = time.monotonic()  # a 200 was checked after this, before its row aged
                answer = client.get(url, headers=headers)
                if answer.status_code != 200:
                    break
                assert sent - revoked_at < TTL_S, "a revoked token still answered"
            assert answer.status_code == 401 and answer.json()["type"] == "token_revoked"
    engine.dispose()


def test_the_cache_keeps_found_rows_for_its_time_only(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'tokens.db'}")
    upgrade_schema(engine)
    store = TokenStore(engine)
    text, info = store.create("reader", ["read"])
    now = [100.0]
    cache = VerifiedTokens(store, ttl_s=TTL_S, clock=lambda: now[0])
    assert cache.cached(text) is None and cache.find(text) == info  # read, remembered
    store.revoke(info.id)
    now[0] += TTL_S / 2
    assert cache.cached(text) == info  # within its time: the row as read
    now[0] += TTL_S / 2
    assert cache.cached(text) is None  # its time is up: read again
    found = cache.find(text)
    assert found is not None and found.state() == "revoked"
    # An unknown text is never remembered: each find asks the store again.
    reads: list[str] = []
    real_find = store.find
    store.find = lambda text: reads.append(text) or real_find(text)  # type: ignore[method-assign]
    assert cache.find("thb_unknown") is None and cache.find("thb_unknown") is None
    assert reads == ["thb_unknown", "thb_unknown"]
    off = VerifiedTokens(store, ttl_s=0, clock=lambda: now[0])
    assert off.find(text) is not None and off.cached(text) is None  # 0: never remembered
    engine.dispose()

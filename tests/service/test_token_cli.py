"""The token CLI on the server host (create, list, revoke, expiry) and `serve`'s refusal to
listen on a public address without auth."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from schedules_db import make_engine
from schedules_db.tokens import TokenStore
from service.entry.cli import main
from service.entry.host_cli import serve_refusal
from service.entry.token_cli import parse_expiry
from service.shared.settings import Settings


def test_token_cli_creates_lists_and_revokes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    db = ["--database-url", url]
    argv = ["token", "create", "--name", "ops", "--scope", "admin", "--expires", "30d", *db]
    assert main(argv) == 0
    out = capsys.readouterr()
    token = out.out.strip()
    assert re.fullmatch(r"thb_[A-Za-z0-9_-]{43}", token), out
    assert "ops (admin)" in out.err and "shown once" in out.err
    engine = make_engine(url)
    found = TokenStore(engine).find(token)
    assert found.name == "ops" and found.state() == "active"
    assert timedelta(days=29) < found.expires_at - datetime.now(timezone.utc) <= timedelta(days=30)
    assert (
        main(["token", "create", "--name", "ci", "--scope", "read", "--scope", "submit", *db]) == 0
    )
    capsys.readouterr()
    assert main(["token", "list", *db]) == 0
    listing = capsys.readouterr().out
    assert token not in listing and "ops" in listing and "read,submit" in listing
    assert main(["token", "revoke", "ops", *db]) == 0
    assert "revoked token" in capsys.readouterr().out
    assert TokenStore(engine).find(token).state() == "revoked"
    assert main(["token", "revoke", "ops", *db]) == 1  # nothing active left
    assert main(["token", "revoke", "2", *db]) == 0  # by id
    assert main(["token", "create", "--name", "local", "--scope", "read", *db]) == 2
    with pytest.raises(SystemExit):
        main(["token", "create", "--name", "x", "--scope", "root", *db])
    engine.dispose()


def test_expiry_parsing() -> None:
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert parse_expiry("30d", now) == now + timedelta(days=30)
    assert parse_expiry("12h", now) == now + timedelta(hours=12)
    assert parse_expiry("2031-02-03") == datetime(2031, 2, 3, tzinfo=timezone.utc)
    assert parse_expiry("2031-02-03T04:05:06+01:00") == datetime(
        2031, 2, 3, 3, 5, 6, tzinfo=timezone.utc
    )


def test_serve_refuses_a_public_address_without_auth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TUNEHUB_AUTH", raising=False)
    assert serve_refusal("0.0.0.0", Settings(), insecure=False)
    assert serve_refusal("192.0.2.7", Settings(), insecure=False)
    assert serve_refusal("0.0.0.0", Settings(auth=True), insecure=False) is None
    assert serve_refusal("0.0.0.0", Settings(), insecure=True) is None
    for host in ("127.0.0.1", "localhost", "::1"):
        assert serve_refusal(host, Settings(), insecure=False) is None
    started = time.monotonic()
    argv = ["serve", "--host", "0.0.0.0", "--workers", "0", "--data-dir", str(tmp_path)]
    assert main(argv) == 2
    assert time.monotonic() - started < 5
    assert "--insecure" in capsys.readouterr().err

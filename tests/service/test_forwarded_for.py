"""``X-Forwarded-For`` over a real server (uvicorn started as `tunehub serve` starts it, real
httpx): issue 37's finding A. uvicorn believed the header from 127.0.0.1, so a local client
became ``local@<anything>`` and escaped the per-address write rate, and bad dashboard logins
with a rotating header never met their 429. Now only a peer in ``trusted_proxies`` (default:
none) is believed (service.web.forwarded)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.forwarded import ForwardedFor, forwarded_client, networks
from tests.conftest import ServerThread

# burst 3, and no refill worth counting: the 4th POST of one client is the 429
SLOW = {"write_rate_per_s": 0.001, "write_burst": 3}


@contextmanager
def served(root: Path, **settings: Any) -> Iterator[httpx.Client]:
    app = create_app(Settings(data_dir=root, **settings), run_reaper=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def forged(i: int) -> dict[str, str]:
    return {"X-Forwarded-For": f"198.51.100.{i}", "X-Forwarded-Proto": "https"}


def test_by_default_a_forged_header_changes_neither_identity_nor_write_rate(
    tmp_path: Path,
) -> None:
    with served(tmp_path, **SLOW) as http:
        assert http.get("/api/v1/me", headers=forged(1)).json()["identity"] == "local"
        cancels = [http.post("/api/v1/jobs/987654/cancel", headers=forged(i)) for i in range(5)]
        assert [r.status_code for r in cancels] == [404, 404, 404, 429, 429]
        assert cancels[3].json()["type"] == "rate_limited"


def test_by_default_bad_logins_with_forged_headers_meet_their_429(tmp_path: Path) -> None:
    with served(tmp_path, auth=True, **SLOW) as http:
        statuses = [
            http.post("/dashboard/session", json={"token": "thb_bad"}, headers=forged(i))
            for i in range(5)
        ]
        assert [r.status_code for r in statuses] == [401, 401, 401, 429, 429]


def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    with served(tmp_path, trusted_proxies=("127.0.0.1",), **SLOW) as http:
        me = http.get("/api/v1/me", headers={"X-Forwarded-For": "203.0.113.7"})
        assert me.json()["identity"] == "local@203.0.113.7"
        # the client's own entries are left of the proxy's: the rightmost untrusted one counts
        chain = {"X-Forwarded-For": "10.9.9.9, 203.0.113.7, 127.0.0.1"}
        assert http.get("/api/v1/me", headers=chain).json()["identity"] == "local@203.0.113.7"
        assert http.get("/api/v1/me").json()["identity"] == "local"  # no header: the peer
        # each forwarded client has its own bucket; the proxy's own requests keep theirs
        one, two = {"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-For": "203.0.113.8"}
        post = "/api/v1/jobs/987654/cancel"
        assert [http.post(post, headers=one).status_code for _ in range(4)] == [404] * 3 + [429]
        assert http.post(post, headers=two).status_code == 404
        assert http.post(post).status_code == 404


def test_the_rightmost_untrusted_entry_is_the_client() -> None:
    proxies = networks(["127.0.0.1", "10.0.0.0/8", "fd00::/8"])
    assert forwarded_client(["1.1.1.1, 2.2.2.2"], proxies) == "2.2.2.2"
    assert forwarded_client(["1.1.1.1", "2.2.2.2, 10.1.2.3"], proxies) == "2.2.2.2"
    assert forwarded_client(["10.0.0.1, 127.0.0.1"], proxies) == "10.0.0.1"  # all proxies
    assert forwarded_client(["1.1.1.1, fd00::1"], proxies) == "1.1.1.1"
    assert forwarded_client(["2001:DB8::1"], proxies) == "2001:db8::1"
    assert forwarded_client(["1.1.1.1, unknown"], proxies) is None  # not an address: the peer
    assert forwarded_client([" , "], proxies) is None


def test_settings_parse_and_check_trusted_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEHUB_TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8,::1")
    settings = Settings.from_env()
    assert settings.trusted_proxies == ("127.0.0.1", "10.0.0.0/8", "::1")
    assert Settings().trusted_proxies == ()
    assert settings.as_env()["TUNEHUB_TRUSTED_PROXIES"] == "127.0.0.1,10.0.0.0/8,::1"
    monkeypatch.setenv("TUNEHUB_TRUSTED_PROXIES", "proxy.example")
    with pytest.raises(ValueError):
        Settings.from_env()
    with pytest.raises(ValueError):
        ForwardedFor(None, ["10.0.0.0/33"])  # type: ignore[arg-type]


def test_a_trusted_proxy_names_the_scheme(tmp_path: Path) -> None:
    """Behind a TLS proxy the browser's Origin is https: the login's origin check follows
    X-Forwarded-Proto from a trusted proxy (as uvicorn's did), and only from one."""
    for trusted, expected in (((), 403), (("127.0.0.1",), 401)):
        with served(tmp_path / str(expected), auth=True, trusted_proxies=trusted) as http:
            origin = f"https://{http.base_url.host}:{http.base_url.port}"
            headers = {"Origin": origin, "X-Forwarded-Proto": "https"}
            login = http.post("/dashboard/session", json={"token": "thb_x"}, headers=headers)
            assert login.status_code == expected, login.text


@pytest.mark.parametrize("api_workers", [1, 2])
def test_serve_starts_uvicorn_without_its_proxy_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_workers: int
) -> None:
    import signal

    import uvicorn

    from service.entry.host_cli import cmd_serve

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    args = argparse.Namespace(
        host="127.0.0.1", port=1, workers=0, api_workers=api_workers, access_log=False,
        insecure=False,
    )  # fmt: skip
    before = signal.getsignal(signal.SIGTERM)
    try:  # serve sets its SIGTERM handler, and with API workers exports its settings
        with mock.patch.dict(os.environ):
            assert cmd_serve(args, Settings(data_dir=tmp_path)) == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    assert [call["proxy_headers"] for call in calls] == [False]

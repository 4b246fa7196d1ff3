"""The Host check over a real server, with raw sockets (httpx and http.client normalise or add
``Host``): issue 37's finding B. A ``Host`` that is not ``host[:port]`` (``localhost:8000@evil.com``
was read as ``localhost``) and a request with two ``Host`` headers (the first was used) are a
400 ``invalid_host``; allowed names with ports, and ``/healthz`` for any well-formed host, pass."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.allowed_hosts import well_formed
from tests.conftest import ServerThread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("hosts"), allowed_hosts=("tunehub.example.org",)
    )
    with ServerThread(create_app(settings, run_reaper=False)) as running:
        yield running


def raw_get(server: ServerThread, path: str, *hosts: str) -> tuple[int, bytes]:
    """GET ``path`` with exactly the ``Host`` lines given: (status, body)."""
    lines = [f"GET {path} HTTP/1.1", *(f"Host: {h}" for h in hosts), "Connection: close"]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def refused(status: int, body: bytes) -> bool:
    return status == 400 and json.loads(body)["type"] == "invalid_host"


@pytest.mark.parametrize(
    "host",
    [
        "localhost:8000@evil.com",  # userinfo-like: was read as "localhost"
        "evil.com@localhost:8000",
        "localhost:8000/evil",
        "localhost:abc",
        "localhost:8000:9000",
        "[::1",
        "[not-v6]:8000",
        "::1",  # an IPv6 address must be bracketed
        "local host",
    ],
)
def test_a_host_that_is_not_host_port_is_refused(server: ServerThread, host: str) -> None:
    status, body = raw_get(server, "/api/v1/operators", host)
    assert refused(status, body), (status, body)
    assert refused(*raw_get(server, "/healthz", host))  # the exemption is for names only


def test_two_host_headers_are_refused_whichever_comes_first(server: ServerThread) -> None:
    for hosts in (("localhost", "evil.com"), ("evil.com", "localhost"), ("localhost",) * 2):
        assert refused(*raw_get(server, "/api/v1/operators", *hosts)), hosts
        assert refused(*raw_get(server, "/healthz", *hosts)), hosts


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "127.0.0.1:65535", "[::1]:8000", "[::1]", "LOCALHOST.",
     "tunehub.example.org:443"],
)  # fmt: skip
def test_allowed_names_with_and_without_ports_pass(server: ServerThread, host: str) -> None:
    assert raw_get(server, "/api/v1/operators", host)[0] == 200


def test_healthz_answers_any_well_formed_host(server: ServerThread) -> None:
    status, body = raw_get(server, "/healthz", "probe.internal:8080")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    assert refused(*raw_get(server, "/api/v1/operators", "probe.internal:8080"))
    assert raw_get(server, "/healthz")[0] == 200  # no Host at all: as before


def test_well_formed_follows_rfc_3986() -> None:
    assert well_formed("a-b.c_d~e:1") and well_formed("%41bc") and well_formed("[fe80::1]:80")
    assert not well_formed("") and not well_formed("a:") and not well_formed("a b")
    assert not well_formed("[::1]x") and not well_formed("a:123456") and not well_formed("%4")

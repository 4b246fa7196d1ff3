"""Open job event streams are capped per identity and per API process: past either, a 429
``too_many_streams`` with ``Retry-After`` before the stream starts; a closed stream gives its
place back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from schedules_db import make_engine
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread

JOB = {
    "operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}},
    "target": "host",
    "trials": 4,
}


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    with ServerThread(create_app(settings, run_reaper=False)) as server:
        yield server.url + "/api/v1"


@contextmanager
def opened(
    client: httpx.Client, path: str, headers: dict[str, str] | None = None
) -> Iterator[httpx.Response]:
    """A stream whose first event arrived (so the server holds it), closed on exit."""
    with client.stream("GET", path, headers=headers) as response:
        chunks = response.iter_text()  # held open: a dropped iterator closes the response
        if response.status_code == 200:
            assert next(chunks).startswith("retry:")
        yield response


def test_an_identity_holds_at_most_its_cap_and_a_closed_stream_frees_its_place(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, max_streams_per_identity=2, max_streams=0)
    with serving(settings) as api, httpx.Client(base_url=api, timeout=30) as client:
        job = client.post("/jobs", json=JOB).json()["id"]  # no worker: it stays queued
        events = f"/jobs/{job}/events"
        with ExitStack() as held:
            first = held.enter_context(opened(client, events))
            held.enter_context(opened(client, events))
            assert first.status_code == 200
            with opened(client, events) as refused:
                refused.read()
                assert refused.status_code == 429
                assert refused.json()["type"] == "too_many_streams"
                assert refused.headers["retry-after"]
            assert client.get(f"/jobs/{job}").status_code == 200  # reads go on
        # Both closed: the server notices within a poll and gives the places back.
        deadline = time.monotonic() + 30
        while True:
            with opened(client, events) as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "a closed stream kept its place"
            time.sleep(0.1)  # polling for the release, not waiting before an assertion


def test_the_process_holds_at_most_its_cap_across_identities(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, auth=True, max_streams_per_identity=0, max_streams=2)
    engine = make_engine(settings.store_url)
    with serving(settings) as api:  # the app's start made the schema
        tokens = TokenStore(engine)
        headers = [
            {"Authorization": f"Bearer {tokens.create(name, ['admin'])[0]}"}
            for name in ("a", "b", "c")
        ]
        engine.dispose()
        with httpx.Client(base_url=api, timeout=30) as client:
            job = client.post("/jobs", json=JOB, headers=headers[0]).json()["id"]
            events = f"/jobs/{job}/events"
            with ExitStack() as held:
                for who in headers[:2]:
                    assert held.enter_context(opened(client, events, who)).status_code == 200
                refused = client.get(events, headers=headers[2])
                assert refused.status_code == 429
                assert refused.json()["type"] == "too_many_streams"

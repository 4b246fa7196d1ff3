"""`tunehub fetch` by key against a real server (SQLite store, uvicorn in a thread): the server
resolves a catalog operator with its params (or a workload hash) on a target to the verified
best (``GET /schedules/best``), the client downloads it through its library cache: a hit is the
artifact byte for byte, a second fetch is a 304 without a download, a miss exits 4 saying how
to tune it (``--tune-if-missing --wait`` tunes it first), a corrupted cached file is never used,
and a rebuild with the server gone is answered from the cache (and says so)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.client import IntegrityError, TunehubClient
from service.client.cache import LibraryCache, cache_root
from service.client.errors import Offline
from service.client.fetch import NotTuned
from service.entry.app import create_app
from service.entry.cli import main
from service.shared.settings import Settings
from service.worker.execution import WorkerContext, run_job
from tests.conftest import TINY, ServerThread
from tests.schedules_db.published import artifact_blob, publish
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.host import current_tvm_series

TARGET = "znver4-2c"  # the label of the target `publish` stores
KEY = ["--operator", "matmul", *(f"--param={k}={v}" for k, v in TINY.items())]


@dataclass
class Served:
    server: ServerThread
    url: str
    shash: str  # the tiny matmul's structural hash, as the catalog builds it
    blob: bytes  # its artifact, as the server keeps it
    tokens: TokenStore
    store: Store
    artifacts: Path

    def client(self, token: str | None = None) -> TunehubClient:
        return TunehubClient(self.url, token=token)


def _serve(tmp_path: Path, **settings: Any) -> Iterator[Served]:
    data = tmp_path / "server"
    config = Settings(data_dir=data, **settings)
    engine = make_engine(config.store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    publish(store, "matmul", TINY["M"], config.artifacts, shash=spec.shash)
    blob = artifact_blob("matmul", TINY["M"])  # what `publish` writes as the artifact
    with ServerThread(create_app(config, run_reaper=False)) as server:
        yield Served(
            server, server.url, spec.shash, blob, TokenStore(engine), store, config.artifacts
        )
    engine.dispose()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TUNEHUB_TOKEN", raising=False)
    yield from _serve(tmp_path)


def _fetch(served: Served, *args: str) -> int:
    return main(["fetch", *args, "--server", served.url])


def test_a_hit_is_the_artifact_and_a_second_fetch_is_a_304(served: Served, tmp_path: Path) -> None:
    cache = LibraryCache(tmp_path / "cache")
    statuses: list[tuple[str, int]] = []
    with served.client() as client:
        client.http.event_hooks["response"].append(
            lambda r: statuses.append((r.request.url.path, r.status_code))
        )
        first = client.fetch_library(TARGET, tmp_path / "a.so", "matmul", dict(TINY), cache=cache)
        again = client.fetch_library(TARGET, tmp_path / "b.so", "matmul", dict(TINY), cache=cache)
    sha = hashlib.sha256(served.blob).hexdigest()
    assert (tmp_path / "a.so").read_bytes() == (tmp_path / "b.so").read_bytes() == served.blob
    assert first.sha256 == again.sha256 == sha and first.schedule_id == again.schedule_id
    assert (first.from_cache, again.from_cache) == (False, True)
    assert not first.offline and not again.offline
    artifact = f"/api/v1/schedules/{first.schedule_id}/artifact"
    assert [status for path, status in statuses if path == artifact] == [200, 304]
    assert [p.name for p in (cache.root / "libs").iterdir()] == [f"{sha}.so"]


def test_the_cli_fetches_by_operator_and_by_workload(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lib.so"
    assert _fetch(served, *KEY, "--target", TARGET, "-o", str(out)) == 0
    assert out.read_bytes() == served.blob
    assert f"{out}: sha256 {hashlib.sha256(served.blob).hexdigest()}" in capsys.readouterr().out
    # XDG_CACHE_HOME is honoured: the library went there.
    assert (tmp_path / "xdg" / "tunehub" / "libs").is_dir()
    by_hash = tmp_path / "by-hash.so"
    assert _fetch(served, "--workload", served.shash, "--target", TARGET, "-o", str(by_hash)) == 0
    assert by_hash.read_bytes() == served.blob
    assert "(cached)" in capsys.readouterr().out  # same key, same library: no download
    assert _fetch(served, "1", "-o", str(tmp_path / "by-id.so")) == 0  # by id still works


def test_a_miss_exits_4_and_says_how_to_tune_it(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lib.so"
    big = ["--operator", "matmul", "--param", "M=64", "--param", "N=32", "--param", "K=32"]
    assert _fetch(served, *big, "--target", TARGET, "-o", str(out)) == 4
    err = capsys.readouterr().err
    shown = '{"M": 64, "N": 32, "K": 32, "dtype": "float32"}'  # the canonical params
    assert f"nothing tuned for matmul {shown} on target znver4-2c" in err
    assert "tunehub submit matmul --param M=64 --param N=32 --param K=32" in err
    assert "--tune-if-missing --wait" in err
    assert not out.exists()
    assert _fetch(served, "--workload", "12345", "--target", TARGET) == 4
    assert "nothing tuned for workload 12345" in capsys.readouterr().err
    # The 404 names what is untuned, for programs.
    with served.client() as client, pytest.raises(NotTuned) as missing:
        client.fetch_library("host", out, "matmul", dict(TINY), cache=LibraryCache(tmp_path))
    body = missing.value.body
    assert body["type"] == "not_tuned" and body["workload"] == served.shash
    assert body["operator"] == "matmul" and body["params"] == {**TINY, "dtype": "float32"}
    assert body["target"]["key"] and body["tvm_series"] == current_tvm_series()


def test_a_corrupted_cached_library_is_never_used(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = LibraryCache(tmp_path / "cache")
    sha = hashlib.sha256(served.blob).hexdigest()
    with served.client() as client:
        client.fetch_library(TARGET, tmp_path / "a.so", "matmul", dict(TINY), cache=cache)
        cache.library_path(sha).write_bytes(b"evil")  # the cache is tampered with
        again = client.fetch_library(TARGET, tmp_path / "b.so", "matmul", dict(TINY), cache=cache)
    assert (tmp_path / "b.so").read_bytes() == served.blob  # downloaded again, not the evil file
    assert not again.from_cache and "removed" in again.notes[0]
    assert cache.library_path(sha).read_bytes() == served.blob
    # Offline, a corrupted copy cannot be replaced: refused (sha256), deleted, exit 3.
    cache.library_path(sha).write_bytes(b"evil")
    served.server.__exit__()
    with served.client() as client, pytest.raises(IntegrityError, match="sha256"):
        client.fetch_library(TARGET, tmp_path / "c.so", "matmul", dict(TINY), cache=cache)
    assert not (tmp_path / "c.so").exists() and not cache.library_path(sha).exists()
    # The CLI, with its cache in XDG_CACHE_HOME.
    xdg = LibraryCache()
    assert xdg.root == tmp_path / "xdg" / "tunehub"
    (xdg.root / "libs").mkdir(parents=True)
    for entry in (cache.root / "entries", cache.root / "requests"):
        (xdg.root / entry.name).mkdir()
        for item in entry.iterdir():
            (xdg.root / entry.name / item.name).write_bytes(item.read_bytes())
    xdg.library_path(sha).write_bytes(b"evil")
    capsys.readouterr()
    assert _fetch(served, *KEY, "--target", TARGET, "-o", str(tmp_path / "d.so")) == 3
    assert "sha256" in capsys.readouterr().err and not xdg.library_path(sha).exists()


def test_an_offline_rebuild_uses_the_cache_and_says_so(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lib.so"
    assert _fetch(served, *KEY, "--target", TARGET, "-o", str(out)) == 0
    out.unlink()
    served.server.__exit__()  # the server is gone: a rebuild needs no network
    capsys.readouterr()
    assert _fetch(served, *KEY, "--target", TARGET, "-o", str(out)) == 0
    assert out.read_bytes() == served.blob
    captured = capsys.readouterr()
    assert "offline: using cached schedule" in captured.err and "fetched at" in captured.err
    assert "(offline, cached)" in captured.out
    # A request never fetched online: exit 5, saying why.
    other = ["--operator", "matmul", "--param", "M=8", "--param", "N=8", "--param", "K=8"]
    assert _fetch(served, *other, "--target", TARGET, "-o", str(tmp_path / "x.so")) == 5
    assert "nothing is cached for this request" in capsys.readouterr().err
    with TunehubClient(served.url) as client, pytest.raises(Offline):
        client.fetch_library(TARGET, tmp_path / "x.so", "matmul", {"M": 8, "N": 8, "K": 8})


def test_the_cache_lives_in_xdg_cache_home_or_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "tunehub"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "tunehub"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert LibraryCache().root == tmp_path / "home" / ".cache" / "tunehub"


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ({"operator": "matmul", "params": '{"M": 0, "N": 4, "K": 4}'}, ["query", "params", "M"]),
        ({"operator": "matmul", "params": '{"M": 4}'}, ["query", "params", "N"]),
        ({"operator": "matmul", "params": "[1]"}, ["query", "params"]),
        ({"operator": "matmul", "params": "{M: 4"}, ["query", "params"]),
        ({"operator": "matmul", "params": '{"M": NaN}'}, ["query", "params"]),
        ({"operator": "nope"}, ["query", "operator"]),
        ({}, ["query", "operator"]),
        ({"operator": "matmul", "workload": "1"}, ["query", "operator"]),
        ({"workload": "1", "params": "{}"}, ["query", "params"]),
        ({"workload": "12a"}, ["query", "workload"]),
        ({"workload": "1", "target": '{"kind": "llvm", "mcpu": "nope"}'}, ["query", "target"]),
    ],
)
def test_bad_keys_are_422s_naming_the_field(
    served: Served, query: dict[str, str], loc: list[object]
) -> None:
    answer = httpx.get(served.url + "/api/v1/schedules/best", params={"target": "host", **query})
    assert answer.status_code == 422, answer.text
    assert loc in [error["loc"] for error in answer.json()["detail"]], answer.text


def test_a_target_name_no_target_has_is_nothing_tuned(served: Served) -> None:
    """A well-formed name that no stored target has is a 404 (nothing is tuned for it), with
    the names there are; "host" or JSON that tunehub refuses stays a 422."""
    query = {"workload": "1", "target": "no-such-target"}
    answer = httpx.get(served.url + "/api/v1/schedules/best", params=query)
    assert answer.status_code == 404, answer.text
    assert answer.json()["type"] == "not_tuned"
    assert answer.json()["target"] == {"key": None, "label": None}
    assert "no target has that name; known target names: znver4-2c" in answer.json()["detail"]


def test_fetching_needs_a_read_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TUNEHUB_TOKEN", raising=False)
    served = next(gen := _serve(tmp_path, auth=True))
    try:
        out = str(tmp_path / "lib.so")
        assert _fetch(served, *KEY, "--target", TARGET, "-o", out) == 2
        assert "HTTP 401" in capsys.readouterr().err
        assert _fetch(served, *KEY, "--target", TARGET, "-o", out, "--token", "bogus") == 2
        assert "HTTP 401" in capsys.readouterr().err
        token, _ = served.tokens.create("builder", ["read"])
        monkeypatch.setenv("TUNEHUB_TOKEN", token)  # from the environment, never a file
        assert _fetch(served, *KEY, "--target", TARGET, "-o", out) == 0
        assert Path(out).read_bytes() == served.blob
    finally:
        gen.close()


def test_tune_if_missing_submits_waits_and_fetches(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = ["--operator", "matmul", "--param", "M=16", "--param", "N=16", "--param", "K=16"]
    tune = [*key, "--target", "host", "--tune-if-missing", "--trials", "4", "--wait"]
    out = tmp_path / "tuned.so"
    done: list[int] = []
    waiting = threading.Thread(
        target=lambda: done.append(_fetch(served, *tune, "-o", str(out))), daemon=True
    )
    waiting.start()
    deadline = time.monotonic() + 60
    while not (queued := served.store.jobs.list_jobs("queued")):
        assert time.monotonic() < deadline, "the job was never submitted"
        time.sleep(0.1)
    (job,) = queued
    context = WorkerContext(served.store, served.artifacts, "pytest", num_trials_per_iter=4)
    assert run_job(context, job.id) == "succeeded", served.store.jobs.get(job.id)
    waiting.join(timeout=120)
    assert done == [0]
    assert out.read_bytes()[:4] == b"\x7fELF"  # the library the worker compiled
    sha = hashlib.sha256(out.read_bytes()).hexdigest()
    assert f"{out}: sha256 {sha}" in capsys.readouterr().out
    # Without --wait: submitted, and still nothing to fetch (exit 4).
    other = ["--operator", "matmul", "--param", "M=8", "--param", "N=8", "--param", "K=8"]
    no_wait = [*other, "--target", "host", "--tune-if-missing", "--trials", "4"]
    assert _fetch(served, *no_wait, "-o", str(tmp_path / "queued.so")) == 4
    assert "follow it with `tunehub watch" in capsys.readouterr().out
    assert not (tmp_path / "queued.so").exists()


def test_a_library_that_would_run_code_on_load_is_never_written(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store that serves the probe's library (issue 25: a constructor that runs `touch` when
    the library is loaded): its sha256 is the announced one, and the client still refuses it
    before anything could load it, by the id and by the key alike."""
    from sqlalchemy import update

    from schedules_db.tables import ArtifactRow
    from tests.security.payloads import probe_library

    marker = tmp_path / "marker"
    library = probe_library(marker, tmp_path / "probe.so", ["-nostartfiles"])
    data = library.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    (served.artifacts / sha[:2]).mkdir(parents=True, exist_ok=True)
    (served.artifacts / sha[:2] / f"{sha}.so").write_bytes(data)
    with served.store.session() as s:
        s.execute(
            update(ArtifactRow).values(sha256=sha, size=len(data), path=f"{sha[:2]}/{sha}.so")
        )
    for how in (["1"], [*KEY, "--target", TARGET]):
        out = tmp_path / "lib.so"
        assert _fetch(served, *how, "-o", str(out)) != 0
        assert "is refused, not loaded" in capsys.readouterr().err
        assert not out.exists() and not out.with_name("lib.so.partial").exists()
    assert not marker.exists()

"""Targets through the real API (uvicorn, SQLite store and broker, no worker): targets tunehub
cannot tune and serve are 422s that write nothing, and a label names one target (issue 14)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread
from tests.service.rows import row_counts


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("targets_api")
    app = create_app(Settings(data_dir=data_dir), run_reaper=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url + "/api/v1") as client:
        yield client, data_dir


def _job(target: object) -> dict:
    return {"operator": {"name": "matmul", "params": dict(TINY)}, "target": target, "trials": 8}


@pytest.mark.parametrize(
    "target, loc",
    [
        ({"kind": "llvm", "mcpu": "notacpu"}, ["body", "target", "mcpu"]),
        ({"kind": "llvm", "mattr": ["+nonexistentfeature"]}, ["body", "target", "mattr", 0]),
        ({"kind": "llvm", "mtriple": "foo-bar-baz"}, ["body", "target", "mtriple"]),
        ({"kind": "llvm", "num-cores": -5}, ["body", "target", "num-cores"]),
        ({"kind": "llvm", "num-cores": 0}, ["body", "target", "num-cores"]),
        ({"kind": "cuda", "arch": "sm_9999"}, ["body", "target", "arch"]),
        ({"kind": "c"}, ["body", "target", "kind"]),
        ({"kind": "ext_dev"}, ["body", "target", "kind"]),
        ({"kind": "hexagon"}, ["body", "target", "kind"]),
        ('{"kind": "llvm", "mcpu": "notacpu"}', ["body", "target"]),  # JSON text: the field
    ],
)
def test_targets_tunehub_cannot_serve_are_a_422_naming_the_field(
    api: tuple[httpx.Client, Path], target: object, loc: list
) -> None:
    client, data_dir = api
    before = row_counts(data_dir)
    response = client.post("/jobs", json=_job(target))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert [d["loc"] for d in detail] == [loc], detail
    assert detail[0]["type"] == "invalid_target" and detail[0]["msg"]
    assert row_counts(data_dir) == before


@pytest.mark.parametrize(
    "target",
    ["host", {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}, {"kind": "cuda", "arch": "sm_80"}],
)
def test_known_targets_are_accepted(api: tuple[httpx.Client, Path], target: object) -> None:
    """The host's own target (whatever mattr it switches off), a named CPU and a cuda target
    (a GPU worker's, accepted on this GPU-less API host) all queue a job."""
    client, _ = api
    response = client.post("/jobs", json=_job(target))
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "queued"


def test_a_label_names_one_target(api: tuple[httpx.Client, Path]) -> None:
    """The issue's shadow: the host's target with an explicit mtriple got the host's label, and
    then ``?target=<label>`` found nothing for lists and the other target for export."""
    from tvm.target.codegen import llvm_get_system_triple

    client, _ = api
    host = client.get("/targets").json()["host"]
    host_job = client.post("/jobs", json=_job("host")).json()
    shadow = {**host["canonical"], "mtriple": str(llvm_get_system_triple())}
    shadow_job = client.post("/jobs", json=_job(shadow))
    assert shadow_job.status_code == 201, shadow_job.text
    host_target, shadow_target = host_job["target"], shadow_job.json()["target"]
    assert host_target["label"] == host["label"]
    assert shadow_target["key"] != host_target["key"]
    assert shadow_target["label"] == f"{host['label']}-{shadow_target['key'][:8]}"
    labels = [t["label"] for t in client.get("/targets").json()["targets"]]
    assert len(labels) == len(set(labels))
    for target in (host_target, shadow_target):
        exported = client.get("/export", params={"target": target["label"]})
        assert exported.status_code == 200, exported.text
        assert exported.json()["target"]["key"] == target["key"]
        assert client.get("/schedules", params={"target": target["label"]}).status_code == 200
        # A job may name the target by its label, and gets that target.
        by_label = client.post("/jobs", json=_job(target["label"]))
        assert by_label.status_code == 201, by_label.text
        assert by_label.json()["target"]["key"] == target["key"]


def test_a_stored_target_tunehub_no_longer_accepts_is_a_422_by_its_label(
    api: tuple[httpx.Client, Path],
) -> None:
    """A store from before these checks may hold a target of kind c; naming it by its label
    is refused like the target itself (it was a 500 risk: the stored target is re-resolved)."""
    from schedules_db import Store, make_engine

    client, data_dir = api
    engine = make_engine(f"sqlite:///{data_dir / 'tunehub.db'}")
    Store(engine).catalog.get_or_create_target({"keys": ["cpu"], "kind": "c"}, "c", "c", {})
    engine.dispose()
    before = row_counts(data_dir)
    response = client.post("/jobs", json=_job("c"))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "target"] and "kind 'c'" in detail[0]["msg"], detail
    assert row_counts(data_dir) == before

"""A model's budget in two rounds (issue 26): half split by work, half held back and given, once
every task is measured, to the tasks furthest from their roofline, weighted by how often the
model runs them. Over the real API and a real worker (in process), on a fresh store."""

from __future__ import annotations

import base64
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from schedules_db import Store, make_engine
from service.app.usecases.create_model import first_round_trials
from service.entry.app import create_app
from service.shared.settings import Settings
from service.worker.execution import WorkerContext, run_job, run_next
from service.worker.model_budget import MIN_GRANT, reserve_shares, task_gaps
from tests.conftest import ServerThread
from tests.tuning.model_cases import tiny_cnn
from tuning.hardware.host import current_tvm_series

INPUT = [{"name": "x", "shape": [1, 3, 16, 16], "dtype": "float32"}]


@pytest.mark.parametrize(
    ("total", "gaps", "expected"),
    [
        (20, {1: 3.0, 2: 1.0}, {1: 15, 2: 5}),  # by gap
        (20, {1: 30.0, 2: 1.0, 3: 0.0}, {1: 20}),  # 2's share (0.6) is under a grant: to 1
        (6, {1: 1.0, 2: 1.0}, {1: 6}),  # two grants of 3: one of 6, to the first largest gap
        (9, {1: 0.0, 2: 0.0}, {}),  # every task at its roofline: nothing to spend on
        (3, {1: 2.0, 2: 1.0}, {1: 3}),  # less than a grant: all to the largest gap
    ],
)
def test_the_reserve_goes_by_gap_in_grants_of_a_batch(
    total: int, gaps: dict[int, float], expected: dict[int, int]
) -> None:
    shares = reserve_shares(total, gaps)
    assert shares == expected
    assert sum(shares.values()) == (total if any(gaps.values()) else 0)
    assert all(share >= MIN_GRANT for share in shares.values()) or len(shares) == 1


def test_the_first_round_is_half_the_budget_and_one_trial_per_task() -> None:
    assert first_round_trials(64, 11) == 32
    assert first_round_trials(16, 11) == 11  # every task is measured once
    assert first_round_trials(5, 5) == 5  # no reserve when there is no more than that


def test_a_model_spends_its_reserve_on_its_gaps_then_compiles(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path), run_reaper=False)
    store = Store(make_engine(f"sqlite:///{tmp_path / 'tunehub.db'}"), current_tvm_series())
    source = base64.b64encode(tiny_cnn().SerializeToString()).decode()
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=300) as client:
        body = {"name": "budget", "format": "onnx", "source": source, "inputs": INPUT,
                "trials": 24}  # fmt: skip
        created = client.post("/api/v1/models", json=body)
        assert created.status_code == 201, created.text
        model = created.json()
        tasks = {t["position"]: t for t in model["tasks"]}
        first = sum(t["trials"] for t in tasks.values())
        assert first == first_round_trials(24, len(tasks)) == 12
        assert model["progress"]["reserve_trials"] == 24 - first

        context = WorkerContext(
            store=store, artifact_dir=tmp_path / "artifacts", worker_name="pytest-budget",
            stale_after=timedelta(seconds=60), num_trials_per_iter=4, seed=0,
            target_ids=tuple(t.id for t in store.catalog.list_targets()),
        )  # fmt: skip
        for task in tasks.values():  # the first round, without the compile that follows it
            assert run_job(context, task["job"]["id"]) == "succeeded"
        stored = store.models.get(model["id"])
        assert stored is not None
        position = {p.task.id: p.task.position for p in store.models.tasks(model["id"])}
        gaps = task_gaps(store, stored)  # no roofline measured here: each task's whole time
        assert sorted(position[i] for i in gaps) == sorted(tasks)
        assert all(gap > 0 for gap in gaps.values())
        expected = {position[i]: more for i, more in reserve_shares(24 - first, gaps).items()}
        assert expected and sum(expected.values()) == 12

        outcomes = []
        while (outcome := run_next(context)) != "idle":  # the reserve's jobs, then the compile
            outcomes.append(outcome)
        assert outcomes == ["succeeded"] * len(expected), outcomes
        done = client.get(f"/api/v1/models/{model['id']}").json()
        assert done["state"] == "succeeded", done
        assert done["progress"]["reserve_trials"] == 0
        assert done["progress"]["trials"] == 24
        for task in done["tasks"]:
            before = tasks[task["position"]]
            more = expected.get(task["position"], 0)
            assert task["trials"] == before["trials"] + more
            if more:  # a new job continued the task's budget from its stored records
                assert task["job"]["id"] != before["job"]["id"]
                assert task["job"]["trials_done"] == before["trials"] + more
            else:
                assert task["job"]["id"] == before["job"]["id"]

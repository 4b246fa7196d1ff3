"""Issue 37, finding A: ``POST /api/v1/import`` made its verification jobs without the admission
every job goes through. With a cap of 2 active jobs and ``max_trials`` 5, one import left its
identity with 5 unfinished jobs, one of 10 trials (an import may hold 64 workloads: 64 jobs).

The import's jobs are now admitted as a job is (`service.app.admission`): over the cap the
whole import is a 429 ``too_many_jobs``, a job over the trial limit a 422 at the records file
(a verification job's trials are its workload's records), and nothing is written either way;
within both, the import passes as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.deployment import Deployment, job_body
from tests.service.rows import row_counts
from tuning.hardware.targets import resolve_target
from tuning.publish.interchange import encode_record_line, encode_workload_line
from tuning.traces import plain_json, trace_to_text

WRITTEN = ("jobs", "workloads", "targets", "tuning_records")
CAP, MAX_TRIALS = 2, 5


def _module(size: int) -> Any:
    """B[i] = 2 A[i] over ``size`` float32 (a distinct workload per size)."""
    from tvm import te

    from tuning.ir import normalize

    a = te.placeholder((size,), "float32", name="A")
    b = te.compute((size,), lambda i: a[i] * 2.0, name="B")
    return normalize(te.create_prim_func([a, b]))


def _split(mod: Any, factors: list[int]) -> str:
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    sch.split(loop, factors)
    return trace_to_text(sch.trace.as_json())


# Distinct splits of a 16-long loop: each a trace that replays, each a record (one trial).
SPLITS = [[2, 8], [4, 4], [8, 2], [1, 16], [16, 1], [2, 2, 4], [4, 2, 2]]


def _database(workloads: list[tuple[int, int]]) -> dict[str, str]:
    """An import for the host of one workload per (size, records): ``records`` distinct traces
    of each."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tuning.ir import structural_hash

    target = resolve_target("host").canonical
    workload_lines, record_lines = [], []
    for index, (size, records) in enumerate(workloads):
        mod = _module(size)
        workload_lines.append(encode_workload_line(structural_hash(mod), tvm.ir.save_json(mod)))
        args = [plain_json(a.as_json()) for a in ArgInfo.from_prim_func(mod["main"])]
        for factors in SPLITS[:records]:
            scaled = [*factors[:-1], factors[-1] * size // 16]
            record_lines.append(
                encode_record_line(index, _split(mod, scaled), [1e-6], target, args)
            )
    return {
        "target": "host",
        "database_workload.json": "".join(line + "\n" for line in workload_lines),
        "database_tuning_record.json": "".join(line + "\n" for line in record_lines),
    }


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with Deployment(
        tmp_path, auth=True, write_rate_per_s=0, max_active_jobs=CAP, max_trials=MAX_TRIALS
    ) as deployment:
        yield deployment


def _unfinished(deployment: Deployment, who: str = "carol") -> int:
    return deployment.store.jobs.count_unfinished(who)


def test_an_import_over_the_job_cap_is_a_429_and_writes_nothing(deployment: Deployment) -> None:
    """Three workloads: three verification jobs for an identity that may have two."""
    before = row_counts(deployment.settings.data_dir, WRITTEN)
    refused = deployment.post("submit-code", "/import", _database([(16, 1), (32, 1), (64, 1)]))
    assert refused.status_code == 429, refused.text
    assert refused.json()["type"] == "too_many_jobs"  # the body a job over the cap gets
    assert int(refused.headers["retry-after"]) >= 1
    assert f"at most {CAP} may be" in refused.json()["detail"]
    assert row_counts(deployment.settings.data_dir, WRITTEN) == before
    assert _unfinished(deployment) == 0

    # With one job of its own already, two more are over the cap as well: counted together.
    assert deployment.post("submit-code", "/jobs", job_body(trials=1)).status_code == 201
    before = row_counts(deployment.settings.data_dir, WRITTEN)
    refused = deployment.post("submit-code", "/import", _database([(16, 1), (32, 1)]))
    assert refused.status_code == 429 and refused.json()["type"] == "too_many_jobs"
    assert row_counts(deployment.settings.data_dir, WRITTEN) == before
    assert _unfinished(deployment) == 1


def test_an_import_whose_job_asks_over_max_trials_is_a_422_and_writes_nothing(
    deployment: Deployment,
) -> None:
    """Six records of one workload: its verification job would ask for 6 trials, over 5."""
    before = row_counts(deployment.settings.data_dir, WRITTEN)
    refused = deployment.post("submit-code", "/import", _database([(16, MAX_TRIALS + 1)]))
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["detail"]
    assert error["loc"] == ["body", "database_tuning_record.json"]
    assert error["type"] == "less_than_equal"  # as a job's trials over the limit
    assert error["input"] == MAX_TRIALS + 1
    assert error["msg"].endswith(f"trials must be at most {MAX_TRIALS}")
    assert "database_workload.json line 1" in error["msg"]
    assert row_counts(deployment.settings.data_dir, WRITTEN) == before
    assert _unfinished(deployment) == 0


def test_an_import_within_the_cap_and_the_trial_limit_passes_as_before(
    deployment: Deployment,
) -> None:
    body = _database([(16, MAX_TRIALS), (32, 1)])
    imported = deployment.post("submit-code", "/import", body)
    assert imported.status_code == 201, imported.text
    answer = imported.json()
    assert answer["workloads"] == 2 and answer["records_added"] == MAX_TRIALS + 1
    assert len(answer["jobs"]) == 2
    trials = sorted(deployment.store.jobs.get(job["id"]).trials for job in answer["jobs"])
    assert trials == [1, MAX_TRIALS]  # each job's budget: its workload's records
    assert _unfinished(deployment) == CAP

    # Again: nothing new, and the jobs under way are the answer (no new job, no 429 at the cap).
    again = deployment.post("submit-code", "/import", body)
    assert again.status_code == 201, again.text
    assert again.json()["records_added"] == 0
    assert [j["id"] for j in again.json()["jobs"]] == [j["id"] for j in answer["jobs"]]
    assert _unfinished(deployment) == CAP


def test_an_import_stops_at_the_workload_that_put_its_identity_in_debt(tmp_path: Path) -> None:
    """The parse-time quota was checked once per import, which then parsed all its workloads
    (up to 64, each holding a parser) however deep in debt they put its identity. It is checked
    before each workload now: with 0.01 s of parsing a minute, the first workload's parse puts
    the identity in debt and the second is refused, a 429 ``parse_quota_exhausted``, with
    nothing written (an import writes only after its last parse)."""
    with Deployment(
        tmp_path, auth=True, write_rate_per_s=0, max_active_jobs=CAP,
        parse_seconds_per_minute=0.01,
    ) as deployment:  # fmt: skip
        before = row_counts(deployment.settings.data_dir, WRITTEN)
        refused = deployment.post("submit-code", "/import", _database([(16, 1), (32, 1)]))
        assert refused.status_code == 429, refused.text
        assert refused.json()["type"] == "parse_quota_exhausted"
        assert int(refused.headers["retry-after"]) >= 60  # a parse's debt at 0.01 s a minute
        assert row_counts(deployment.settings.data_dir, WRITTEN) == before
        assert _unfinished(deployment) == 0
        # The parse gate was left with the refusal: the identity's next upload is refused for
        # its debt, not as a parse still under way.
        again = deployment.post("submit-code", "/import", _database([(16, 1)]))
        assert again.status_code == 429 and again.json()["type"] == "parse_quota_exhausted"

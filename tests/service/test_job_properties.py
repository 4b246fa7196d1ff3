"""A property of job creation over a real server: whatever the body, POST /jobs never answers
5xx, and a refused job (any 4xx) writes nothing — no job, workload or target row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from service.entry.app import create_app
from service.shared.settings import Settings
from service.web.schemas import TIR_EXAMPLE
from tests.conftest import ServerThread
from tests.service.rows import row_counts
from tuning.catalog import list_operators

MAX_TRIALS = 64


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("jobprops")
    # Write limits off: they would turn most examples into 429s (also refusals, but dull ones).
    settings_ = Settings(
        data_dir=data_dir, max_trials=MAX_TRIALS, write_rate_per_s=0, max_active_jobs=0
    )
    with (
        ServerThread(create_app(settings_, run_reaper=False)) as server,
        httpx.Client(base_url=server.url + "/api/v1", timeout=60) as client,
    ):
        yield client, data_dir


# Values of every JSON kind, non-finite floats and NUL/surrogate text included.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-2, max_value=300),
    st.floats(),
    st.text(max_size=12),
)
anything = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
sizes = st.one_of(st.integers(min_value=-1, max_value=70), scalars)
operator_names = st.sampled_from([op.name for op in list_operators()]) | st.text(max_size=10)


@st.composite
def operators(draw: st.DrawFn) -> object:
    params = draw(
        st.dictionaries(st.sampled_from(list("MNKHWC") + ["rows", "cols", "x"]), sizes, max_size=5)
        | anything
    )
    return draw(
        st.fixed_dictionaries({"name": operator_names, "params": st.just(params)}) | anything
    )


targets = st.one_of(
    st.just("host"),
    st.text(max_size=12),
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["llvm", "cuda", "c", "quantum"])},
        optional={
            "mcpu": st.sampled_from(["znver4", "notacpu", ""]) | st.text(max_size=6),
            "num-cores": sizes,
            "arch": st.sampled_from(["sm_80", "sm_9999"]),
        },
    ),
    anything,
)
tirs = st.fixed_dictionaries(
    {
        "format": st.sampled_from(["tvmscript", "json", "python"]),
        "source": st.sampled_from(["", "x = 1", TIR_EXAMPLE, '{"root": 1}']) | st.text(max_size=20),
    }
)
FIELDS = {
    "operator": operators(),
    "tir": tirs | anything,
    "target": targets,
    "trials": sizes,
    "priority": st.integers(min_value=-101, max_value=101) | scalars,
    "space": st.sampled_from(["auto", "plain", "packed", "dense"]) | scalars,
    "transfer_cost_model": scalars,
    "submitted_by": scalars,
    "extra": anything,
}


@st.composite
def bodies(draw: st.DrawFn) -> object:
    """A valid small matmul job with up to three fields replaced or dropped (so that both
    accepted and refused jobs come up), or now and then any JSON value at all."""
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return draw(anything)
    shape = st.integers(min_value=1, max_value=48)
    body: dict[str, object] = {
        "operator": {"name": "matmul", "params": {"M": draw(shape), "N": draw(shape), "K": 8}},
        "target": "host",
        "trials": draw(st.integers(min_value=1, max_value=MAX_TRIALS)),
    }
    for key in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=3, unique=True)):
        if draw(st.booleans()):
            body.pop(key, None)
        else:
            body[key] = draw(FIELDS[key])
    return body


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies())
def test_job_creation_never_5xx_and_writes_nothing_when_refused(
    api: tuple[httpx.Client, Path], body: object
) -> None:
    client, data_dir = api
    before = row_counts(data_dir)
    # allow_nan: NaN and Infinity go out as the bare tokens Python's json reads back.
    response = client.post(
        "/jobs",
        content=json.dumps(body, allow_nan=True),
        headers={"content-type": "application/json"},
    )
    event(f"status {response.status_code}")  # pytest --hypothesis-show-statistics
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        assert row_counts(data_dir) == before, (body, response.text)
    else:
        assert response.status_code == 201, response.text

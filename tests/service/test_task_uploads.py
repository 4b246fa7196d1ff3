"""Issue 37, finding C: ``POST /api/v1/tasks`` answered a task module that is JSON but not TVM's
object graph (a list, a number, a node that is no object) with Python's own exception text
(``task 0: AttributeError: 'list' object has no attribute 'get'``): TVM's loader indexes the
document without checking its shape. The 422 now says what is wrong with which task's module,
and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.deployment import Deployment
from tests.service.rows import row_counts


@pytest.mark.parametrize(
    ("module", "problem"),
    [
        ("[]", "a JSON list, not an object"),
        ("123", "a JSON number, not an object"),
        ('{"root": 1, "nodes": [7]}', "node 0 is a JSON number, not an object"),
        ('{"root": 1, "nodes": [{"type": "ir.Var", "data": 5}]}', "node 0: data is a JSON number"),
    ],
)
def test_a_module_that_is_not_a_tvm_graph_is_a_clear_422(
    tmp_path: Path, module: str, problem: str
) -> None:
    with Deployment(tmp_path, auth=True, write_rate_per_s=0) as d:
        before = row_counts(tmp_path)
        sent = {"target": "host", "tasks": [{"name": "x", "module": module}]}
        got = d.post("submit-code", "/tasks", sent)
        assert got.status_code == 422, got.text
        (error,) = got.json()["detail"]
        assert error["loc"] == ["body", "tasks"] and error["type"] == "invalid_task"
        assert error["msg"].startswith("task 0: ")
        assert "its module is not TVM JSON as tvm.ir.save_json writes it" in error["msg"]
        assert problem in error["msg"]
        assert "Error:" not in error["msg"]  # no exception's name, no exception's text
        assert row_counts(tmp_path) == before

"""Finding the verified best schedule of a key a client can name without TVM: a catalog
operator with its parameters (or a workload's structural hash) on a target, in the service's
TVM series (``GET /schedules/best``; the light client's ``tunehub fetch --operator``).

The service builds the catalog workload itself (`tuning.catalog.workload.catalog_workload`, as
job creation does), so the hash a client is answered for is the hash a job for the same
operator and parameters would tune. Parameters are validated by the operator's own model, as
for a job; a refusal is a 422 naming the query field (``query.params.M``). Nothing is written.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from schedules_db import Store, lookups
from schedules_db.lookups import ScheduleParts
from service.app.admission import query_target
from service.app.refusals import InvalidFields, InvalidInput, NothingTuned
from service.app.strict_json import JsonRejected, loads
from tuning.catalog import get_operator, list_operators
from tuning.catalog.workload import catalog_workload


def best_schedule(
    store: Store,
    target: str,
    operator: str | None,
    params: str | None,
    workload: str | None,
) -> ScheduleParts:
    """The verified best of ``operator`` with ``params`` (a JSON object's text), or of the
    workload hash ``workload``, on ``target`` ("host", a JSON target's text, a stored key or
    label), in ``store``'s TVM series.

    422 (naming ``query.operator``, ``query.params[.<name>]``, ``query.workload`` or
    ``query.target``): neither or both of operator and workload, params without an operator, an
    unknown operator, params that are not a JSON object or that the operator refuses, or a
    target tunehub refuses (`InvalidInput`, `InvalidFields`). `NothingTuned` (a 404 of type
    `service.app.refusals.NOT_TUNED`) when nothing verified exists, its
    body naming the workload hash, the target (key, label), the operator and params."""
    shash, op_name, op_params = _workload(operator, params, workload)
    key, stored = query_target(store, target)
    found_workload = store.catalog.find_workload(shash)
    if stored is not None and found_workload is not None:
        found = lookups.schedules(store, None, stored.id, found_workload.id, 1)
        if found:
            return found[0]
    what = f"{op_name} {json.dumps(op_params)}" if op_name else f"workload {shash}"
    label = stored.label if stored is not None else None
    if key is None:  # a name no stored target has
        names = ", ".join(sorted(t.label for t in store.catalog.list_targets())) or "none yet"
        where = f"{target!r} (no target has that name; known target names: {names})"
    else:
        where = label or key
    raise NothingTuned(
        f"nothing tuned for {what} on target {where} (TVM {store.series or 'any'})",
        workload=shash,
        target={"key": key, "label": label},
        operator=op_name,
        params=op_params,
        tvm_series=store.series,
    )


def _workload(
    operator: str | None, params: str | None, workload: str | None
) -> tuple[str, str | None, dict[str, Any]]:
    """(structural hash, operator name or None, canonical params) of the requested workload."""
    if (operator is None) == (workload is None):
        raise InvalidInput(
            ("query", "operator"),
            "give either operator (with params) or workload (a structural hash), not both",
            "missing" if operator is None else "exclusive",
        )
    if workload is not None:
        if params is not None:
            raise InvalidInput(("query", "params"), "params go with operator", "exclusive", params)
        return workload, None, {}
    assert operator is not None
    op = get_operator(operator)
    if op is None:
        known = ", ".join(o.name for o in list_operators())
        raise InvalidInput(
            ("query", "operator"),
            f"unknown operator {operator!r}; known: {known}",
            "unknown_operator",
            operator,
        )
    try:
        validated = op.Params.model_validate(_params_object(params))
    except ValidationError as err:
        raise InvalidFields(err.errors(include_url=False), ("query", "params")) from None
    spec = catalog_workload(op.name, validated)
    return spec.shash, op.name, spec.params


def _params_object(text: str | None) -> dict[str, Any]:
    """The JSON object ``text`` holds (none: ``{}``); a 422 at ``query.params`` otherwise."""
    if text is None:
        return {}
    loc = ("query", "params")
    try:
        value = loads(text.encode())
    except json.JSONDecodeError as err:
        raise InvalidInput(
            loc, f"params must be a JSON object: {err}", "json_invalid", text
        ) from None
    except JsonRejected as err:
        raise InvalidInput(loc, err.msg, err.kind) from None
    if not isinstance(value, dict):
        raise InvalidInput(
            loc, 'params must be a JSON object such as {"M": 32}', "dict_type", value
        )
    return value

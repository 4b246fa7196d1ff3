"""``/api/v1/operators`` and ``/api/v1/targets``: what can be tuned, and where."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import SettingsDep, StoreDep
from service.app.responses.catalog import OperatorOut, TargetsOut, target_json
from service.app.views.jobs import live_target_ids
from service.web.auth import AnyReader
from service.web.strict_input import StrictRoute
from tuning.catalog import list_operators
from tuning.catalog.dtypes import TOLERANCE_RULES
from tuning.hardware.targets import HOST, resolve_target

router = APIRouter(tags=["catalog"], route_class=StrictRoute)


@router.get("/operators", response_model=list[OperatorOut])
def operators(who: AnyReader) -> list[OperatorOut]:
    """Every catalog operator with its parameter schema and an example job body."""
    return [
        {
            "name": op.name,
            "description": op.description,
            "params_schema": op.schema(),
            "dtypes": op.dtypes(),
            "tolerance": TOLERANCE_RULES,
            "example": {
                "operator": {"name": op.name, "params": op.example},
                "target": HOST,
                "trials": 64,
            },
        }
        for op in list_operators()
    ]


@router.get("/targets", response_model=TargetsOut)
def targets(who: AnyReader, store: StoreDep, settings: SettingsDep) -> TargetsOut:
    """The target "host" resolves to here, and every target the store knows (by key and
    readable label, either of which a job may name), with ``served``: a live worker has it."""
    host = resolve_target(HOST)
    live = live_target_ids(store, settings)
    return {
        "host": {"canonical": host.canonical, "label": host.label},
        "targets": [
            {**target_json(row), "served": row.id in live} for row in store.catalog.list_targets()
        ],
    }

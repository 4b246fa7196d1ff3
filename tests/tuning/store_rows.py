"""Rows a tuning test needs in a real store: the host target and a catalog workload."""

from __future__ import annotations

from typing import Any

from tuning.hardware.host import host_fingerprint
from tuning.hardware.targets import resolve_target


def host_and_workload(store: Any, spec: Any) -> tuple[int, int]:
    """(target id, workload id) of the host target and ``spec`` (a `WorkloadSpec`) in
    ``store``, created where missing."""
    host = resolve_target("host")
    target = store.catalog.get_or_create_target(
        host.canonical, host.kind, host.label, host_fingerprint()
    )
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, spec.operator, spec.params, spec.flop
    )
    return target.id, workload.id

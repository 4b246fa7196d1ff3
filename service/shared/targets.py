"""Naming a target as every part of the service does: ``"host"``, a JSON target (an object or
its text), or the key or label of a target the store knows (as ``GET /targets`` lists them);
and recording it in the store. Shared by the API's use cases (`service.api.usecases.target_names`,
which turn a refusal into a 422) and the worker's bootstrap (`service.worker.bootstrap`), so it
imports neither FastAPI nor the worker package.
"""

from __future__ import annotations

import json
from typing import Any

from schedules_db import Store
from schedules_db.values import Target
from tuning.hardware.host import host_fingerprint
from tuning.hardware.targets import HOST, ResolvedTarget, resolve_target


def is_name(spec: str | dict[str, Any]) -> bool:
    """True when ``spec`` names a stored target (a key or label), not "host" or JSON."""
    return isinstance(spec, str) and spec != HOST and not spec.lstrip().startswith("{")


def find_named_target(spec: str | dict[str, Any], store: Store) -> Target | None:
    """The stored target ``spec`` names by key or label; None when ``spec`` is ``"host"``, a
    JSON target, or a name the store does not know."""
    return store.catalog.find_target(spec) if isinstance(spec, str) and is_name(spec) else None


def resolve_named(spec: str | dict[str, Any], named: Target | None) -> ResolvedTarget:
    """The target ``spec`` stands for: the stored target ``named`` (`find_named_target`) when
    there is one, else ``spec`` itself. Raises `tuning.hardware.targets.TargetError` for a
    target tunehub refuses."""
    return resolve_target(json.loads(named.canonical_json) if named else spec)


def record_target(
    store: Store,
    spec: str | dict[str, Any],
    target: ResolvedTarget,
    host: dict[str, Any] | None = None,
) -> Target:
    """The stored target of ``target`` (created on first use); named ``"host"`` in ``spec``, it
    is recorded with this machine's hardware fingerprint (``host``, or read here)."""
    fingerprint = (host if host is not None else host_fingerprint()) if spec == HOST else {}
    return store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )

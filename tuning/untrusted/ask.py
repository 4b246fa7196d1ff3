"""The parent's side of every request of `tuning.untrusted.requests`: one fresh jail
(`tuning.jail.run_isolated`) runs it with `tuning.untrusted.child` as its program."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuning.jail import Limits, run_isolated

CHILD = "tuning.untrusted.child"


def ask(
    request: str,
    payload: dict[str, Any],
    limits: Limits | None = None,
    output_dir: Path | None = None,
    output_files: Sequence[str] = (),
) -> dict[str, Any]:
    """Request ``request`` on ``payload`` from a fresh child; its JSON answer (see
    `run_isolated` for ``output_dir``, the limits and what it raises)."""
    return run_isolated(CHILD, request, payload, limits, output_dir, output_files)

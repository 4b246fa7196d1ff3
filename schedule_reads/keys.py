"""The keys schedules are found by, spelled once for the server and its clients.

A target's key is the first 32 hex digits of the sha256 of its canonical JSON (sorted keys, no
spaces); a workload's is its `tvm.ir.structural_hash` as a decimal string; a TVM series is the
major.minor of a TVM version, and traces are only replayed within one.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the one spelling that keys are hashed from."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode()).hexdigest()


def tvm_series(version: str) -> str:
    """The compatibility series of a TVM version: major.minor ("0.27.0.post1" -> "0.27").
    Traces are only replayed within a series."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else (version or "")


def target_key(canonical: dict[str, Any]) -> str:
    """The key of a canonical target dict: the first 32 hex digits of its JSON's sha256."""
    return sha256_hex(canonical_json(canonical))[:32]

"""Keys: the canonical spelling of targets and traces, and what is hashed from it."""

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


TARGET_LABEL_LENGTH = 128  # TargetRow.label


def target_labels(label: str, key: str) -> list[str]:
    """The labels a new target with key ``key`` may take, in order of preference: ``label``
    itself, then ``label`` with a suffix of the key's first 8, 12, 16, 24 or 32 hex digits (the
    label cut to fit the column)."""
    fits = [label] if len(label) <= TARGET_LABEL_LENGTH else []
    return fits + [f"{label[: TARGET_LABEL_LENGTH - n - 1]}-{key[:n]}" for n in (8, 12, 16, 24, 32)]

"""Keys: the canonical spelling of targets and traces, and what is hashed from it (spelled once
in `schedule_reads.keys`, shared with the light client), and the labels a target may take."""

from __future__ import annotations

from schedule_reads.keys import canonical_json, sha256_hex, target_key, tvm_series

__all__ = [
    "TARGET_LABEL_LENGTH",
    "canonical_json",
    "sha256_hex",
    "target_key",
    "target_labels",
    "tvm_series",
]

TARGET_LABEL_LENGTH = 128  # TargetRow.label


def target_labels(label: str, key: str) -> list[str]:
    """The labels a new target with key ``key`` may take, in order of preference: ``label``
    itself, then ``label`` with a suffix of the key's first 8, 12, 16, 24 or 32 hex digits (the
    label cut to fit the column)."""
    fits = [label] if len(label) <= TARGET_LABEL_LENGTH else []
    return fits + [f"{label[: TARGET_LABEL_LENGTH - n - 1]}-{key[:n]}" for n in (8, 12, 16, 24, 32)]

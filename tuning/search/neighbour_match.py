"""Which tuned workload is an untuned one's nearest neighbour (pure Python, no TVM).

Two kinds of workloads, two definitions:

* a catalog workload's neighbours are the same operator with equal non-size parameters
  (layout, dtype, flags), nearest by the sum of |log ratio| of their sizes — what warm starts
  use (`tuning.search.seeding`);
* a user workload (a model's task: no catalog operator) has neighbours of the same task kind —
  its fused-function name without the numeric suffix Relax adds to repeats
  (``fused_conv2d_add_relu1`` → ``fused_conv2d_add_relu``) — with the same buffer signature
  (the same number of buffers, each of the same rank and dtype), nearest by the sum of
  |log ratio| over every buffer dimension. The signature is read from the module, so it is
  compared inside the jail (`tuning.untrusted.neighbour_requests`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from tuning.search.seeding import _size_distance

_SUFFIX = re.compile(r"\d+$")

Signature = list[tuple[list[int], str]]  # (shape, dtype) of every buffer parameter, in order


def params_distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Distance of two catalog parameter sets, or None when they are not neighbours."""
    return _size_distance(a, b)


def task_kind(params: dict[str, Any]) -> str | None:
    """A user workload's task kind (its ``task`` parameter without a trailing number), or None
    when it names no task."""
    name = params.get("task")
    if not isinstance(name, str) or not name:
        return None
    return _SUFFIX.sub("", name) or None


def signature_distance(a: Sequence[tuple[Sequence[int], str]],
                       b: Sequence[tuple[Sequence[int], str]]) -> float | None:  # fmt: skip
    """Distance of two buffer signatures (sum of |log ratio| over every dimension), or None
    when the buffer count, a rank or a dtype differs (or a size is not positive)."""
    if len(a) != len(b):
        return None
    distance = 0.0
    for (shape_a, dtype_a), (shape_b, dtype_b) in zip(a, b, strict=True):
        if dtype_a != dtype_b or len(shape_a) != len(shape_b):
            return None
        for x, y in zip(shape_a, shape_b, strict=True):
            if x <= 0 or y <= 0:
                return None
            distance += abs(math.log(x / y))
    return distance

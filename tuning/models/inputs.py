"""A model's inputs as the user declares them: name, static shape, dtype (no TVM needed).

`check_inputs` is the one place their bounds live; the parent checks before any child starts,
and the child checks again (it trusts nothing the request carries either).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DTYPES = frozenset({"float32", "float16", "int8", "int32", "int64", "uint8", "bool"})
MAX_INPUTS = 16
MAX_DIM = 1 << 20
MAX_RANK = 8
MAX_ELEMENTS = 1 << 28  # all inputs together (1 GiB of float32): a run allocates each one
MAX_NAME_CHARS = 128
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/\-]*")


class InvalidInputs(ValueError):
    """The declared inputs are out of bounds (the message says which one and why)."""


@dataclass(frozen=True)
class ModelInput:
    """One graph input: its name in the model, its static shape and its dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


def check_inputs(inputs: Sequence[ModelInput]) -> list[ModelInput]:
    """``inputs`` as a list once every bound holds: 1..`MAX_INPUTS` distinct names, each of
    1..`MAX_RANK` dims of 1..`MAX_DIM`, `MAX_ELEMENTS` in all, a dtype of `DTYPES`."""
    if not 1 <= len(inputs) <= MAX_INPUTS:
        raise InvalidInputs(f"a model takes 1 to {MAX_INPUTS} inputs, got {len(inputs)}")
    names: set[str] = set()
    total = 0
    for index, item in enumerate(inputs):
        where = f"input {index}"
        name, shape, dtype = item.name, item.shape, item.dtype
        if not (isinstance(name, str) and len(name) <= MAX_NAME_CHARS and NAME.fullmatch(name)):
            raise InvalidInputs(f"{where}: name must match {NAME.pattern} (≤ {MAX_NAME_CHARS})")
        if name in names:
            raise InvalidInputs(f"{where}: name {name!r} is given twice")
        names.add(name)
        if not (isinstance(shape, tuple) and 1 <= len(shape) <= MAX_RANK):
            raise InvalidInputs(f"{where} ({name}): shape must have 1 to {MAX_RANK} dims")
        if not all(type(d) is int and 1 <= d <= MAX_DIM for d in shape):
            raise InvalidInputs(f"{where} ({name}): every dim must be an integer 1..{MAX_DIM}")
        if dtype not in DTYPES:
            raise InvalidInputs(f"{where} ({name}): dtype must be one of {sorted(DTYPES)}")
        total += math.prod(shape)
    if total > MAX_ELEMENTS:
        raise InvalidInputs(f"the inputs hold {total} elements, over {MAX_ELEMENTS}")
    return list(inputs)


def inputs_from_json(raw: Any) -> list[ModelInput]:
    """Inputs from their JSON form (``[{"name", "shape", "dtype"}]``), checked."""
    if not isinstance(raw, list):
        raise InvalidInputs("inputs must be a list of {name, shape, dtype}")
    parsed = []
    for index, item in enumerate(raw):
        if not (isinstance(item, dict) and set(item) == {"name", "shape", "dtype"}):
            raise InvalidInputs(f"input {index} must be an object of name, shape and dtype")
        shape = item["shape"]
        if not isinstance(shape, list):
            raise InvalidInputs(f"input {index}: shape must be a list of integers")
        parsed.append(ModelInput(item["name"], tuple(shape), item["dtype"]))
    return check_inputs(parsed)

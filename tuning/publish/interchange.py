"""MetaSchedule's `JSONDatabase` files, read and written without trusting or loading them.

`database_workload.json` holds one line per workload: ``[shash, base64(len64 + TVM JSON)]``,
the IRModule as `tvm.ir.save_json` text behind an 8-byte little-endian length (TVM's binary
string encoding). `database_tuning_record.json` holds one line per record:
``[workload_index, [trace, run_secs, target, args_info]]``. Plain TVM
(`ms.database.JSONDatabase`) opens what `encode_*` produce, and what it writes is what
`decode_*` read. Parsing here is plain JSON and base64; the modules inside are only ever
loaded by TVM in the limited child process of `tuning.untrusted.user_tir`.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from dataclasses import dataclass
from typing import Any

from tuning.checks.trace_gate import UnsafeTrace, check_trace
from tuning.traces import FAILED_RUN_SECS

MIN_RUN_SECS = 1e-9  # one nanosecond: no kernel a worker measures runs faster
MAX_RUN_SECS = 1e3
MAX_REPEATS = 1000
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


class InterchangeError(ValueError):
    """A line of a JSON database that is not what MetaSchedule writes (says which and why)."""


@dataclass(frozen=True)
class RecordLine:
    """One tuning record of a JSON database."""

    workload_index: int
    trace: list[Any]
    run_secs: list[float]
    target: dict[str, Any]
    args_info: list[Any]


def encode_workload_line(shash: str, mod_json: str) -> str:
    """The workload-file line of a module given as `tvm.ir.save_json` text."""
    payload = mod_json.encode()
    blob = struct.pack("<Q", len(payload)) + payload
    return json.dumps([shash, base64.b64encode(blob).decode()])


def decode_workload_line(line: str, number: int) -> tuple[str, str]:
    """(shash, module JSON text) of a workload-file line; ``number`` names it in errors."""
    try:
        shash, encoded = json.loads(line)
        blob = base64.b64decode(encoded, validate=True)
        (length,) = struct.unpack("<Q", blob[:8])
        if length != len(blob) - 8 or not isinstance(shash, str):
            raise ValueError("length prefix does not match")
        return shash, blob[8:].decode()
    except (ValueError, TypeError, struct.error, UnicodeDecodeError, RecursionError) as err:
        raise InterchangeError(f"{WORKLOAD_FILE} line {number}: not a workload ({err})") from None


def encode_record_line(index: int, trace_json: str, run_secs: list[float],
                       target: dict[str, Any], args_info: list[Any]) -> str:  # fmt: skip
    """The record-file line of a stored record (``trace_json`` as stored: JSON text)."""
    return json.dumps([index, [json.loads(trace_json), list(run_secs), target, args_info]])


def decode_record_line(line: str, number: int, workloads: int) -> RecordLine:
    """A record-file line, checked for shape and its trace by `tuning.checks.trace_gate`;
    ``workloads`` bounds its workload index."""
    try:
        index, (trace, run_secs, target, args_info) = json.loads(line)
        if not isinstance(index, int) or not 0 <= index < workloads:
            raise ValueError(f"workload index {index!r} is not one of the {workloads} workloads")
        if not isinstance(trace, list) or not isinstance(args_info, list):
            raise ValueError("trace and args_info must be lists")
        if not isinstance(target, dict) or not isinstance(target.get("kind"), str):
            raise ValueError("target must be a JSON target object")
        secs = checked_run_secs(run_secs)
        check_trace(trace)
        return RecordLine(index, trace, secs, target, args_info)
    except UnsafeTrace as err:
        raise InterchangeError(
            f"{RECORD_FILE} line {number}: its trace is refused: {err}"
        ) from None
    except (ValueError, TypeError, RecursionError) as err:
        reason = "nested too deeply" if isinstance(err, RecursionError) else err
        raise InterchangeError(f"{RECORD_FILE} line {number}: not a record ({reason})") from None


def checked_run_secs(run_secs: Any) -> list[float]:
    """``run_secs`` as floats, if it is 1 to `MAX_REPEATS` finite numbers (not strings, not
    booleans) between `MIN_RUN_SECS` and `MAX_RUN_SECS`, or MetaSchedule's failure marker
    (every value `FAILED_RUN_SECS`: a candidate that did not build or run); else
    `ValueError`."""
    if not isinstance(run_secs, list) or not 1 <= len(run_secs) <= MAX_REPEATS:
        raise ValueError(f"run_secs must be a list of 1 to {MAX_REPEATS} numbers")
    for x in run_secs:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ValueError(f"run_secs holds {json.dumps(x)[:40]}, not a finite number")
    if all(x == FAILED_RUN_SECS for x in run_secs):
        return [float(x) for x in run_secs]
    for x in run_secs:
        if not MIN_RUN_SECS <= x <= MAX_RUN_SECS:
            raise ValueError(f"run_secs {x!r} is outside [{MIN_RUN_SECS:g}, {MAX_RUN_SECS:g}] s")
    return [float(x) for x in run_secs]


def split_lines(text: str) -> list[tuple[int, str]]:
    """Non-empty lines with their 1-based numbers."""
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]

"""MetaSchedule traces as the store keeps them (JSON text), and the one failed-run marker.

A trace is stored as the compact JSON text of `TuningRecord.as_json`'s trace part
(`trace_to_text`) and read back in the form `Trace.apply_json_to_schedule` accepts
(`trace_from_text`). A candidate that failed to build or run is measured as
``run_secs == [FAILED_RUN_SECS]`` (MetaSchedule's own marker); `run_failed` is the one test of
it, used by the search loop, the worker's Database adapter and the JSON database import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

FAILED_RUN_SECS = 1e10
"""MetaSchedule's run_secs of a candidate that failed to build or run (``[1e10]``)."""

_FAILED_FROM_SECS = FAILED_RUN_SECS / 10
"""run_secs at or above this are the marker, not a measurement (no kernel runs for 30 years;
a tenth of the marker also reads float32 rounding of it as failed)."""


def run_failed(run_secs: Sequence[float]) -> bool:
    """True when ``run_secs`` is a failed candidate's: empty, or holding the marker."""
    return not run_secs or max(run_secs) >= _FAILED_FROM_SECS


def plain_json(value: Any) -> Any:
    """MetaSchedule's JSON form of a trace (or of args info) as plain JSON values.

    Like MetaSchedule's ``_json_de_tvm``, plus the one object a trace may hold: the IndexMap
    input of a layout transform (dense, NHWC conv2d). TVM 0.27's ``Trace::AsJSON`` leaves it
    an object while ``Trace::ApplyJSONToSchedule`` expects its ``save_json`` text, so it is
    stored as that text.
    """
    # TVM on first use only: the marker above is read by the API, which starts without TVM.
    import tvm
    from tvm.tirx import FloatImm, IndexMap, IntImm
    from tvm_ffi import Array, Map

    def plain(item: Any) -> Any:
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        if isinstance(item, (IntImm, FloatImm)):
            return item.value
        if isinstance(item, IndexMap):
            return tvm.ir.save_json(item)
        if isinstance(item, (Map, dict)):
            return {plain(k): plain(v) for k, v in item.items()}
        if isinstance(item, (Array, list, tuple)):
            return [plain(v) for v in item]
        raise TypeError(f"unexpected {type(item).__name__} in a MetaSchedule trace")

    return plain(value)


def trace_to_text(raw_trace: Any) -> str:
    """A trace (as `TuningRecord.as_json` holds it) as JSON text for the store."""
    return json.dumps(plain_json(raw_trace), separators=(",", ":"))


def trace_from_text(text: str) -> Any:
    """The stored trace, in the form `Trace.apply_json_to_schedule` accepts."""
    return json.loads(text)

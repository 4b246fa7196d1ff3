"""The requests an isolated child (`tuning.untrusted.child`) serves on user input, and nothing else.

Each request takes JSON values and returns JSON values; `Refused` carries a reason for the
submitter. They run TVM's parser, ``load_json`` and trace replay — the code paths that
evaluate Python or crash on crafted input — so they run only inside the jail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tuning.checks.trace_gate import UnsafeTrace, check_trace
from tuning.hardware.bf16 import register_named_intrinsics
from tuning.untrusted.model_requests import MODEL_REQUESTS
from tuning.untrusted.neighbour_requests import NEIGHBOUR_REQUESTS
from tuning.untrusted.workloads import Refused, checked_module, derive, describe

__all__ = ["REQUESTS", "Refused", "check", "derive", "parse"]


def parse(format: str, source: str) -> dict[str, Any]:  # noqa: A002 - the request's field
    """TVMScript text or TVM JSON → the checked workload (module JSON, hash, FLOP count)."""
    import tvm

    if format == "tvmscript":
        from tvm.script.parser.core.entry import _default_globals
        from tvm.script.parser.core.entry import parse as parse_script

        # TVMScript's own names, without ``tvm`` itself (the filter allows no such name).
        names = {k: v for k, v in _default_globals().items() if k in ("T", "I", "tir", "ir")}
        obj = parse_script(source, extra_vars=names)
    elif format == "json":
        obj = tvm.ir.load_json(source)
    else:
        raise Refused(f"unknown format {format!r}")
    return describe(checked_module(obj))


def check(mod_json: str, shash: str, traces: list[Any]) -> dict[str, Any]:
    """A stored (or about to be stored) workload still passes every check and has ``shash``;
    the indices of ``traces`` (MetaSchedule trace JSON) that the trace gate refuses or that do
    not replay on it."""
    import tvm
    from tvm.s_tir.schedule import Schedule, Trace

    mod = checked_module(tvm.ir.load_json(mod_json))
    described = describe(mod)
    if described["shash"] != shash or described["mod_json"] != mod_json:
        raise Refused("the module does not match its structural hash")
    bad = []
    for index, trace in enumerate(traces):
        try:
            check_trace(trace)
            register_named_intrinsics(json.dumps(trace))  # tunehub's own, which it may name
            Trace.apply_json_to_schedule(trace, Schedule(mod))
        except (UnsafeTrace, Exception):  # noqa: BLE001 - refused or not replayed: not fatal
            bad.append(index)
    return {"bad_traces": bad}


REQUESTS: dict[str, Callable[..., dict[str, Any]]] = {
    "parse": parse,
    "derive": derive,
    "check": check,
    **MODEL_REQUESTS,  # a model's import, its tasks' re-derivation, its compile
    **NEIGHBOUR_REQUESTS,  # a tuned neighbour's trace refitted to an untuned workload
}

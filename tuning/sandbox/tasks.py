"""The tasks an isolated child (`tuning.sandbox.child`) runs on user input, and nothing else.

Each task takes JSON values and returns JSON values; `Refused` carries a reason for the
submitter. They run TVM's parser, ``load_json`` and trace replay — the code paths that
evaluate Python or crash on crafted input — so they run only inside the jail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuning.ir import arg_specs, normalize, structural_hash
from tuning.sandbox.tir_checks import UnsafeTir, check_user_function

MAX_BUFFER_BYTES = 1 << 30


class Refused(ValueError):
    """The input is not a function the service accepts (the message says why)."""


def _checked_module(obj: Any) -> Any:
    """The normalised one-function IRModule of a parsed object, after every safety check."""
    import numpy as np
    import tvm

    if isinstance(obj, tvm.IRModule):
        funcs = [f for _, f in obj.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1 or len(obj.functions_items()) != 1:
            raise Refused("the module must hold exactly one PrimFunc")
        obj = funcs[0]
    if not isinstance(obj, tvm.tirx.PrimFunc):
        raise Refused(f"expected a PrimFunc, got {type(obj).__name__}")
    mod = normalize(obj)
    try:
        specs = arg_specs(mod["main"])
    except (TypeError, ValueError, KeyError, AttributeError):
        raise Refused("every parameter must be a buffer of static shape") from None
    if len(specs) < 2:
        raise Refused("the function needs inputs and one output (last)")
    total = sum(int(np.prod(shape)) * tvm.DataType(dtype).bits // 8 for shape, dtype in specs)
    if total > MAX_BUFFER_BYTES:
        raise Refused(f"buffers take {total} bytes, over {MAX_BUFFER_BYTES}")
    try:
        check_user_function(mod["main"])
    except UnsafeTir as err:
        raise Refused(str(err)) from None
    return mod


def _described(mod: Any) -> dict[str, Any]:
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    return {
        "mod_json": tvm.ir.save_json(mod),
        "shash": structural_hash(mod),
        "flop": float(estimate_tir_flops(mod)),
    }


def parse(format: str, source: str) -> dict[str, Any]:  # noqa: A002 - the request's field
    """TVMScript text or TVM JSON → the checked workload (module JSON, hash, FLOP count)."""
    import tvm

    if format == "tvmscript":
        from tvm.script.parser.core.entry import parse as parse_script

        obj = parse_script(source)
    elif format == "json":
        obj = tvm.ir.load_json(source)
    else:
        raise Refused(f"unknown format {format!r}")
    return _described(_checked_module(obj))


def derive(mod_json: str) -> dict[str, Any]:
    """Load another child's module JSON afresh and derive what the service keys on."""
    import tvm

    return _described(_checked_module(tvm.ir.load_json(mod_json)))


def check(mod_json: str, shash: str, traces: list[Any]) -> dict[str, Any]:
    """A stored (or about to be stored) workload still passes every check and has ``shash``;
    the indices of ``traces`` (MetaSchedule trace JSON) that do not replay on it."""
    import tvm
    from tvm.s_tir.schedule import Schedule, Trace

    mod = _checked_module(tvm.ir.load_json(mod_json))
    described = _described(mod)
    if described["shash"] != shash or described["mod_json"] != mod_json:
        raise Refused("the module does not match its structural hash")
    bad = []
    for index, trace in enumerate(traces):
        try:
            Trace.apply_json_to_schedule(trace, Schedule(mod))
        except Exception:  # noqa: BLE001 - a trace that does not replay is refused, not fatal
            bad.append(index)
    return {"bad_traces": bad}


TASKS: dict[str, Callable[..., dict[str, Any]]] = {"parse": parse, "derive": derive, "check": check}

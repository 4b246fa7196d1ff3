"""What the service keys a user's function on — the checked, normalised one-function module,
its structural hash and FLOP count — derived inside the jail from a parsed object or JSON.
Shared by the TIR tasks (`tuning.untrusted.requests`) and the model tasks
(`tuning.untrusted.model_requests`)."""

from __future__ import annotations

import math
from typing import Any

from tuning.checks.tir_checks import UnsafeTir, check_user_function
from tuning.ir import arg_specs, normalize, structural_hash

MAX_BUFFER_BYTES = 1 << 30


class Refused(ValueError):
    """The input is not a function the service accepts (the message says why)."""


def checked_module(obj: Any) -> Any:
    """The normalised one-function IRModule of a parsed object, after every safety check: one
    PrimFunc whose body is its root block (MetaSchedule schedules blocks; a function of bare
    loops has none), static buffers of at most `MAX_BUFFER_BYTES` in all (in Python integers:
    a (2^32, 2^32) buffer is 2^66 bytes, not the 0 that 64-bit arithmetic wraps it to)."""
    import tvm

    if isinstance(obj, tvm.IRModule):
        funcs = [f for _, f in obj.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1 or len(obj.functions_items()) != 1:
            raise Refused("the module must hold exactly one PrimFunc")
        obj = funcs[0]
    if not isinstance(obj, tvm.tirx.PrimFunc):
        raise Refused(f"expected a PrimFunc, got {type(obj).__name__}")
    mod = normalize(obj)
    if type(mod["main"].body).__name__ != "SBlockRealize":
        raise Refused("the function's body must be its root block holding T.sblock blocks")
    try:
        specs = arg_specs(mod["main"])
    except (TypeError, ValueError, KeyError, AttributeError):
        raise Refused("every parameter must be a buffer of static shape") from None
    if len(specs) < 2:
        raise Refused("the function needs inputs and one output (last)")
    total = sum(
        math.prod(int(x) for x in shape) * tvm.DataType(dtype).bits // 8 for shape, dtype in specs
    )
    if total > MAX_BUFFER_BYTES:
        raise Refused(f"buffers take {total} bytes, over {MAX_BUFFER_BYTES}")
    try:
        check_user_function(mod["main"])
    except UnsafeTir as err:
        raise Refused(str(err)) from None
    return mod


def describe(mod: Any) -> dict[str, Any]:
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    return {
        "mod_json": tvm.ir.save_json(mod),
        "shash": structural_hash(mod),
        "flop": float(estimate_tir_flops(mod)),
    }


def derive(mod_json: str) -> dict[str, Any]:
    """Load another child's module JSON afresh and derive what the service keys on."""
    import tvm

    return describe(checked_module(tvm.ir.load_json(mod_json)))

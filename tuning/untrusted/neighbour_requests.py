"""The isolated child's neighbour task: refit a tuned neighbour's best trace to an untuned
workload, replay it and compile it (`tuning.untrusted.neighbour_refit` is the parent's side).

The modules and traces come from the store (user workloads among them), and replaying a trace
runs TVM's loaders and schedule primitives on them, so this runs only inside the jail. The
refit is the warm start's (`tuning.search.seeding.refit_trace`): every ``SamplePerfectTile``
decision refitted to the new loop extents, then the target's postprocessors applied afresh.
"""

from __future__ import annotations

import json
from typing import Any

from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.ir import arg_specs
from tuning.publish.packing import split_packed
from tuning.search.neighbour_match import signature_distance
from tuning.search.seeding import refit_trace
from tuning.search.spaces import PACKED, space_module
from tuning.traces import plain_json, trace_to_text
from tuning.untrusted.workloads import Refused, checked_module

MAX_REQUESTS = 16  # workloads refitted by one child
MAX_CANDIDATES = 32  # neighbours sent per workload
TRIED = 4  # nearest neighbours tried per workload


def _signature(mod: Any) -> list[tuple[list[int], str]]:

    return [([int(x) for x in shape], str(dtype)) for shape, dtype in arg_specs(mod["main"])]


def _refit_one(request: Any, target: Any) -> dict[str, Any]:
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.schedule import Schedule

    if not isinstance(request, dict) or not isinstance(request.get("mod_json"), str):
        raise Refused("requests: each needs mod_json")
    candidates = request.get("candidates")
    if not isinstance(candidates, list) or len(candidates) > MAX_CANDIDATES:
        raise Refused(f"requests: candidates must be a list of at most {MAX_CANDIDATES}")
    mod = checked_module(tvm.ir.load_json(request["mod_json"]))
    order = list(range(len(candidates)))
    sources: dict[int, Any] = {}
    for index in order:
        candidate = candidates[index]
        if not isinstance(candidate, dict) or not all(
            isinstance(candidate.get(k), str) for k in ("mod_json", "trace_json")
        ):
            raise Refused("requests: each candidate needs mod_json and trace_json")
        layout_free = candidate.get("layout_free", [])
        if not isinstance(layout_free, list) or not all(type(i) is int for i in layout_free):
            raise Refused("requests: a candidate's layout_free is a list of operand indices")
        sources[index] = checked_module(tvm.ir.load_json(candidate["mod_json"]))
    if request.get("by_signature"):  # a user workload: same buffers, nearest by sizes
        own = _signature(mod)
        scored = [(signature_distance(own, _signature(sources[i])), i) for i in order]
        order = [i for distance, i in sorted(s for s in scored if s[0] is not None)]
    failures = []
    for index in order[:TRIED]:
        try:
            # A packed best is refitted in the packed space (RewriteLayout packs the weights).
            layout_free = candidates[index].get("layout_free") or []
            search_mod = space_module(mod, PACKED, tuple(layout_free)) if layout_free else mod
            context = TuneContext(
                mod=search_mod, target=target, space_generator="post-order-apply", num_threads=1
            ).clone()  # num_threads given: counting cores reads /proc, which the jail lacks
            postprocs = list(context.space_generator.postprocs)
            trace = refit_trace(
                sources[index], candidates[index]["trace_json"], search_mod, postprocs
            )
            if trace is None:
                failures.append(f"{index}: the postprocessors refused it")
                continue
            sch = Schedule(mod)  # replayed as a build and the worker replay it
            trace.apply_to_schedule(sch, remove_postproc=False)
            split = split_packed(sch.mod, drop_in=False)
            tvm.compile(split.mod, target=target)
        except Exception as err:  # noqa: BLE001 - a neighbour that does not fit is skipped
            failures.append(f"{index}: {type(err).__name__}: {str(err)[-200:]}")
            continue
        args = [plain_json(a.as_json()) for a in ArgInfo.from_prim_func(mod["main"])]
        return {
            "candidate": index,
            "trace_json": trace_to_text(trace.as_json(remove_postproc=False)),
            "args_info": args,
            "packed": [param.as_json() for param in split.packed],
        }
    return {"candidate": None, "failures": failures[:TRIED]}


def refit(target: Any, requests: Any) -> dict[str, Any]:
    """For each request (``mod_json``: the untuned workload; ``candidates``: tuned neighbours'
    ``mod_json`` and best ``trace_json``, nearest first; ``by_signature``: order them here by
    buffer signature instead, dropping those that differ), the first of the nearest `TRIED`
    whose trace refits, replays and compiles for ``target``: its index, the refitted trace as
    the store keeps traces and the workload's args info; ``candidate`` None when none fits."""
    import tvm

    if not isinstance(requests, list) or len(requests) > MAX_REQUESTS:
        raise Refused(f"requests: a list of at most {MAX_REQUESTS}")
    if not isinstance(target, dict):
        raise Refused("target: a canonical TVM target (JSON object)")
    load_tensor_intrinsics([json.loads(json.dumps(target))])  # TuneContext's import: ~1 s
    built = tvm.target.Target(target)
    return {"answers": [_refit_one(request, built) for request in requests]}


NEIGHBOUR_REQUESTS = {"refit_neighbour": refit}

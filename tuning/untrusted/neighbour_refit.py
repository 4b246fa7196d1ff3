"""The parent's side of the neighbour task (`tuning.untrusted.neighbour_requests`): refit tuned
neighbours' traces to untuned workloads in one isolated child, and trust its answer only as
far as its shape (the trace is replayed again, in a child, before any worker builds it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuning.checks.trace_gate import UnsafeTrace, check_trace_text
from tuning.jail import Limits, SandboxFailed
from tuning.untrusted.ask import ask
from tuning.untrusted.neighbour_requests import MAX_CANDIDATES, MAX_REQUESTS

# Measured in the jail on a 2-core host: TVM's import and the x86 intrinsics take ~2.5 s of
# CPU; each refit, replay and compile of a small kernel well under a second.
REFIT_LIMITS = Limits(cpu_seconds=120, wall_seconds=180.0, address_space=4 << 30,
                      tree_memory=4 << 30)  # fmt: skip
MAX_TRACE_CHARS = 1 << 20


class RefitFailed(RuntimeError):
    """The child died, overran a limit, refused the input or answered out of protocol."""


@dataclass(frozen=True)
class Candidate:
    """A tuned neighbour: its module JSON, its best's trace (as the store keeps it) and, for a
    best of the packed space, the operands it packs (replayed with them layout-free)."""

    mod_json: str
    trace_json: str
    layout_free: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class RefitRequest:
    """An untuned workload and its neighbours, nearest first (``by_signature``: the child
    orders them by buffer signature instead, as for model tasks)."""

    mod_json: str
    candidates: list[Candidate]
    by_signature: bool = False


@dataclass(frozen=True)
class Refitted:
    """The neighbour (index into the request's candidates) whose refitted trace replays and
    compiles, the trace, the workload's args info and the weights it packs
    (`tuning.publish.packing.PackedParam` JSON); ``candidate`` None: none fitted."""

    candidate: int | None
    trace_json: str = ""
    args_info: list[Any] = field(default_factory=list)
    packed_params: list[dict[str, Any]] = field(default_factory=list)


def refit_in_jail(target: dict[str, Any], requests: list[RefitRequest]) -> list[Refitted]:
    """One `Refitted` per request, in order (`RefitFailed` on any failure of the child)."""
    if not requests:
        return []
    if len(requests) > MAX_REQUESTS or any(len(r.candidates) > MAX_CANDIDATES for r in requests):
        raise ValueError(f"at most {MAX_REQUESTS} requests of {MAX_CANDIDATES} candidates")
    payload = {
        "target": target,
        "requests": [
            {
                "mod_json": r.mod_json,
                "by_signature": r.by_signature,
                "candidates": [vars(c) for c in r.candidates],
            }
            for r in requests
        ],
    }
    try:
        answer = ask("refit_neighbour", payload, REFIT_LIMITS)
    except SandboxFailed as err:
        raise RefitFailed(str(err)) from None
    if answer.get("ok") is not True:
        error = answer.get("error")
        raise RefitFailed(error[:1000] if isinstance(error, str) else "the refit was refused")
    answers = answer.get("answers")
    if not isinstance(answers, list) or len(answers) != len(requests):
        raise RefitFailed("the isolated refit answered out of protocol")
    return [
        _checked(item, len(request.candidates))
        for item, request in zip(answers, requests, strict=True)
    ]


def _checked(item: Any, candidates: int) -> Refitted:
    if not isinstance(item, dict):
        raise RefitFailed("the isolated refit answered out of protocol")
    index = item.get("candidate")
    if index is None:
        return Refitted(None)
    trace, args, packed = item.get("trace_json"), item.get("args_info"), item.get("packed")
    if type(index) is not int or not 0 <= index < candidates:
        raise RefitFailed("the isolated refit answered out of protocol")
    if not (isinstance(trace, str) and 0 < len(trace) <= MAX_TRACE_CHARS):
        raise RefitFailed("the isolated refit answered out of protocol")
    try:
        check_trace_text(trace)
    except UnsafeTrace as err:
        raise RefitFailed(f"the isolated refit answered a trace the gate refuses: {err}") from None
    if not isinstance(args, list) or not isinstance(packed, list):
        raise RefitFailed("the isolated refit answered out of protocol")
    if not all(isinstance(p, dict) for p in packed):
        raise RefitFailed("the isolated refit answered out of protocol")
    return Refitted(index, trace, args, packed)
